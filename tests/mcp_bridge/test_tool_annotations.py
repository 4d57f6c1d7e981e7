"""Every tool of every toolset tells clients what a call may do: a title and all four hints,
as a real server lists them. Clients decide on these whether to ask the user first (a tool
that declares nothing is asked about every time) or to run it unasked (a read-only one)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from fastmcp import Client

from mcp_bridge.server import create_server
from mcp_bridge.toolsets import TOOLSETS
from mcp_bridge.toolsets.specs import SourceConfig

pytestmark = [pytest.mark.django_db(transaction=True)]

HINTS = ("readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint")
REMOTE_WORKFLOW = {"id": "wf-remote", "name": "Remote report", "description": "Runs elsewhere"}


@pytest.fixture
def remote_source() -> Iterator[str]:
    """A remote workflow source on 127.0.0.1 publishing one workflow."""

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            body = json.dumps([REMOTE_WORKFLOW]).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/workflows"
    finally:
        server.shutdown()
        server.server_close()


async def listed(server: Any) -> dict[str, dict[str, Any]]:
    """Each listed tool's annotations, as the wire carries them."""
    async with Client(server) as client:
        return {
            tool.name: tool.annotations.model_dump(by_alias=True, exclude_none=True)
            if tool.annotations
            else {}
            for tool in await client.list_tools()
        }


def unannotated(tools: dict[str, dict[str, Any]]) -> dict[str, list[str]]:
    """The tools missing a title or any hint, with what each lacks."""
    missing = {
        name: [key for key in ("title", *HINTS) if not isinstance(found.get(key), bool | str)]
        for name, found in tools.items()
    }
    return {name: keys for name, keys in missing.items() if keys}


@pytest.mark.parametrize("generation", ["0.9", "0.14", "both"])
async def test_every_tool_of_every_toolset_declares_a_title_and_all_four_hints(
    demo_project: Path, remote_source: str, generation: str
):
    # Workflow tools are not served beside 0.14's tools alone (test_toolsets.py).
    published = generation != "0.14"
    server = create_server(
        demo_project,
        toolsets=[name for name in TOOLSETS if published or name != "workflow-tools"],
        generation=generation,
        agent_id="lead",
        workflow_sources=[SourceConfig(remote_source, "t")] if published else [],
    )
    async with Client(server) as client:
        # A DAG workflow not yet run has a workflow tool of its own.
        defined = await client.call_tool(
            "define_workflow",
            {
                "creator_id": "lead",
                "name": "release_notes",
                "steps": [{"step_id": "draft", "description": "Draft them"}],
            },
        )
        assert not defined.is_error
        if published:
            await client.call_tool("refresh_workflow_tools", {})
    tools = await listed(server)
    # Every kind of tool is there: each toolset's own and a workflow tool from each source
    # (the project's DeepWork jobs, the DAG workflow, the remote one).
    assert {"get_workflows", "finished_step", "get_review_instructions"} <= set(tools)
    assert {"tracker_start_workflow", "define_workflow", "get_my_assignments"} <= set(tools)
    if published:
        assert {"get_workflow_status", "workflow_release_notes", "workflow_remote_report"} <= set(
            tools
        )
        assert any(name.startswith("workflow_demo") for name in tools)
    assert unannotated(tools) == {}


async def test_the_hints_say_what_each_kind_of_call_may_do(demo_project: Path, remote_source):
    tools = await listed(
        create_server(
            demo_project,
            toolsets=["deepwork", "workflow-tools"],
            workflow_sources=[SourceConfig(remote_source, "t")],
        )
    )
    hints = {name: tuple(found[key] for key in HINTS) for name, found in tools.items()}
    # (read-only, destructive, idempotent, open world)
    assert hints["get_workflows"] == (True, False, True, False)
    assert hints["get_active_workflow"] == (True, False, True, False)
    assert hints["start_workflow"] == (False, False, False, False)
    # A 0.14 session's hand-in runs the review rules' precompute commands.
    assert hints["finished_step"] == (False, False, False, True)
    assert hints["abort_workflow"] == (False, True, False, False)
    assert hints["go_to_step"] == (False, True, True, False)
    assert hints["get_review_instructions"] == (False, False, True, True)
    assert hints["cancel_workflow_run"] == (False, True, True, True)
    assert hints["workflow_remote_report"] == (False, True, False, True)
    assert tools["workflow_remote_report"]["title"] == "Remote report"
    deepwork_tools = [name for name in tools if name.startswith("workflow_demo")]
    assert deepwork_tools
    for name in deepwork_tools:
        assert hints[name] == (False, False, False, False)


async def test_a_hand_in_reaches_beyond_the_project_only_with_a_reviewer_to_run(demo_project):
    # 0.9.1's gate runs no review rule's command: only a reviewer the server was told to run.
    alone = await listed(create_server(demo_project, generation="0.9"))
    reviewed = await listed(create_server(demo_project, generation="0.9", external_runner="claude"))
    assert alone["finished_step"]["openWorldHint"] is False
    assert reviewed["finished_step"]["openWorldHint"] is True


def test_a_tool_without_hints_is_caught():
    # The check the tests above rely on, on a listing that lacks them.
    assert unannotated(
        {
            "plain": {},
            "half": {"title": "Half", "readOnlyHint": True},
            "full": {"title": "Full", **dict.fromkeys(HINTS, False)},
        }
    ) == {
        "plain": ["title", *HINTS],
        "half": ["destructiveHint", "idempotentHint", "openWorldHint"],
    }
