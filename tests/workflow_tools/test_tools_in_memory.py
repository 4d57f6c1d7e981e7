"""The workflow-tools toolset through a real MCP client (in memory): listing, names, schemas,
argument validation, execution, status, cancel, refresh and filters."""

from __future__ import annotations

import json

import pytest
from asgiref.sync import sync_to_async
from fastmcp import Client

from mcp_bridge.server import create_server
from tests.conftest import NESTED_JOB
from tests.support.factories import write_job
from workflow_tools.models import WorkflowToolFilter, WorkflowToolName
from workflows.models import WorkflowSession

pytestmark = [pytest.mark.django_db(transaction=True)]

STATIC = {
    "get_workflows",
    "start_workflow",
    "finished_step",
    "abort_workflow",
    "go_to_step",
    "get_review_instructions",
    "get_configured_reviews",
    "mark_review_as_passed",
    # `--generation both` (the default) adds DeepWork 0.14's tools and ours beside them.
    "register_session_job",
    "get_session_job",
    "get_named_schemas",
    "get_active_workflow",
    "validate_step_outputs",
}
WORKFLOW_TOOLS = {
    "workflow_demo_main",
    "workflow_demo_quick",
    "workflow_nested_only",
    "workflow_deepwork_jobs_new_job",
    "workflow_deepwork_jobs_repair",
}


@pytest.fixture(params=["legacy", "auto"])
def mode(request) -> str:
    return request.param


@pytest.fixture
def server(demo_project):
    return create_server(demo_project, toolsets=["deepwork", "workflow-tools"])


async def orm(fn):
    """``fn()`` (ORM reads and writes) off the event loop."""
    return await sync_to_async(fn)()


async def answer(client: Client, tool: str, args: dict | None = None) -> dict:
    result = await client.call_tool(tool, args or {}, raise_on_error=False)
    assert not result.is_error, result.content[0].text
    return json.loads(result.content[0].text)


async def refusal(client: Client, tool: str, args: dict | None = None) -> str:
    result = await client.call_tool(tool, args or {}, raise_on_error=False)
    assert result.is_error
    return result.content[0].text


async def test_one_tool_per_workflow_beside_the_static_tools(server, mode):
    async with Client(server, mode=mode) as client:
        tools = {tool.name: tool for tool in await client.list_tools()}
    assert set(tools) == STATIC | WORKFLOW_TOOLS | {
        "refresh_workflow_tools",
        "get_workflow_status",
        "cancel_workflow_run",
    }
    main = tools["workflow_demo_main"]
    assert "(Workflow ID: demo/main; category: deepwork/project; version: 1.0.0; " in (
        main.description
    )
    assert "execution: async)" in main.description
    assert main.input_schema == {
        "type": "object",
        "properties": {
            "goal": {
                "type": "string",
                "minLength": 1,
                "description": "What the user wants to accomplish.",
            },
            "instance_id": {
                "type": "string",
                "description": "Optional label for this run, e.g. 'acme' or 'q1-2026'.",
            },
            "topic": {"type": "string", "description": "What to gather"},
        },
        "required": ["goal", "topic"],
        "additionalProperties": False,
    }


async def test_names_are_persisted_and_stay(server, demo_project):
    async with Client(server) as client:
        await client.list_tools()
    stored = await orm(
        lambda: dict(WorkflowToolName.objects.values_list("workflow_key", "tool_name"))
    )
    assert stored["deepwork:demo/main"] == "workflow_demo_main"
    # Renaming the job at its source keeps the tool's name.
    job = (demo_project / ".deepwork/jobs/nested/job.yml").read_text()
    (demo_project / ".deepwork/jobs/nested/job.yml").write_text(
        job.replace("name: nested", "name: renamed")
    )
    async with Client(create_server(demo_project, toolsets=["workflow-tools"])) as client:
        names = {tool.name for tool in await client.list_tools()}
    assert "workflow_nested_only" in names
    assert "workflow_renamed_only" not in names


async def test_a_collision_takes_the_workflow_id_once(server, demo_project):
    # A second job whose workflow slug equals demo's: its tool name adds its id.
    write_job(
        demo_project,
        "other",
        NESTED_JOB.replace("name: nested", "name: demo").replace("- name: only", "- name: main"),
        ["first", "second"],
    )
    async with Client(server) as client:
        names = {tool.name for tool in await client.list_tools()}
    assert "workflow_demo_main" in names
    assert "workflow_demo_main_other_main" in names
    stored = await orm(lambda: WorkflowToolName.objects.get(workflow_key="deepwork:other/main"))
    assert stored.tool_name == "workflow_demo_main_other_main"


async def test_bad_arguments_are_refused_with_the_path_and_rule(server, mode):
    async with Client(server, mode=mode) as client:
        text = await refusal(client, "workflow_demo_main", {"goal": "x", "topic": 5})
        assert text == (
            "Invalid arguments for workflow_demo_main: at $.topic: 5 is not of type 'string' "
            "(rule 'type')"
        )
        text = await refusal(client, "workflow_demo_main", {"topic": "t", "colour": "red"})
        assert "at $: 'goal' is a required property (rule 'required')" in text
        assert "(rule 'additionalProperties')" in text
    assert not await orm(WorkflowSession.objects.exists)


async def test_calling_a_tool_starts_the_workflow_as_start_workflow_does(server, mode):
    async with Client(server, mode=mode) as client:
        started = await answer(client, "workflow_demo_main", {"goal": "Write it", "topic": "birds"})
        plain = await answer(
            client,
            "start_workflow",
            {"goal": "Write it", "job_name": "demo", "workflow_name": "main"},
        )
        ours, theirs = dict(started["begin_step"]), dict(plain["begin_step"])
        run_id = ours.pop("session_id")
        assert run_id != theirs.pop("session_id")
        assert ours == theirs
        # The stack holds both sessions, the tool's below start_workflow's.
        assert plain["stack"] == [
            {"workflow": "demo/main", "step": "gather"},
            {"workflow": "demo/main", "step": "gather"},
        ]
        session = await orm(lambda: WorkflowSession.objects.get(session_id=run_id))
        assert session.goal == "Write it\n\nInputs:\n- topic: birds"
        status = await answer(client, "get_workflow_status", {"run_id": run_id})
        assert status["status"] == "RUNNING"
        assert status["progress"] == {
            "completed_steps": 0,
            "total_steps": 4,
            "current_step": "gather",
        }
        cancelled = await answer(
            client, "cancel_workflow_run", {"run_id": run_id, "reason": "not needed"}
        )
        assert cancelled["status"] == "CANCELLED"
        assert cancelled["error"] == "not needed"
        again = await refusal(client, "cancel_workflow_run", {"run_id": run_id, "reason": "x"})
        assert "aborted; it is no longer in the active stack" in again
        unknown = await refusal(client, "get_workflow_status", {"run_id": "nope"})
        assert unknown == "Unknown run id 'nope': no workflow run of this project has it"


async def test_refresh_reports_changes_and_filters_apply_on_next_listing(server, demo_project):
    async with Client(server) as client:
        await client.list_tools()
        unchanged = await answer(client, "refresh_workflow_tools")
        assert unchanged["added"] == unchanged["removed"] == unchanged["updated"] == []
        assert set(unchanged["unchanged"]) == WORKFLOW_TOOLS

        write_job(
            demo_project,
            "fresh",
            NESTED_JOB.replace("name: nested", "name: fresh"),
            ["first", "second"],
        )
        job = demo_project / ".deepwork/jobs/demo/job.yml"
        job.write_text(job.read_text().replace('summary: "Only gather"', 'summary: "Gather"'))
        (demo_project / ".deepwork/jobs/nested/job.yml").unlink()
        changes = await answer(client, "refresh_workflow_tools")
        assert changes["added"] == ["workflow_fresh_only"]
        assert changes["updated"] == ["workflow_demo_quick"]
        assert changes["removed"] == ["workflow_nested_only"]

        await orm(
            lambda: WorkflowToolFilter.objects.create(
                action="exclude", field="category", pattern="*/standard"
            )
        )
        await orm(
            lambda: WorkflowToolFilter.objects.create(
                action="exclude", field="name", pattern="*QUICK"
            )
        )
        names = {tool.name for tool in await client.list_tools()}
        assert names & WORKFLOW_TOOLS == {"workflow_demo_main"}
        assert "workflow_fresh_only" in names
        await orm(
            lambda: WorkflowToolFilter.objects.create(
                action="include", field="name", pattern="fresh*"
            )
        )
        names = {tool.name for tool in await client.list_tools()}
        assert {n for n in names if n.startswith("workflow_")} == {"workflow_fresh_only"}


def test_a_steady_listing_costs_two_queries_for_2_or_20_workflows(project_dir):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    def queries(jobs: int) -> int:
        root = project_dir.parent / f"p{jobs}"
        (root / ".deepwork" / "jobs").mkdir(parents=True)
        for index in range(jobs):
            name = f"job{index}"
            write_job(
                root, name, NESTED_JOB.replace("name: nested", f"name: {name}"), ["first", "second"]
            )
        provider = create_server(root, toolsets=["workflow-tools"]).workflow_tools
        provider._build()
        with CaptureQueriesContext(connection) as captured:
            snapshot = provider._build()
        assert len(snapshot.tools) == jobs + 2  # and the two standard workflows
        return len(captured)

    # The filters and the defined DAG workflows; names and the catalog view are remembered.
    assert queries(2) == queries(20) == 2


async def test_the_switch_turns_the_workflow_tools_off(demo_project, monkeypatch):
    monkeypatch.setenv("DEEPWORK_WORKFLOW_TOOLS_ENABLED", "false")
    async with Client(create_server(demo_project, toolsets=["workflow-tools"])) as client:
        names = {tool.name for tool in await client.list_tools()}
    # No workflow tool; the static ones and the deepwork tools brought along stay.
    assert not [name for name in names if name.startswith("workflow_")]
    assert {"refresh_workflow_tools", "get_workflow_status", "cancel_workflow_run"} < names


@pytest.mark.parametrize(
    ("name", "workflow_id", "expected"),
    [
        ("Data analysis!!", "7", ["workflow_data_analysis", "workflow_data_analysis_7"]),
        ("Café / été", "x.y", ["workflow_caf_t", "workflow_caf_t_x_y"]),
        ("???", "Report-2", ["workflow_report-2", "workflow_report-2_report-2"]),
        ("a" * 300, "id", ["workflow_" + "a" * 55, "workflow_" + "a" * 52 + "_id"]),
    ],
)
def test_names_are_safe_and_collisions_add_the_id(name, workflow_id, expected):
    import re

    from workflow_tools.services import tool_name_candidates

    found = tool_name_candidates(key=f"remote-x:{workflow_id}", name=name, workflow_id=workflow_id)
    assert found[:2] == expected
    assert all(re.fullmatch(r"[a-zA-Z0-9_-]{1,64}", candidate) for candidate in found)
    assert len(set(found)) == len(found)
