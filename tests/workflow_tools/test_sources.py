"""Remote workflow sources: what arrives is checked entry by entry (a bad entry is skipped with
a logged reason), a source that fails keeps its last good list and is retried with backoff,
and a ``sync`` workflow is followed to its end with progress notifications, all against a
real HTTP server in this process."""

from __future__ import annotations

import json
import logging
import re
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from fastmcp import Client

from mcp_bridge.server import create_server
from mcp_bridge.toolsets.specs import SourceConfig
from workflow_tools.sources import (
    GENERIC_SCHEMA,
    MAX_WORKFLOWS,
    RemoteSource,
    SourceUnavailable,
    parse_published,
)

GOOD = {
    "id": "wf-1",
    "name": "Data analysis",
    "description": "Analyse data",
    "inputSchema": {
        "type": "object",
        "properties": {"dataset": {"type": "string"}},
        "required": ["dataset"],
    },
}


def reasons(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


def test_defaults_and_the_results_wrapper():
    [workflow] = parse_published({"count": 1, "results": [GOOD]}, label="src")
    assert workflow.category == "workflow"
    assert workflow.version == "1.0.0"
    assert workflow.execution_type == "async"
    assert workflow.input_schema == GOOD["inputSchema"]


@pytest.mark.parametrize(
    ("entry", "reason"),
    [
        ("just a string", "src: workflow #0 skipped: an entry must be an object, not str"),
        ({"name": "n", "description": "d"}, "src: workflow #0 skipped: 'id' is missing"),
        ({**GOOD, "id": 7}, "src: workflow #0 skipped: 'id' must be a string, not int"),
        ({**GOOD, "name": None}, "src: workflow 'wf-1' skipped: 'name' is missing"),
        ({**GOOD, "name": "bad\x00name"}, "src: workflow 'wf-1' skipped: 'name' holds a control"),
        (
            {**GOOD, "description": "x" * 5_000_000},
            "src: workflow 'wf-1' skipped: 'description' is 5,000,000 characters; the limit is "
            "8,000",
        ),
        (
            {**GOOD, "executionType": "later"},
            "src: workflow 'wf-1' skipped: 'executionType' must be 'sync' or 'async', not 'later'",
        ),
        ({**GOOD, "metadata": [1]}, "src: workflow 'wf-1' skipped: 'metadata' must be an object"),
        ({**GOOD, "version": 2}, "src: workflow 'wf-1' skipped: 'version' must be a string"),
    ],
)
def test_a_bad_entry_is_skipped_with_its_reason(caplog, entry, reason):
    found = parse_published([entry, {**GOOD, "id": "ok"}], label="src")
    assert [w.id for w in found] == ["ok"]
    assert any(message.startswith(reason) for message in reasons(caplog)), reasons(caplog)


@pytest.mark.parametrize(
    ("schema", "reason"),
    [
        ("a string", "inputSchema must be an object, not str"),
        ({"type": "array"}, "inputSchema must have type 'object'"),
        ({"type": "object", "properties": 5}, "inputSchema is not a valid JSON Schema"),
    ],
)
def test_an_invalid_schema_becomes_the_generic_one(caplog, schema, reason):
    [workflow] = parse_published([{**GOOD, "inputSchema": schema}], label="src")
    assert workflow.input_schema == GENERIC_SCHEMA
    assert any(reason in message for message in reasons(caplog))


def test_ten_thousand_entries_keep_the_first_thousand_and_repeats_are_skipped(caplog):
    entries = [{**GOOD, "id": f"wf-{i}"} for i in range(10_000)]
    found = parse_published(entries, label="src")
    assert len(found) == MAX_WORKFLOWS
    assert "src lists 10000 workflows; only the first 1000 are served" in reasons(caplog)
    assert len(parse_published([GOOD, GOOD], label="src")) == 1


def test_a_non_list_answer_is_the_sources_failure():
    with pytest.raises(SourceUnavailable, match="answered dict, not a list of workflows"):
        parse_published({"items": []}, label="src")


# --- A real HTTP source --------------------------------------------------------------------


class FakeSource:
    """What the HTTP server answers; tests change it between requests."""

    def __init__(self) -> None:
        self.listing: Any = [GOOD]
        self.list_status = 200
        self.hang = 0.0
        self.statuses: list[dict[str, Any]] = []
        self.cancelled: list[str] = []
        self.requests: list[str] = []


@pytest.fixture
def fake() -> Iterator[tuple[FakeSource, str]]:
    state = FakeSource()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def _send(self, status: int, body: Any) -> None:
            raw = body if isinstance(body, bytes) else json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

        def do_GET(self) -> None:
            state.requests.append(f"GET {self.path} {self.headers.get('Authorization')}")
            if self.path.endswith("/workflows"):
                time.sleep(state.hang)
                self._send(state.list_status, state.listing)
            elif not state.statuses:
                self._send(501, {"error": {"message": "runs are not tracked here"}})
            else:
                self._send(200, state.statuses.pop(0))

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", 0))
            body = json.loads(self.rfile.read(length))
            state.requests.append(f"POST {self.path}")
            if self.path.endswith("/cancel"):
                state.cancelled.append(body["reason"])
                self._send(200, {"status": "CANCELLED", "workflow_id": "wf-1", "error": "x"})
            else:
                self._send(201, {"run_id": "r1", "status": "RUNNING", "result": None})

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state, f"http://127.0.0.1:{server.server_address[1]}/workflows"
    finally:
        server.shutdown()
        server.server_close()


def test_a_failing_source_keeps_its_last_good_list_and_backs_off(fake, caplog):
    state, url = fake
    source = RemoteSource(url, "secret", timeout=0.5, retry_first=0.2, retry_most=0.8)
    source.refresh(force=True)
    assert [w.id for w in source.workflows()] == ["wf-1"]
    assert state.requests == ["GET /workflows Bearer secret"]

    for status, body, expected in [
        (500, {"error": {"message": "boom"}}, "answered 500"),
        (200, b"<html>", "answered something that is not JSON"),
        (200, "nope", "answered str, not a list of workflows"),
    ]:
        state.list_status, state.listing = status, body
        source.refresh(force=True)
        assert [w.id for w in source.workflows()] == ["wf-1"]
        assert expected in source.last_error
    state.list_status, state.listing, state.hang = 200, [GOOD], 1.0
    source.refresh(force=True)
    assert "is unavailable" in source.last_error
    assert "serving the last good list (1 workflows); next try in" in " ".join(reasons(caplog))
    # Four failures in a row: the next try waits the longest pause, not sooner.
    now = time.monotonic()
    assert not source.due(now)
    assert source.due(now + 0.8)
    state.hang = 0.0
    state.listing = [GOOD, {**GOOD, "id": "wf-2"}]
    source.refresh(force=True)
    assert source.last_error is None
    assert [w.id for w in source.workflows()] == ["wf-1", "wf-2"]


@pytest.mark.django_db(transaction=True)
async def test_a_sync_workflow_is_followed_with_progress(fake, project_dir, monkeypatch):
    state, url = fake
    state.listing = [{**GOOD, "executionType": "sync"}]
    state.statuses = [
        {
            "status": "RUNNING",
            "workflow_id": "wf-1",
            "progress": {"completed_steps": 1, "total_steps": 3},
        },
        {
            "status": "RUNNING",
            "workflow_id": "wf-1",
            "progress": {"completed_steps": 2, "total_steps": 3},
        },
        {
            "status": "COMPLETED",
            "workflow_id": "wf-1",
            "progress": {"completed_steps": 3, "total_steps": 3},
            "result": {"rows": 42},
        },
    ]
    mcp = create_server(
        project_dir, toolsets=["workflow-tools"], workflow_sources=[SourceConfig(url, "t")]
    )
    seen: list[tuple[float, float | None]] = []

    async def progress(done: float, total: float | None, message: str | None) -> None:
        seen.append((done, total))

    async with Client(mcp, progress_handler=progress) as client:
        await client.call_tool("refresh_workflow_tools", {})
        refused = await client.call_tool("workflow_data_analysis", {}, raise_on_error=False)
        assert refused.is_error
        assert "at $: 'dataset' is a required property (rule 'required')" in (
            refused.content[0].text
        )
        result = await client.call_tool("workflow_data_analysis", {"dataset": "sales"})
    assert result.structured_content["status"] == "COMPLETED"
    assert result.structured_content["result"] == {"rows": 42}
    assert seen == [(1, 3), (2, 3), (3, 3)]


@pytest.mark.django_db(transaction=True)
async def test_a_sync_run_past_the_timeout_is_cancelled_at_its_source(
    fake, project_dir, monkeypatch
):
    state, url = fake
    monkeypatch.setenv("DEEPWORK_WORKFLOW_TOOLS_TIMEOUT", "0.3")
    state.listing = [{**GOOD, "executionType": "sync"}]
    state.statuses = [{"status": "RUNNING", "workflow_id": "wf-1"}] * 50
    mcp = create_server(
        project_dir, toolsets=["workflow-tools"], workflow_sources=[SourceConfig(url, "t")]
    )
    async with Client(mcp) as client:
        await client.call_tool("refresh_workflow_tools", {})
        result = await client.call_tool(
            "workflow_data_analysis", {"dataset": "x"}, raise_on_error=False
        )
    assert result.is_error
    assert re.fullmatch(
        r"Workflow wf-1 \(run remote-[0-9a-f]{12}:r1\) did not finish within 0\.3 s; it was "
        r"cancelled at its source",
        result.content[0].text,
    ), result.content[0].text
    assert state.cancelled == ["timed out"]


@pytest.mark.django_db(transaction=True)
async def test_status_a_source_cannot_report_is_not_supported(fake, project_dir):
    state, url = fake
    mcp = create_server(
        project_dir, toolsets=["workflow-tools"], workflow_sources=[SourceConfig(url, "t")]
    )
    key = mcp.workflow_tools.sources[1].key
    async with Client(mcp) as client:
        result = await client.call_tool(
            "get_workflow_status", {"run_id": f"{key}:r9"}, raise_on_error=False
        )
        unknown = await client.call_tool(
            "get_workflow_status", {"run_id": "elsewhere:r9"}, raise_on_error=False
        )
    assert result.is_error
    assert result.content[0].text == (
        f"Status and cancellation are not supported for run '{key}:r9': workflow source "
        f"{url} answered 501: runs are not tracked here"
    )
    assert unknown.content[0].text == (
        "Unknown run id 'elsewhere:r9': no configured source is named 'elsewhere'"
    )
