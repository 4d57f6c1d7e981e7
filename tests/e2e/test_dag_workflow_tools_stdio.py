"""DAG workflows as workflow tools over stdio: a lead's ``mcpserve --toolsets
agents,workflow-tools`` defines two-step workflows and sees each one's tool appear (a
handshake-era client is told by ``tools/list_changed``); a worker's ``mcpserve --toolsets
agents`` does the steps. An async call answers a run id that ``get_workflow_status`` follows to
COMPLETED with each step's result; a sync call waits, with progress notifications, and answers
the results."""

from __future__ import annotations

import asyncio
from contextlib import AsyncExitStack
from pathlib import Path

import pytest
from fastmcp.client.messages import MessageHandler

from tests.e2e.driver import Driver

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.e2e]

FAST = {"DEEPWORK_WORKFLOW_TOOLS_POLL_SECONDS": "0.2"}
WITHIN = 20.0
STEPS = [
    {"step_id": "draft", "description": "Draft the notes", "assigned_role": "swe"},
    {
        "step_id": "proof",
        "description": "Proofread them",
        "assigned_role": "swe",
        "depends_on": ["draft"],
    },
]


class ListChanged(MessageHandler):
    def __init__(self) -> None:
        self.event = asyncio.Event()

    async def on_tool_list_changed(self, message) -> None:
        self.event.set()


async def do_steps(worker: Driver, results: dict[str, str]) -> None:
    """The worker agent takes each step as it is handed out and reports its result."""
    for _ in results:
        waited = await worker.call("await_assignment", {"agent_id": "w", "timeout_s": 30})
        [step] = waited["assignments"]
        await worker.call(
            "report_step_completion",
            {
                "workflow_id": step["workflow_id"],
                "step_id": step["step_id"],
                "agent_id": "w",
                "result": results[step["step_id"]],
            },
        )


async def test_dag_workflows_run_through_their_tools(project_dir: Path):
    listener = ListChanged()
    progress: list[tuple[float, float | None, str | None]] = []

    async def on_progress(done, total, message):
        progress.append((done, total, message))

    async with AsyncExitStack() as stack:
        lead = await stack.enter_async_context(
            Driver(
                project_dir,
                "--toolsets",
                "agents,workflow-tools",
                "--agent-id",
                "lead",
                "--roles",
                "lead",
                env_extra=FAST,
                message_handler=listener,
                progress_handler=on_progress,
            )
        )
        worker = await stack.enter_async_context(
            Driver(project_dir, "--toolsets", "agents", "--agent-id", "w", "--roles", "swe")
        )
        assert "workflow_release_notes" not in await lead.tool_names()

        defined = await lead.call(
            "define_workflow", {"creator_id": "lead", "name": "Release notes", "steps": STEPS}
        )
        wid = defined["workflow"]["workflow_id"]
        await asyncio.wait_for(listener.event.wait(), WITHIN)
        tools = {tool.name: tool for tool in await lead.client.list_tools()}
        assert f"(Workflow ID: {wid}; category: dag; version: 1; execution: async)" in (
            tools["workflow_release_notes"].description
        )

        started = await lead.call("workflow_release_notes", {})
        assert (started["run_id"], started["status"]) == (f"dag:{wid}", "RUNNING")
        assert started["result"]["delegated"] == [{"step_id": "draft", "agent_id": "w"}]
        await do_steps(worker, {"draft": "notes v1", "proof": "notes v2"})
        status = await lead.call("get_workflow_status", {"run_id": started["run_id"]})
        assert status["status"] == "COMPLETED"
        assert status["result"] == {"draft": "notes v1", "proof": "notes v2"}
        assert status["progress"]["completed_steps"] == status["progress"]["total_steps"] == 2
        details = await lead.call("get_workflow_details", {"workflow_id": wid})
        assert details["triggered_by"] == "lead"

        listener.event.clear()
        quick = await lead.call(
            "define_workflow",
            {
                "creator_id": "lead",
                "name": "Hotfix",
                "steps": STEPS,
                "execution_type": "sync",
            },
        )
        await asyncio.wait_for(listener.event.wait(), WITHIN)
        assert "workflow_hotfix" in await lead.tool_names()
        call = asyncio.create_task(lead.call("workflow_hotfix", {}))
        await do_steps(worker, {"draft": "patch", "proof": "reviewed"})
        done = await asyncio.wait_for(call, WITHIN)

    hotfix = quick["workflow"]["workflow_id"]
    assert (done["run_id"], done["status"]) == (f"dag:{hotfix}", "COMPLETED")
    assert done["result"] == {"draft": "patch", "proof": "reviewed"}
    assert progress, "the sync call sent no progress notifications"
    assert progress[-1][:2] == (2, 2)
    assert progress[-1][2] == f"{hotfix}: COMPLETED"
