"""Child processes of the tests: their environment, their ports, waiting for them, stopping them.

Every test that starts ``manage.py mcpserve``, uvicorn or another Django process builds its
environment and waits for its port here, so there is one place to change how children start.
"""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.conf import settings

MANAGE = str(Path(settings.BASE_DIR) / "manage.py")
START_TIMEOUT = 30.0

# Raw JSON-RPC for the tests that speak to mcpserve line by line instead of through a client.
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}


def initialize_request(client: str) -> dict[str, object]:
    """The ``initialize`` request (id 1) of a client named ``client``."""
    return {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": client, "version": "1"},
        },
    }


def handshake(client: str) -> list[dict[str, object]]:
    """Initialize, initialized, then ``tools/list`` as request 2."""
    return [
        initialize_request(client),
        INITIALIZED,
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
    ]


def child_database_url() -> str:
    """The URL of the database this test runs on (a file for SQLite), for a child process."""
    from django.db import connection

    db = connection.settings_dict
    if connection.vendor == "sqlite":
        return f"sqlite:///{db['NAME']}"
    credentials = db["USER"] or ""
    if db["PASSWORD"]:
        credentials += f":{db['PASSWORD']}"
    host = db["HOST"] or "127.0.0.1"
    port = db["PORT"] or 5432
    return f"postgres://{credentials}@{host}:{port}/{db['NAME']}"


def child_env(*, inherit: bool = False, **extra: str) -> dict[str, str]:
    """A child's environment: settings module, a fixed secret, warnings only, then ``extra``.

    ``inherit`` starts from this process's environment (minus REDIS_URL unless given), for
    children that need what the developer's shell provides; otherwise only PATH and HOME pass.
    """
    if inherit:
        env = {key: value for key, value in os.environ.items() if key != "REDIS_URL"}
    else:
        env = {"PATH": os.environ.get("PATH", ""), "HOME": os.environ.get("HOME", "/tmp")}
    env.update(
        {
            "DJANGO_SETTINGS_MODULE": "deepwork_site.settings",
            "SECRET_KEY": "tests-not-secret",
            "DEEPWORK_LOG_LEVEL": "WARNING",
            # As in this process (tests/conftest.py): deterministic, unless a test says "on".
            "DEEPWORK_STEP_FILES": os.environ.get("DEEPWORK_STEP_FILES", "on"),
        }
    )
    env.update(extra)
    return env


def child_env_on_test_db(**extra: str) -> dict[str, str]:
    """A child's environment on the test database (which must hold committed data)."""
    return child_env(DATABASE_URL=child_database_url(), **extra)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _accepting(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
    except OSError:
        return False
    return True


def _exited(process: subprocess.Popen[bytes], what: str) -> None:
    stderr = process.stderr.read().decode(errors="replace") if process.stderr else ""
    pytest.fail(f"{what} exited with {process.returncode}: {stderr}")


def wait_for_port(
    process: subprocess.Popen[bytes], port: int, what: str, timeout: float = START_TIMEOUT
) -> None:
    """Block until ``process`` accepts connections on ``port``; fail if it exits or is slow."""
    deadline = time.monotonic() + timeout
    while not _accepting(port):
        if process.poll() is not None:
            _exited(process, what)
        if time.monotonic() > deadline:
            pytest.fail(f"{what} did not listen on {port} within {timeout:.0f} s")
        time.sleep(0.05)


async def wait_for_port_async(
    process: subprocess.Popen[bytes], port: int, what: str, within: float = START_TIMEOUT
) -> None:
    """``wait_for_port`` without blocking the event loop."""
    deadline = time.monotonic() + within
    while not _accepting(port):
        if process.poll() is not None:
            _exited(process, what)
        if time.monotonic() > deadline:
            pytest.fail(f"{what} did not listen on {port} within {within:.0f} s")
        await asyncio.sleep(0.05)


def start_uvicorn(
    env: dict[str, str], port: int | None = None
) -> tuple[subprocess.Popen[bytes], int]:
    """The real ASGI application under uvicorn on a free loopback port, or ``port`` (not yet
    waited for)."""
    port = port or free_port()
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "uvicorn",
            "deepwork_site.asgi:application",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--log-level",
            "warning",
        ],
        cwd=settings.BASE_DIR,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    return process, port


def stop(process: subprocess.Popen[bytes], timeout: float = 10) -> None:
    """Terminate ``process``, killing it if it does not exit within ``timeout``."""
    if process.poll() is None:
        process.terminate()
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
