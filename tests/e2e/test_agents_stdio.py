"""Three ``mcpserve --toolsets agents`` stdio subprocesses with different roles run a fan-out /
fan-in workflow to completion; one is killed with SIGKILL while it holds a step, and that step
is handed to another agent once the (shortened) heartbeat threshold passes."""

from __future__ import annotations

import contextlib
import os
import signal
from contextlib import AsyncExitStack
from pathlib import Path

import pytest
from asgiref.sync import sync_to_async

from tests.e2e.driver import Driver
from workflows.models import Agent, Event

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.e2e]

# Short enough to keep the test quick, long enough for a loaded machine's heartbeats (each
# server heartbeats every third of it).
THRESHOLD = "2"

STEPS = [
    {"step_id": "plan", "description": "Split the work", "assigned_role": "lead"},
    *(
        {
            "step_id": f"build_{n}",
            "description": f"Build part {n}",
            "assigned_role": "swe",
            "depends_on": ["plan"],
            "tool_to_call": "make",
            "tool_arguments": {"part": n},
        }
        for n in (1, 2, 3)
    ),
    {
        "step_id": "merge",
        "description": "Merge the parts",
        "assigned_role": "lead",
        "depends_on": ["build_1", "build_2", "build_3"],
    },
]


def agent_server(project: Path, agent_id: str, roles: str) -> Driver:
    return Driver(
        project,
        "--toolsets",
        "agents",
        "--agent-id",
        agent_id,
        "--roles",
        roles,
        env_extra={"DEEPWORK_AGENT_RESPONSIVE_SECONDS": THRESHOLD},
    )


async def take(agent: Driver, agent_id: str) -> list[dict]:
    answer = await agent.call("await_assignment", {"agent_id": agent_id, "timeout_s": 30})
    assert answer["timed_out"] is False, f"{agent_id} got nothing"
    return answer["assignments"]


async def complete(agent: Driver, agent_id: str, assignment: dict, result: object) -> dict:
    return await agent.call(
        "report_step_completion",
        {
            "workflow_id": assignment["workflow_id"],
            "step_id": assignment["step_id"],
            "agent_id": agent_id,
            "result": result,
        },
    )


async def test_fan_out_fan_in_with_a_killed_agent_handed_on(project_dir: Path):
    async with AsyncExitStack() as stack:
        lead = await stack.enter_async_context(agent_server(project_dir, "lead", "lead"))
        w1 = await stack.enter_async_context(agent_server(project_dir, "w1", "swe"))
        doomed = agent_server(project_dir, "w2", "swe")
        await doomed.__aenter__()
        try:
            assert "await_assignment" in await lead.tool_names()
            defined = await lead.call(
                "define_workflow", {"creator_id": "lead", "name": "Build", "steps": STEPS}
            )
            assert defined["warnings"] == []  # every role is registered by a running server
            wid = defined["workflow"]["workflow_id"]
            started = await lead.call(
                "execute_workflow", {"workflow_id": wid, "triggering_agent_id": "lead"}
            )
            assert started["delegated"] == [{"step_id": "plan", "agent_id": "lead"}]

            [plan] = await take(lead, "lead")
            fanned = await complete(lead, "lead", plan, {"parts": 3})
            # Fan-out: the least loaded swe first, then by id.
            assert fanned["delegated"] == [
                {"step_id": "build_1", "agent_id": "w1"},
                {"step_id": "build_2", "agent_id": "w2"},
                {"step_id": "build_3", "agent_id": "w1"},
            ]
            [held] = await take(doomed, "w2")
            assert held["step_id"] == "build_2"
            assert held["dependency_results"] == {"plan": {"parts": 3}}
            assert held["tool_arguments"] == {"part": 2}

            # w2 dies mid-step, without a word.
            pid = await sync_to_async(lambda: Agent.objects.get(agent_id="w2").pid)()
            os.kill(pid, signal.SIGKILL)
        finally:
            with contextlib.suppress(Exception):
                await doomed.__aexit__(None, None, None)

        mine = await take(w1, "w1")
        assert [a["step_id"] for a in mine] == ["build_1", "build_3"]
        for assignment in mine:
            await complete(w1, "w1", assignment, assignment["step_id"])
        # Once w2's heartbeat is older than the threshold, its step comes to w1.
        [handed] = await take(w1, "w1")
        assert handed["step_id"] == "build_2"
        fan_in = await complete(w1, "w1", handed, "build_2 by w1")
        assert fan_in["delegated"] == [{"step_id": "merge", "agent_id": "lead"}]

        [merge] = await take(lead, "lead")
        assert merge["dependency_results"] == {
            "build_1": "build_1",
            "build_2": "build_2 by w1",
            "build_3": "build_3",
        }
        final = await complete(lead, "lead", merge, "merged")
        assert final["workflow_status"] == "completed"

        details = await lead.call("get_workflow_details", {"workflow_id": wid})
        assert details["status"] == "completed"
        by_step = {step["step_id"]: step for step in details["steps"]}
        assert by_step["build_2"]["assigned_agent_id"] == "w1"
        assert by_step["build_2"]["handoffs"] == 1
        assert {step["status"] for step in details["steps"]} == {"completed"}

    handed_on = await sync_to_async(
        lambda: [e.payload for e in Event.objects.filter(kind=Event.Kind.DAG_STEP_HANDED_ON)]
    )()
    assert [(p["step_id"], p["from_agent_id"]) for p in handed_on] == [("build_2", "w2")]
    completions = await sync_to_async(
        Event.objects.filter(kind=Event.Kind.SESSION_COMPLETED).count
    )()
    assert completions == 1
