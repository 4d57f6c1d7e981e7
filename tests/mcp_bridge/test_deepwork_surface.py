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


async def test_both_says_which_generation_takes_each_finished_step_parameter(
    demo_project: Path,
) -> None:
    tools, _ = await listed(create_server(demo_project))
    finished = next(tool for tool in tools if tool["name"] == "finished_step")
    described = {
        name: spec.get("description", "")
        for name, spec in finished["inputSchema"]["properties"].items()
    }
    # What one generation alone accepts is marked as that generation's.
    assert described["notes"].startswith("DeepWork 0.9.1: ")
    assert described["work_summary"].startswith("DeepWork 0.14: ")
    assert described["agent_id"].startswith("DeepWork 0.14: ")


@pytest.mark.parametrize("tool", ["finished_step", "abort_workflow", "go_to_step"])
async def test_both_flags_a_014_call_without_session_id_as_an_error(
    demo_project: Path, tool: str
) -> None:
    args = {
        "finished_step": {"outputs": {}, "work_summary": "done"},
        "abort_workflow": {"explanation": "stop", "agent_id": "sub"},
        "go_to_step": {"step_id": "gather", "agent_id": "sub"},
    }[tool]
    async with Client(create_server(demo_project)) as client:
        result = await client.call_tool(tool, args, raise_on_error=False)
    assert result.is_error
    assert result.content[0].text == (
        f"Error calling tool '{tool}': session_id is required. Pass CLAUDE_CODE_SESSION_ID on "
        "Claude Code, or the session_id returned by start_workflow on other platforms."
    )
