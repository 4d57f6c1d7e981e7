"""The agents toolset in process: its schemas, a whole run, every refusal,
and await_assignment waking when a step is handed over. Both protocol eras."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from fastmcp import Client, FastMCP

from mcp_bridge.server import create_server
from mcp_bridge.toolsets.agents import TOOL_NAMES, TOOL_SCHEMAS
from workflows.models import Event, Job, StepRun

pytestmark = [pytest.mark.django_db(transaction=True)]

STEPS = [
    {"step_id": "plan", "description": "Plan", "assigned_role": "planner"},
    {"step_id": "a", "description": "Part a", "assigned_role": "swe", "depends_on": ["plan"]},
    {
        "step_id": "b",
        "description": "Part b",
        "assigned_role": "swe",
        "depends_on": ["plan"],
        "tool_to_call": "run_tests",
        "tool_arguments": {"path": "b"},
    },
    {
        "step_id": "merge",
        "description": "Merge",
        "depends_on": ["a", "b"],
        "assigned_agent_id": "lead",
    },
]


@pytest.fixture
def server(project_dir) -> FastMCP:
    return create_server(project_dir, toolsets=["agents"])


@pytest.fixture(params=["legacy", "auto"])
def mode(request) -> str:
    return request.param


async def ok(client: Client, tool: str, args: dict[str, Any]) -> dict[str, Any]:
    result = await client.call_tool(tool, args, raise_on_error=False)
    assert not result.is_error, result.content[0].text
    return json.loads(result.content[0].text)


async def refused(client: Client, tool: str, args: dict[str, Any]) -> str:
    result = await client.call_tool(tool, args, raise_on_error=False)
    assert result.is_error
    return result.content[0].text


async def test_tools_and_their_exact_input_schemas(server, mode):
    async with Client(server, mode=mode) as client:
        tools = {tool.name: tool for tool in await client.list_tools()}
    assert sorted(tools) == sorted(TOOL_NAMES)
    for name, schema in TOOL_SCHEMAS.items():
        assert tools[name].input_schema == schema
        assert tools[name].description
    assert tools["define_workflow"].input_schema["properties"]["steps"]["minItems"] == 1
    assert set(tools["await_assignment"].input_schema["properties"]) == {"agent_id", "timeout_s"}


async def test_a_whole_run_over_mcp(server, mode):
    async with Client(server, mode=mode) as client:
        for agent_id, roles in (("p", ["planner"]), ("s1", ["swe"]), ("s2", ["swe"])):
            registered = await ok(client, "register_agent", {"agent_id": agent_id, "roles": roles})
            assert registered["roles"] == roles
            assert registered["responsive_seconds"] == 300
        defined = await ok(
            client,
            "define_workflow",
            {"creator_id": "boss", "name": "Ship", "description": "ship it", "steps": STEPS},
        )
        wid = defined["workflow"]["workflow_id"]
        assert defined["workflow"]["status"] == "pending"
        assert defined["message"].startswith(f"Workflow '{wid}' defined with 4 steps")
        assert defined["warnings"] == [
            "Step 'merge': agent 'lead' is not registered yet; the step waits for it"
        ]
        listed = await ok(client, "list_workflows", {"creator_id": "boss"})
        assert listed["workflows"][0]["step_count"] == 4
        assert (await ok(client, "list_workflows", {"creator_id": "nobody"}))["count"] == 0

        started = await ok(
            client, "execute_workflow", {"workflow_id": wid, "triggering_agent_id": "boss"}
        )
        assert started["message"] == f"Workflow '{wid}' started: 1 step delegated"
        assert started["delegated"] == [{"step_id": "plan", "agent_id": "p"}]

        waiting = await ok(client, "await_assignment", {"agent_id": "p", "timeout_s": 5})
        assert [a["step_id"] for a in waiting["assignments"]] == ["plan"]
        done = await ok(
            client,
            "report_step_completion",
            {"workflow_id": wid, "step_id": "plan", "agent_id": "p", "result": {"plan": "x"}},
        )
        assert done["delegated"] == [
            {"step_id": "a", "agent_id": "s1"},
            {"step_id": "b", "agent_id": "s2"},
        ]
        b = (await ok(client, "get_my_assignments", {"agent_id": "s2"}))["assignments"][0]
        assert b["tool_to_call"] == "run_tests"
        assert b["tool_arguments"] == {"path": "b"}
        assert b["dependency_results"] == {"plan": {"plan": "x"}}
        await ok(
            client, "report_step_completion", {"workflow_id": wid, "step_id": "a", "agent_id": "s1"}
        )
        last = await ok(
            client,
            "report_step_completion",
            {"workflow_id": wid, "step_id": "b", "agent_id": "s2", "result": 7},
        )
        assert last["issues"] == [{"step_id": "merge", "reason": "agent 'lead' is not registered"}]
        again = await ok(
            client, "report_step_completion", {"workflow_id": wid, "step_id": "b", "agent_id": "s2"}
        )
        assert again["already_reported"] is True
        assert again["message"] == "Step 'b' was already reported completed; nothing changed"
        # The named agent arrives; its registration hands it the waiting step.
        await ok(client, "register_agent", {"agent_id": "lead", "roles": []})
        merge = (await ok(client, "await_assignment", {"agent_id": "lead", "timeout_s": 1}))[
            "assignments"
        ][0]
        assert merge["dependency_results"] == {"a": None, "b": 7}
        final = await ok(
            client,
            "report_step_completion",
            {"workflow_id": wid, "step_id": "merge", "agent_id": "lead"},
        )
        assert final["workflow_status"] == "completed"
        details = await ok(client, "get_workflow_details", {"workflow_id": wid})
        assert details["status"] == "completed"
        assert [s["status"] for s in details["steps"]] == ["completed"] * 4
        assert details["steps"][3]["depends_on"] == ["a", "b"]
        assert details["triggered_by"] == "boss"


async def test_refusals_name_the_rule_and_change_nothing(server):
    async with Client(server) as client:
        assert await refused(
            client, "define_workflow", {"creator_id": "c", "name": "n", "steps": []}
        ) == ("steps must hold at least one step")
        cyc = [
            {"step_id": "a", "description": "x", "depends_on": ["b"]},
            {"step_id": "b", "description": "y", "depends_on": ["a"]},
        ]
        assert await refused(
            client, "define_workflow", {"creator_id": "c", "name": "n", "steps": cyc}
        ) == ("The steps' dependencies form a cycle: a -> b -> a")
        bad_args = [{"step_id": "a", "description": "x", "tool_arguments": "nope"}]
        assert "tool_arguments must be an object, not str" in await refused(
            client, "define_workflow", {"creator_id": "c", "name": "n", "steps": bad_args}
        )
        assert await sync_to_async(Job.objects.count)() == 0
        unknown = await refused(client, "get_workflow_details", {"workflow_id": "dag-x"})
        assert unknown == "Unknown workflow_id 'dag-x': no such workflow in this project"
        assert "Unknown agent 'ghost'" in await refused(client, "heartbeat", {"agent_id": "ghost"})
        assert "Unknown agent 'ghost'" in await refused(
            client, "await_assignment", {"agent_id": "ghost", "timeout_s": 0}
        )
        wid = (
            await ok(
                client, "define_workflow", {"creator_id": "c", "name": "n", "steps": STEPS[:1]}
            )
        )["workflow"]["workflow_id"]
        assert "Only the workflow's creator ('c') may delete" in await refused(
            client, "delete_workflow", {"workflow_id": wid, "requesting_agent_id": "d"}
        )
        await ok(client, "execute_workflow", {"workflow_id": wid, "triggering_agent_id": "c"})
        assert "is already running; a workflow runs once" in await refused(
            client, "execute_workflow", {"workflow_id": wid, "triggering_agent_id": "c"}
        )
        assert "is running; delete it with force=true" in await refused(
            client, "delete_workflow", {"workflow_id": wid, "requesting_agent_id": "c"}
        )
        deleted = await ok(
            client,
            "delete_workflow",
            {"workflow_id": wid, "requesting_agent_id": "c", "force": True},
        )
        assert deleted["message"] == f"Workflow '{wid}' (running) deleted."


async def test_await_assignment_wakes_when_a_step_is_handed_over_with_progress(server):
    progress: list[float] = []
    notified = asyncio.Event()

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append(value)
        notified.set()

    async with Client(server, progress_handler=on_progress) as client:
        await ok(client, "register_agent", {"agent_id": "w", "roles": ["swe"]})
        wid = (
            await ok(
                client,
                "define_workflow",
                {
                    "creator_id": "c",
                    "name": "n",
                    "steps": [{"step_id": "x", "description": "x", "assigned_role": "swe"}],
                },
            )
        )["workflow"]["workflow_id"]

        waiter = asyncio.create_task(
            client.call_tool("await_assignment", {"agent_id": "w", "timeout_s": 30})
        )
        # Let it wait long enough to send a progress notification, then hand it a step.
        await asyncio.wait_for(notified.wait(), 10)
        assert not waiter.done()
        await ok(client, "execute_workflow", {"workflow_id": wid, "triggering_agent_id": "c"})
        result = await asyncio.wait_for(waiter, 10)
        answer = json.loads(result.content[0].text)
        assert answer["timed_out"] is False
        assert [a["step_id"] for a in answer["assignments"]] == ["x"]

        # Holding a step, the agent is answered at once; with none, a short wait times out.
        assert (await ok(client, "await_assignment", {"agent_id": "w", "timeout_s": 30}))[
            "assignments"
        ]
        await ok(
            client, "report_step_completion", {"workflow_id": wid, "step_id": "x", "agent_id": "w"}
        )
        empty = await ok(client, "await_assignment", {"agent_id": "w", "timeout_s": 0.2})
        assert empty == {"agent_id": "w", "assignments": [], "timed_out": True}
    assert await sync_to_async(StepRun.objects.filter(status="completed").count)() == 1
    assert await sync_to_async(Event.objects.filter(kind="session_completed").count)() == 1
