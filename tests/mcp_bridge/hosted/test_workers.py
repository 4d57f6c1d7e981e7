"""Scale-out: one agent's consecutive calls served by different processes continue its stack.

Two ways: two separate servers (think two machines) with every request sent to the other one
in turn, so each call is known to switch; and uvicorn with two workers behind one socket on
PostgreSQL, where the kernel picks the worker for each connection.
"""

from __future__ import annotations

import itertools
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx2
import pytest
from django.conf import settings
from django.db import connection
from fastmcp import Client
from fastmcp.client.transports import StreamableHttpTransport

from tests.mcp_bridge.hosted.conftest import RECHECK_SECONDS, Tokens, call, start_web
from tests.support.processes import child_env_on_test_db, free_port, stop, wait_for_port

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.e2e]

SERVING = re.compile(r"Serving /mcp for project \d+ with toolsets \S+ in worker (\d+)")
# Rounds of the two-step workflow (three calls each) before giving up on seeing both workers.
MAX_ROUNDS = 40


def one_connection_per_request(**options: Any) -> httpx2.AsyncClient:
    # No keep-alive: every request opens a connection, which either worker may accept, as a
    # load balancer spreading requests would do.
    options.setdefault("timeout", httpx2.Timeout(30))
    return httpx2.AsyncClient(limits=httpx2.Limits(max_keepalive_connections=0), **options)


class Alternating(httpx2.AsyncBaseTransport):
    """Sends each tool call to the next of ``ports`` in turn (anything else to the port of the
    last call), recording (port, JSON-RPC method) of every POST."""

    def __init__(self, ports: list[int]) -> None:
        self.ports = itertools.cycle(ports)
        self.port = next(self.ports)
        self.inner = httpx2.AsyncHTTPTransport()
        self.sent: list[tuple[int, str]] = []

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        if request.method == "POST":
            method = json.loads(request.content).get("method", "")
            if method == "tools/call":
                self.port = next(self.ports)
            self.sent.append((self.port, method))
        request.url = request.url.copy_with(port=self.port)
        return await self.inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self.inner.aclose()


async def run_rounds(agent: Client, rounds: int) -> None:
    """``rounds`` times the two-step workflow, checking the stack after every call."""
    start: dict[str, Any] = {"goal": "g", "job_name": "nested", "workflow_name": "only"}
    for _ in range(rounds):
        started = await call(agent, "start_workflow", start)
        assert started["stack"] == [{"workflow": "nested/only", "step": "first"}]
        step = await call(agent, "finished_step", {"outputs": {"first.md": "first.md"}})
        assert step["stack"] == [{"workflow": "nested/only", "step": "second"}]
        done = await call(agent, "finished_step", {"outputs": {}})
        assert done["status"] == "workflow_complete"
        assert done["stack"] == []


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_each_call_on_the_other_server_continues_the_stack(tokens: Tokens, mode):
    first, first_url = start_web()
    second, second_url = start_web()
    ports = [int(url.split(":")[2].split("/")[0]) for url in (first_url, second_url)]
    alternating = Alternating(ports)
    try:
        transport = StreamableHttpTransport(
            first_url,
            headers={"Authorization": f"Bearer {tokens.bound}"},
            httpx_client_factory=lambda **options: httpx2.AsyncClient(
                transport=alternating, **options
            ),
        )
        async with Client(transport, mode=mode) as agent:
            await run_rounds(agent, 3)
    finally:
        stop(first)
        stop(second)
    calls = [port for port, method in alternating.sent if method == "tools/call"]
    assert len(calls) == 9
    # Consecutive calls always on different servers; the first not where the client started.
    assert all(a != b for a, b in itertools.pairwise([ports[0], *calls]))


def workers_seen(log: Path) -> set[str]:
    return set(SERVING.findall(log.read_text(errors="replace")))


@pytest.mark.skipif(
    connection.vendor != "postgresql", reason="several workers need PostgreSQL (DATABASE_URL)"
)
@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_calls_on_either_worker_continue_one_stack(tokens: Tokens, tmp_path: Path, mode):
    port, log = free_port(), tmp_path / "uvicorn.log"
    with log.open("wb") as stderr:
        process = subprocess.Popen(  # noqa: ASYNC220  # started once, not awaited
            [sys.executable, "-m", "uvicorn", "deepwork_site.asgi:application"]
            + ["--host", "127.0.0.1", "--port", str(port), "--workers", "2"],
            cwd=settings.BASE_DIR,
            env=child_env_on_test_db(
                DEEPWORK_LOG_LEVEL="INFO", DEEPWORK_MCP_RECHECK_SECONDS=RECHECK_SECONDS
            ),
            stdout=subprocess.DEVNULL,
            stderr=stderr,
        )
    try:
        wait_for_port(process, port, "uvicorn --workers 2")
        transport = StreamableHttpTransport(
            f"http://127.0.0.1:{port}/mcp",
            headers={"Authorization": f"Bearer {tokens.bound}"},
            httpx_client_factory=one_connection_per_request,
        )
        async with Client(transport, mode=mode) as agent:
            rounds = 0
            while len(workers_seen(log)) < 2 and rounds < MAX_ROUNDS:
                rounds += 1
                await run_rounds(agent, 1)
            # Calls after both workers have served one keep the stack too.
            await run_rounds(agent, 2)
        assert len(workers_seen(log)) == 2, f"one worker served all {rounds * 3} calls"
    finally:
        stop(process)
