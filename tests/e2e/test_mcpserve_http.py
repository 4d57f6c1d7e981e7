"""``mcpserve --transport http``: loopback only, bearer token required, host/origin checked."""

from __future__ import annotations

import http.client
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.conf import settings
from fastmcp import Client
from fastmcp.client.transports import StreamableHttpTransport

from tests.e2e.test_mcpserve_stdio import child_database_url

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.e2e]

TOKEN = "test-token-123"
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"},
    },
}
HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def post(url: str, headers: dict[str, str]) -> int:
    """POST an MCP initialize to ``url`` with exactly these headers; return the status."""
    host, rest = url.removeprefix("http://").split("/", 1)
    conn = http.client.HTTPConnection(host, timeout=10)
    conn.putrequest("POST", "/" + rest, skip_host=True, skip_accept_encoding=True)
    body = json.dumps(INITIALIZE).encode()
    for name, value in {"Host": host, **headers, "Content-Length": str(len(body))}.items():
        conn.putheader(name, value)
    conn.endheaders(body)
    status = conn.getresponse().status
    conn.close()
    return status


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def http_server(demo_project: Path):
    port = free_port()
    env = {
        **os.environ,
        "DATABASE_URL": child_database_url(),
        "SECRET_KEY": "e2e-not-secret",
        "DEEPWORK_MCP_TOKEN": TOKEN,
    }
    process = subprocess.Popen(
        [
            sys.executable,
            str(Path(settings.BASE_DIR) / "manage.py"),
            "mcpserve",
            "--path",
            str(demo_project),
            "--transport",
            "http",
            "--port",
            str(port),
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            break
        except OSError:
            if process.poll() is not None:
                pytest.fail(f"mcpserve exited: {process.stderr.read().decode()}")
            time.sleep(0.1)
    yield f"http://127.0.0.1:{port}/mcp"
    process.terminate()
    process.wait(timeout=10)


def test_requests_without_the_token_are_refused(http_server):
    assert post(http_server, HEADERS) == 401
    assert post(http_server, {**HEADERS, "Authorization": "Bearer nope"}) == 401
    assert post(http_server, {**HEADERS, "Authorization": f"Bearer {TOKEN}"}) == 200


def test_a_foreign_host_header_is_refused(http_server):
    headers = {**HEADERS, "Authorization": f"Bearer {TOKEN}", "Host": "evil.example.com"}
    assert post(http_server, headers) == 421
    origin = {**HEADERS, "Authorization": f"Bearer {TOKEN}", "Origin": "http://evil.example.com"}
    assert post(http_server, origin) == 403


def listening_addresses(port: int) -> set[str]:
    """The IPv4 addresses a local socket listens on for ``port``, read from /proc/net/tcp."""
    found = set()
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        local, state = line.split()[1], line.split()[3]
        address, local_port = local.split(":")
        if state == "0A" and int(local_port, 16) == port:
            found.add(socket.inet_ntoa(bytes.fromhex(address)[::-1]))
    return found


@pytest.mark.skipif(not Path("/proc/net/tcp").exists(), reason="needs Linux /proc")
def test_it_listens_on_loopback_only(http_server):
    port = int(http_server.rsplit(":", 1)[1].split("/")[0])
    assert listening_addresses(port) == {"127.0.0.1"}


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_an_authorised_client_runs_the_tools(http_server, mode):
    transport = StreamableHttpTransport(http_server, headers={"Authorization": f"Bearer {TOKEN}"})
    async with Client(transport, mode=mode) as client:
        result = await client.call_tool("get_workflows", {})
    assert [job["name"] for job in result.structured_content["jobs"]][:2] == ["demo", "nested"]
