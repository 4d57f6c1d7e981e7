"""0.14 tools in process (real MCP client, in memory) in modes 0.14 and both."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fastmcp import Client

from mcp_bridge.server import create_server
from workflows.models import StepRun, WorkflowSession

pytestmark = [pytest.mark.django_db(transaction=True)]


async def call(client: Client, tool: str, args: dict | None = None):
    result = await client.call_tool(tool, args or {}, raise_on_error=False)
    text = result.content[0].text
    return result.is_error, (text if result.is_error else json.loads(text))


@pytest.mark.parametrize("generation", ["0.14", "both"])
async def test_walk_demo14(both_project: Path, generation: str) -> None:
    async with Client(create_server(both_project, generation=generation)) as client:
        err, start = await call(
            client,
            "start_workflow",
            {
                "goal": "g",
                "job_name": "demo14",
                "workflow_name": "main",
                "session_id": "S",
                "inputs": {"topic": "cats"},
            },
        )
        assert not err, start
        assert start["begin_step"]["step_instructions"] == (
            "## Inputs\n\n- **topic** (required): cats\n\nGather notes on the topic."
        )
        assert start["stack"] == [{"workflow": "demo14/main", "step": "gather"}]
        err, fin = await call(
            client,
            "finished_step",
            {
                "outputs": {"notes.md": "notes.md", "data.json": "data.json"},
                "session_id": "S",
                "work_summary": "did it",
            },
        )
        assert not err, fin
        assert fin["status"] == "needs_work", fin
        print(fin["feedback"])
        err, fin = await call(
            client,
            "finished_step",
            {
                "outputs": {"notes.md": "notes.md", "data.json": "data.json"},
                "session_id": "S",
                "quality_review_override_reason": "ok",
            },
        )
        assert fin["status"] == "next_step", fin
        assert fin["begin_step"]["step_inputs"][0]["value"] == "cats"
        assert fin["begin_step"]["step_inputs"][1]["value"] == "notes.md"
        err, fin = await call(
            client,
            "finished_step",
            {
                "outputs": {"verdict": "good"},
                "session_id": "S",
                "quality_review_override_reason": "ok",
            },
        )
        assert fin["begin_step"]["step_id"] == "nested"
        err, sub = await call(
            client,
            "start_workflow",
            {"goal": "g", "job_name": "demo14", "workflow_name": "helper", "session_id": "S"},
        )
        assert len(sub["stack"]) == 2
        err, done = await call(client, "finished_step", {"outputs": {}, "session_id": "S"})
        assert done["status"] == "workflow_complete", done
        assert done["stack"] == [{"workflow": "demo14/main", "step": "nested"}]
        err, done = await call(client, "finished_step", {"outputs": {}, "session_id": "S"})
        assert done["post_workflow_instructions"] == "Open a pull request."
        assert done["stack"] == []
    assert await WorkflowSession.objects.filter(generation="0.14").acount() == 2
    assert await StepRun.objects.filter(session__generation="0.14").acount() >= 4


async def test_both_starts_014_without_parameters_off_claude(both_project: Path) -> None:
    server = create_server(both_project, generation="both", platform="gemini")
    async with Client(server) as client:
        err, start = await call(
            client, "start_workflow", {"goal": "g", "job_name": "demo14", "workflow_name": "plain"}
        )
        assert not err, start
        assert len(start["begin_step"]["session_id"]) == 32
        assert start["important_note"].startswith("IMPORTANT")
        # instance_id still means 0.9.1, and cannot be mixed with 0.14's parameters.
        err, text = await call(
            client,
            "start_workflow",
            {
                "goal": "g",
                "job_name": "demo",
                "workflow_name": "main",
                "instance_id": "x",
                "session_id": "S",
            },
        )
        assert err
        assert "a call cannot mix them" in text
    session = await WorkflowSession.objects.aget()
    assert session.generation == "0.14"
