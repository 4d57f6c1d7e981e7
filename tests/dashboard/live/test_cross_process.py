"""Events written by a separate ``mcpserve`` process reach a browser's socket on a separate web
process: the real ASGI app under uvicorn, a real WebSocket client, a real MCP client over stdio.

Both servers share one SQLite file in a temporary ``DEEPWORK_VAR_DIR`` (the embedded default),
so these tests need no test database of pytest's.
"""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path

import pytest
from django.conf import settings
from fastmcp import Client
from fastmcp.client.transports import StdioTransport
from websockets.asyncio.client import connect

from tests.support.processes import MANAGE, child_env, start_uvicorn, stop, wait_for_port_async

pytestmark = pytest.mark.e2e

# Receive timeout for an event: far above the default poll, far below the 30 s poll of the
# Redis test, so an arrival there can only be the announcement's doing.
ARRIVAL_TIMEOUT = 10
REDIS_DB = 13

# Migrate, then make a watcher with the permission to watch sessions, logged in through a
# session of the database (one Django start-up instead of two).
MAKE_WATCHER = """
from django.core.management import call_command
call_command("migrate", interactive=False, verbosity=0)
from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY
from django.contrib.auth.models import Permission, User
from django.contrib.sessions.backends.db import SessionStore
user = User.objects.create_user("watcher", password="unused-password")
user.user_permissions.add(Permission.objects.get(codename="view_workflowsession"))
session = SessionStore()
session[SESSION_KEY] = str(user.pk)
session[BACKEND_SESSION_KEY] = "django.contrib.auth.backends.ModelBackend"
session[HASH_SESSION_KEY] = user.get_session_auth_hash()
session.create()
print(session.session_key)
"""


def base_env(var_dir: Path, **extra: str) -> dict[str, str]:
    return child_env(DEEPWORK_VAR_DIR=str(var_dir), **extra)


def manage(env: dict[str, str], *args: str) -> str:
    done = subprocess.run(
        [sys.executable, MANAGE, *args],
        env=env,
        cwd=settings.BASE_DIR,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.fixture(scope="module")
def shared_database(tmp_path_factory) -> tuple[Path, str]:
    """A migrated SQLite file of its own and a watcher's session key."""
    var_dir = tmp_path_factory.mktemp("live-var")
    env = base_env(var_dir)
    session_key = manage(env, "shell", "-c", MAKE_WATCHER).split()[-1]
    return var_dir, session_key


class WebServer:
    """The real ASGI application under uvicorn, on a free port."""

    def __init__(self, env: dict[str, str]) -> None:
        self.process, self.port = start_uvicorn(env)

    async def listening(self) -> None:
        await wait_for_port_async(self.process, self.port, "uvicorn")

    def stop(self) -> None:
        stop(self.process)


@contextmanager
def web_server(env: dict[str, str]) -> Iterator[WebServer]:
    server = WebServer(env)
    try:
        yield server
    finally:
        server.stop()


def mcpserve(project: Path, env: dict[str, str]) -> Client:
    return Client(
        StdioTransport(
            command=sys.executable,
            args=[MANAGE, "mcpserve", "--path", str(project)],
            env=env,
            cwd=str(project),
        )
    )


def redis_or_skip() -> str:
    try:
        with socket.create_connection(("127.0.0.1", 6379), timeout=1) as sock:
            sock.sendall(b"PING\r\n")
            if not sock.recv(16).startswith(b"+PONG"):
                raise OSError("no PONG")
    except OSError as error:
        pytest.skip(f"Redis is not reachable at 127.0.0.1:6379 ({error}); REDIS_URL path untested")
    return f"redis://127.0.0.1:6379/{REDIS_DB}"


async def session_started_over_the_socket(
    server: WebServer, session_key: str, project: Path, env: dict[str, str]
) -> float:
    """Open the socket, start a workflow in an mcpserve process, and wait for its event;
    return the seconds from the event's creation to its arrival (information only)."""
    # mcpserve starts while uvicorn does; the workflow starts once the socket is open.
    async with mcpserve(project, env) as client:
        await server.listening()
        async with connect(
            f"ws://127.0.0.1:{server.port}/ws/events/?after=0",
            origin=f"http://127.0.0.1:{server.port}",
            additional_headers={"Cookie": f"sessionid={session_key}"},
            open_timeout=ARRIVAL_TIMEOUT,
        ) as websocket:
            result = await client.call_tool(
                "start_workflow",
                {"goal": "watched live", "job_name": "demo", "workflow_name": "main"},
            )
            session_id = json.loads(result.content[0].text)["begin_step"]["session_id"]
            while True:
                message = json.loads(await asyncio.wait_for(websocket.recv(), ARRIVAL_TIMEOUT))
                assert message["type"] == "events"
                started = [
                    event
                    for event in message["events"]
                    if event["kind"] == "session_started" and event["session_id"] == session_id
                ]
                if started:
                    arrived = time.time()
                    break
    assert started[0]["payload"]["goal"] == "watched live"
    assert started[0]["agent_id"]
    return arrived - datetime.fromisoformat(started[0]["created_at"]).timestamp()


async def test_a_workflow_started_by_mcpserve_reaches_the_socket_by_polling_sqlite(
    shared_database, demo_project
):
    var_dir, session_key = shared_database
    env = base_env(var_dir)
    with web_server(env) as server:
        delay = await session_started_over_the_socket(server, session_key, demo_project, env)
    print(f"SQLite outbox poll: session_started arrived {delay * 1000:.0f} ms after it was written")


async def test_with_redis_an_announcement_delivers_long_before_the_poll(
    shared_database, demo_project
):
    var_dir, session_key = shared_database
    env = base_env(var_dir, REDIS_URL=redis_or_skip())
    # The web process would poll only every 30 s: an arrival within ARRIVAL_TIMEOUT is the
    # announcement's doing.
    web_env = {**env, "DEEPWORK_OUTBOX_POLL_SECONDS": "30"}
    with web_server(web_env) as server:
        delay = await session_started_over_the_socket(server, session_key, demo_project, env)
    print(f"Redis announcement: session_started arrived {delay * 1000:.0f} ms after it was written")
