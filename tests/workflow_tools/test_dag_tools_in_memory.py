"""DAG workflows' own tools through a real MCP client (in memory), served with the agents
toolset: a sync run answers every step's result with progress notifications, a failed one its
details, one outliving the wait keeps running; arguments are checked; a run is cancelled by
failing it; the tool list follows definitions and deletions."""

from __future__ import annotations

import asyncio
import json

import pytest
from asgiref.sync import sync_to_async
from fastmcp import Client

from dag import services as dag
from mcp_bridge.server import create_server
from workflows.models import Project, StepRun, WorkflowSession

pytestmark = [pytest.mark.django_db(transaction=True)]

TWO = [
    {"step_id": "draft", "description": "Draft it", "assigned_role": "swe"},
    {
        "step_id": "check",
        "description": "Check it",
        "assigned_role": "swe",
        "depends_on": ["draft"],
    },
]


@pytest.fixture
def server(project_dir):
    return create_server(project_dir, toolsets=["agents", "workflow-tools"], agent_id="lead")


async def orm(fn):
    return await sync_to_async(fn)()


async def answer(client: Client, tool: str, args: dict | None = None) -> dict:
    result = await client.call_tool(tool, args or {}, raise_on_error=False)
    assert not result.is_error, result.content[0].text
    return json.loads(result.content[0].text)


async def refusal(client: Client, tool: str, args: dict | None = None) -> str:
    result = await client.call_tool(tool, args or {}, raise_on_error=False)
    assert result.is_error
    return result.content[0].text


async def define(client: Client, name: str, execution_type: str | None = None) -> str:
    args = {"creator_id": "lead", "name": name, "steps": TWO}
    if execution_type:
        args["execution_type"] = execution_type
    return (await answer(client, "define_workflow", args))["workflow"]["workflow_id"]


def project() -> Project:
    return Project.objects.get()


async def work(workflow_id: str, outcome: dict[str, object], fail: str | None = None) -> None:
    """Agent ``w`` does the steps as they are handed to it (service calls, as its server would
    make them), failing ``fail`` if given."""
    await orm(lambda: dag.dag_agent_register(project=project(), agent_id="w", roles=["swe"]))
    await orm(lambda: dag.dag_dispatch(project=project()))
    for step_id in ("draft", "check"):
        for _ in range(1500):
            if await orm(
                lambda step_id=step_id: StepRun.objects.filter(
                    session__session_id=workflow_id, step_id=step_id, status="assigned"
                ).exists()
            ):
                break
            await asyncio.sleep(0.02)
        else:
            raise AssertionError(f"{step_id} was never handed to w")
        if step_id == fail:
            await orm(
                lambda step_id=step_id: dag.dag_report_failure(
                    project=project(),
                    workflow_id=workflow_id,
                    step_id=step_id,
                    agent_id="w",
                    error_message="tests are red",
                )
            )
            return
        await orm(
            lambda step_id=step_id: dag.dag_report_completion(
                project=project(),
                workflow_id=workflow_id,
                step_id=step_id,
                agent_id="w",
                result=outcome[step_id],
            )
        )


async def test_defining_and_deleting_shows_in_the_tool_list(server):
    async with Client(server) as client:
        wid = await define(client, "Release plan")
        tools = {tool.name: tool for tool in await client.list_tools()}
        tool = tools["workflow_release_plan"]
        assert f"(Workflow ID: {wid}; category: dag; version: 1; execution: async)" in (
            tool.description
        )
        assert "Answers a run_id at once" in tool.description
        await answer(client, "delete_workflow", {"workflow_id": wid, "requesting_agent_id": "lead"})
        assert "workflow_release_plan" not in {tool.name for tool in await client.list_tools()}
        # A deleted (or executed) workflow never comes back: its name is free for the next.
        second = await define(client, "Release plan")
        third = await define(client, "Release plan")
        names = {tool.name: tool.meta for tool in await client.list_tools()}
        assert names["workflow_release_plan"]["workflow_id"] == second
        assert names[f"workflow_release_plan_{third}"]["workflow_id"] == third
        await answer(client, "workflow_release_plan")
        fourth = await define(client, "Release plan")
        names = {tool.name: tool.meta for tool in await client.list_tools()}
    assert names["workflow_release_plan"]["workflow_id"] == fourth
    assert names[f"workflow_release_plan_{third}"]["workflow_id"] == third


async def test_sync_run_answers_the_results_with_progress(server):
    progress: list[tuple[float, float | None]] = []

    async def on_progress(done, total, message):
        progress.append((done, total))

    async with Client(server, progress_handler=on_progress) as client:
        wid = await define(client, "Quick", "sync")
        tools = {tool.name: tool for tool in await client.list_tools()}
        assert "execution: sync)" in tools["workflow_quick"].description
        call = asyncio.create_task(answer(client, "workflow_quick"))
        await work(wid, {"draft": {"text": "v1"}, "check": "fine"})
        done = await asyncio.wait_for(call, 30)
    assert done["run_id"] == f"dag:{wid}"
    assert done["status"] == "COMPLETED"
    assert done["result"] == {"draft": {"text": "v1"}, "check": "fine"}
    assert progress[-1] == (2, 2)
    assert {total for _, total in progress} == {2}


async def test_sync_run_that_fails_answers_the_details(server):
    async with Client(server) as client:
        wid = await define(client, "Quick", "sync")
        call = asyncio.create_task(refusal(client, "workflow_quick"))
        await work(wid, {"draft": 1}, fail="check")
        text = await asyncio.wait_for(call, 30)
    assert text == f"Workflow {wid} (run dag:{wid}) failed: Step 'check' failed: tests are red"


async def test_sync_run_outliving_the_wait_keeps_running(project_dir, monkeypatch):
    monkeypatch.setenv("DEEPWORK_WORKFLOW_TOOLS_TIMEOUT", "0.3")
    mcp = create_server(project_dir, toolsets=["agents", "workflow-tools"], agent_id="lead")
    async with Client(mcp) as client:
        wid = await define(client, "Quick", "sync")
        text = await refusal(client, "workflow_quick")
        assert text == (
            f"Workflow {wid} (run dag:{wid}) did not finish within 0.3 s; it keeps running: "
            "follow it with get_workflow_status, or stop it with cancel_workflow_run"
        )
        status = await answer(client, "get_workflow_status", {"run_id": f"dag:{wid}"})
    assert status["status"] == "RUNNING"
    assert status["progress"]["total_steps"] == 2


async def test_async_run_is_followed_and_cancelled(server):
    async with Client(server) as client:
        wid = await define(client, "Slow")
        refused = await refusal(client, "workflow_slow", {"goal": "x"})
        assert refused == (
            "Invalid arguments for workflow_slow: at $: Additional properties are not allowed "
            "('goal' was unexpected) (rule 'additionalProperties')"
        )
        assert not await orm(WorkflowSession.objects.exists)
        started = await answer(client, "workflow_slow")
        assert started == {
            "run_id": f"dag:{wid}",
            "workflow_id": wid,
            "status": "RUNNING",
            "result": {
                "delegated": [],
                "issues": [
                    {"step_id": "draft", "reason": "no responsive agent has the role 'swe'"}
                ],
            },
        }
        # It ran: its tool is gone (a DAG workflow runs once).
        assert "workflow_slow" not in {tool.name for tool in await client.list_tools()}
        bare = await refusal(client, "get_workflow_status", {"run_id": wid})
        assert bare == (
            f"Unknown run id '{wid}': no workflow run of this project has it; a multi-agent "
            f"workflow's run id is dag:{wid}"
        )
        cancelled = await answer(
            client, "cancel_workflow_run", {"run_id": f"dag:{wid}", "reason": "wrong plan"}
        )
        assert (cancelled["status"], cancelled["error"]) == (
            "CANCELLED",
            "Cancelled by lead: wrong plan",
        )
        again = await refusal(
            client, "cancel_workflow_run", {"run_id": f"dag:{wid}", "reason": "again"}
        )
        assert again == f"Workflow '{wid}' is already failed; nothing to cancel"
        status = await answer(client, "get_workflow_status", {"run_id": f"dag:{wid}"})
    assert status["status"] == "CANCELLED"
