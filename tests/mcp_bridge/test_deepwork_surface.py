"""What each generation advertises: tools/list snapshots for 0.14 and both, and instructions."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from fastmcp import Client

from mcp_bridge.server import create_server

pytestmark = [pytest.mark.django_db(transaction=True)]

SNAPSHOTS = Path(__file__).parent / "snapshots"


async def listed(server) -> tuple[list[dict], str | None]:
    async with Client(server, mode="legacy") as client:
        tools = await client.list_tools()
        instructions = client.initialize_result.instructions
    return [
        {
            "name": tool.name,
            "description": tool.description,
            "inputSchema": tool.input_schema,
            "outputSchema": tool.output_schema,
        }
        for tool in tools
    ], instructions


@pytest.mark.parametrize("generation", ["0.14", "both"])
async def test_tools_list_matches_the_snapshot(demo_project: Path, generation: str) -> None:
    tools, _ = await listed(create_server(demo_project, generation=generation))
    path = SNAPSHOTS / f"tools_list_{generation}.json"
    if os.environ.get("UPDATE_SNAPSHOTS"):
        path.parent.mkdir(exist_ok=True)
        path.write_text(json.dumps(tools, indent=2, sort_keys=True) + "\n")
    assert tools == json.loads(path.read_text())


async def test_014_advertises_exactly_its_parameters(demo_project: Path) -> None:
    tools, instructions = await listed(create_server(demo_project, generation="0.14"))
    params = {t["name"]: list(t["inputSchema"].get("properties", {})) for t in tools}
    assert params == {
        "get_workflows": [],
        "start_workflow": ["goal", "job_name", "workflow_name", "session_id", "inputs", "agent_id"],
        "finished_step": [
            "outputs",
            "session_id",
            "work_summary",
            "quality_review_override_reason",
            "agent_id",
        ],
        "abort_workflow": ["explanation", "session_id", "agent_id"],
        "go_to_step": ["step_id", "session_id", "agent_id"],
        "register_session_job": ["job_name", "job_definition_yaml", "session_id"],
        "get_session_job": ["job_name", "session_id"],
        "get_named_schemas": [],
        "get_review_instructions": ["files"],
        "get_configured_reviews": ["only_rules_matching_files"],
        "mark_review_as_passed": ["review_id"],
    }
    assert instructions is not None
    assert "**Session identity.**" in instructions


async def test_both_keeps_091_instructions_and_adds_the_014_note(demo_project: Path) -> None:
    _, instructions = await listed(create_server(demo_project))
    assert instructions is not None
    assert "**Discover**" in instructions
    assert "## DeepWork 0.14 clients" in instructions
