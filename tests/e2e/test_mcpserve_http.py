"""``mcpserve --transport http``: loopback only, bearer token required, host/origin checked."""

from __future__ import annotations

import http.client
import json
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastmcp import Client
from fastmcp.client.transports import StreamableHttpTransport

from tests.support.processes import (
    MANAGE,
    child_env_on_test_db,
    free_port,
    initialize_request,
    stop,
    wait_for_port,
)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.e2e]

TOKEN = "test-token-123"
INITIALIZE = initialize_request("t")
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


def start_http_server(project: Path, *extra: str, **env: str) -> tuple[subprocess.Popen, int]:
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, MANAGE, "mcpserve", "--path", str(project)]
        + ["--transport", "http", "--port", str(port), *extra],
        env=child_env_on_test_db(DEEPWORK_MCP_TOKEN=TOKEN, **env),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    wait_for_port(process, port, "mcpserve --transport http")
    return process, port


@pytest.fixture
def http_server(demo_project: Path) -> Iterator[str]:
    process, port = start_http_server(demo_project)
    yield f"http://127.0.0.1:{port}/mcp"
    stop(process)


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


AUTHORISED = {**HEADERS, "Authorization": f"Bearer {TOKEN}"}


def test_allowed_hosts_are_served_and_every_other_host_refused(demo_project):
    # Stands in for --host 0.0.0.0 reached at the machine's address: the server binds loopback
    # here, and the requests carry the names a remote client would put in Host.
    process, port = start_http_server(
        demo_project,
        "--allowed-host",
        "deepwork.example.lan",
        "--allowed-host",
        "10.1.2.3",
        DEEPWORK_MCP_ALLOWED_HOSTS="build-box, *.agents.example.lan",
    )
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        for allowed in (
            f"deepwork.example.lan:{port}",
            f"10.1.2.3:{port}",
            "10.1.2.3",
            f"build-box:{port}",
            f"a.agents.example.lan:{port}",
            f"127.0.0.1:{port}",
            f"localhost:{port}",
        ):
            assert post(url, {**AUTHORISED, "Host": allowed}) == 200, allowed
        for refused in (f"evil.example.com:{port}", f"10.1.2.4:{port}", "agents.example.lan"):
            assert post(url, {**AUTHORISED, "Host": refused}) == 421, refused
        # The Origin check stays: a page elsewhere cannot use an allowed Host.
        origin = {**AUTHORISED, "Host": f"10.1.2.3:{port}", "Origin": "http://evil.example.com"}
        assert post(url, origin) == 403
        same_site = {**AUTHORISED, "Host": f"10.1.2.3:{port}", "Origin": f"http://10.1.2.3:{port}"}
        assert post(url, same_site) == 200
    finally:
        stop(process)
