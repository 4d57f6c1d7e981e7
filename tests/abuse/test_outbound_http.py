"""A hostile workflow source, played by real listeners on 127.0.0.1: a redirect to another
origin never carries the source's token there, a source that drips its answer is cut off at
the request's deadline (not a per-read timeout), an oversized answer is refused, and only
http(s) addresses are fetched at all."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from fastmcp import Client

from mcp_bridge.server import create_server
from mcp_bridge.toolsets.specs import SourceConfig
from workflow_tools import outbound
from workflow_tools.sources import RemoteSource, SourceUnavailable

LISTING = [{"id": "wf-1", "name": "Data analysis", "description": "Analyse data"}]
# Far above the deadlines used here, far below "hung": proves the call returned, not how fast.
HANG_BOUND = 10.0
# A byte every DRIP seconds reaches the client well inside a per-read timeout of DEADLINE, so
# only a deadline on the whole request stops it; the source gives up after DRIP_FOR seconds,
# past the hang bound, so a client without one fails the bound instead of hanging the suite.
DRIP = 2.0
DEADLINE = 3.0
DRIP_FOR = 20.0


class Listener:
    """A real HTTP server on a free port that records each request's Authorization header."""

    def __init__(self, answer: Any) -> None:
        self.seen: list[tuple[str, str | None]] = []
        listener = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                listener.seen.append((self.path, self.headers.get("Authorization")))
                answer(self)

            do_POST = do_GET

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def listeners() -> Iterator[list[Listener]]:
    made: list[Listener] = []
    yield made
    for listener in made:
        listener.close()


def json_answer(body: Any, status: int = 200):
    def answer(handler: BaseHTTPRequestHandler) -> None:
        raw = json.dumps(body).encode()
        handler.send_response(status)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(raw)))
        handler.end_headers()
        handler.wfile.write(raw)

    return answer


def redirect_to(location: str, status: int = 302):
    def answer(handler: BaseHTTPRequestHandler) -> None:
        handler.send_response(status)
        handler.send_header("Location", location)
        handler.send_header("Content-Length", "0")
        handler.end_headers()

    return answer


def test_a_redirect_to_another_origin_never_carries_the_token(listeners, caplog):
    elsewhere = Listener(json_answer(LISTING))
    listeners.append(elsewhere)
    source_host = Listener(redirect_to(f"{elsewhere.url}/steal"))
    listeners.append(source_host)
    source = RemoteSource(f"{source_host.url}/workflows", "s3cret-token", timeout=5)

    source.refresh(force=True)

    assert source_host.seen == [("/workflows", "Bearer s3cret-token")]
    assert elsewhere.seen == []
    assert source.workflows() == ()
    assert source.last_error == (
        f"workflow source {source_host.url}/workflows is unavailable: redirected (302) to "
        f"another origin, {elsewhere.url}/steal; not followed, so nothing sent to it (a token "
        "included) reaches that host"
    )
    assert "s3cret-token" not in caplog.text


def test_a_redirect_within_the_origin_is_followed_with_the_token(listeners):
    def answer(handler: BaseHTTPRequestHandler) -> None:
        if handler.path == "/old":
            redirect_to("/new", 301)(handler)
        else:
            json_answer(LISTING)(handler)

    host = Listener(answer)
    listeners.append(host)
    source = RemoteSource(f"{host.url}/old", "tok", timeout=5)
    source.refresh(force=True)
    assert [w.id for w in source.workflows()] == ["wf-1"]
    assert host.seen == [("/old", "Bearer tok"), ("/new", "Bearer tok")]


def test_a_redirect_loop_within_the_origin_stops(listeners):
    host = Listener(redirect_to("/again"))
    listeners.append(host)
    with pytest.raises(outbound.OutboundRefused, match="redirected more than 3 times"):
        outbound.fetch("GET", f"{host.url}/x", deadline=5)
    assert len(host.seen) == 4


def test_a_post_is_not_turned_into_a_get_by_a_redirect(listeners):
    host = Listener(redirect_to("/elsewhere-on-the-same-host", 302))
    listeners.append(host)
    with pytest.raises(outbound.OutboundRefused, match=r"answered a POST with a redirect \(302\)"):
        outbound.fetch("POST", f"{host.url}/runs", body=b"{}", deadline=5)
    assert [path for path, _ in host.seen] == ["/runs"]


@pytest.fixture
def dripping() -> Iterator[str]:
    """A raw socket server that answers a valid status line, then one header byte every
    ``DRIP`` seconds until ``DRIP_FOR`` has passed (or the client leaves)."""
    server = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def drip(conn: socket.socket) -> None:
        with conn:
            conn.recv(65536)
            try:
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n")
                until = time.monotonic() + DRIP_FOR
                while not stop.is_set() and time.monotonic() < until:
                    conn.sendall(b"X")
                    stop.wait(DRIP)
            except OSError:
                return

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                return
            threading.Thread(target=drip, args=(conn,), daemon=True).start()

    threading.Thread(target=serve, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.getsockname()[1]}/workflows"
    finally:
        stop.set()
        server.close()


def test_a_dripping_source_is_cut_off_at_the_deadline(dripping):
    started = time.monotonic()
    with pytest.raises(outbound.OutboundTimeout, match=r"took longer than 3 s; cut off"):
        outbound.fetch("GET", dripping, deadline=DEADLINE)
    assert time.monotonic() - started < HANG_BOUND


@pytest.mark.django_db(transaction=True)
async def test_refresh_reports_a_dripping_source_as_unavailable(dripping, project_dir):
    mcp = create_server(
        project_dir, toolsets=["workflow-tools"], workflow_sources=[SourceConfig(dripping, "t")]
    )
    [remote] = [s for s in mcp.workflow_tools.sources if isinstance(s, RemoteSource)]
    remote.timeout = DEADLINE
    started = time.monotonic()
    async with Client(mcp) as client:
        answer = await client.call_tool("refresh_workflow_tools", {})
    assert time.monotonic() - started < HANG_BOUND
    assert answer.structured_content["unavailable"] == [
        f"workflow source {dripping} is unavailable: took longer than 3 s; cut off"
    ]


def test_an_oversized_answer_is_refused(listeners):
    def huge(handler: BaseHTTPRequestHandler) -> None:
        handler.send_response(200)
        handler.end_headers()  # no Content-Length: the size shows only while reading
        handler.wfile.write(b"[" + b" " * 5000 + b"]")

    host = Listener(huge)
    listeners.append(host)
    with pytest.raises(outbound.OutboundRefused, match="answered more than 4,096 bytes; refused"):
        outbound.fetch("GET", f"{host.url}/w", deadline=5, max_bytes=4096)

    declared = Listener(json_answer(["x" * 5000]))
    listeners.append(declared)
    with pytest.raises(outbound.OutboundRefused, match="answered more than 4,096 bytes; refused"):
        outbound.fetch("GET", f"{declared.url}/w", deadline=5, max_bytes=4096)


@pytest.mark.parametrize(
    "url", ["file:///etc/passwd", "ftp://127.0.0.1/x", "gopher://127.0.0.1/", "127.0.0.1/x"]
)
def test_only_http_and_https_are_fetched(url):
    with pytest.raises(outbound.OutboundRefused, match="only http and https addresses"):
        outbound.fetch("GET", url)
    source = RemoteSource(url, "tok")
    source.refresh(force=True)
    assert "only http and https addresses are fetched" in (source.last_error or "")
    with pytest.raises(SourceUnavailable, match="only http and https"):
        source.status(run_id="r1")


def test_a_messages_address_hides_userinfo_and_query():
    assert outbound.shown("http://user:pw@127.0.0.1:8/a?token=x#f") == "http://127.0.0.1:8/a"
