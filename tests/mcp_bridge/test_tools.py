"""The deepwork toolset through a real MCP client (in memory), in both protocol eras.

Tools run their services in Django's database thread, so these tests use committed data
(``transaction=True``).
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

import pytest
from fastmcp import Client

from mcp_bridge.server import create_server
from reviews.models import ReviewResult
from workflows.models import Event, WorkflowSession

pytestmark = [pytest.mark.django_db(transaction=True)]

SNAPSHOT = Path(__file__).parent / "snapshots" / "tools_list.json"


@pytest.fixture(params=["legacy", "auto"])
def mode(request) -> str:
    return request.param


@pytest.fixture
def server(demo_project):
    return create_server(demo_project)


async def call(client: Client, tool: str, args: dict | None = None):
    result = await client.call_tool(tool, args or {}, raise_on_error=False)
    text = result.content[0].text if result.content else None
    return result, text


async def test_tools_list_matches_the_snapshot(demo_project, mode):
    # DeepWork 0.9.1's surface exactly: the 0.9 generation (the default "both" adds 0.14's).
    async with Client(create_server(demo_project, generation="0.9"), mode=mode) as client:
        tools = await client.list_tools()
    listed = [
        {
            "name": tool.name,
            "description": tool.description,
            "inputSchema": tool.input_schema,
            "outputSchema": tool.output_schema,
            "annotations": tool.annotations.model_dump(exclude_none=True)
            if tool.annotations
            else None,
        }
        for tool in tools
    ]
    if os.environ.get("UPDATE_SNAPSHOTS"):
        SNAPSHOT.parent.mkdir(exist_ok=True)
        SNAPSHOT.write_text(json.dumps(listed, indent=2, sort_keys=True) + "\n")
    assert listed == json.loads(SNAPSHOT.read_text())
    assert [t["name"] for t in listed] == [
        "get_workflows",
        "start_workflow",
        "finished_step",
        "abort_workflow",
        "go_to_step",
        "get_review_instructions",
        "get_configured_reviews",
        "mark_review_as_passed",
    ]


async def test_server_identity_and_instructions(server):
    async with Client(server, mode="legacy") as client:
        init = client.initialize_result
    assert init.server_info.name == "deepwork"
    for phase in ("Discover", "Start", "Execute", "Checkpoint", "Iterate", "Continue", "Complete"):
        assert f"**{phase}**" in init.instructions


async def test_get_workflows_lists_jobs_and_errors_with_the_repair_hint(server, demo_project, mode):
    (demo_project / ".deepwork/jobs/broken").mkdir()
    (demo_project / ".deepwork/jobs/broken/job.yml").write_text("- not a mapping\n")
    async with Client(server, mode=mode) as client:
        result, text = await call(client, "get_workflows")
    assert not result.is_error
    payload = json.loads(text)
    assert payload == result.structured_content
    assert text == json.dumps(payload, separators=(",", ":"))  # compact JSON, model order
    assert [job["name"] for job in payload["jobs"]][:2] == ["demo", "nested"]
    assert payload["jobs"][0]["workflows"] == [
        {"name": "main", "summary": "Gather, split in two, wrap up"},
        {"name": "quick", "summary": "Only gather"},
    ]
    (error,) = payload["errors"]
    assert error["job_name"] == "broken"
    assert error["job_dir"] == str(demo_project / ".deepwork/jobs/broken")
    assert error["error"] == (
        "Failed to load job.yml: YAML file must contain a dictionary, got list\n"
        "If this job.yml was edited in this session, fix it directly. Otherwise repair the "
        'project\'s jobs with the repair workflow: start_workflow with job_name "deepwork_jobs" '
        'and workflow_name "repair".'
    )


async def test_a_misspelt_instructions_file_is_reported_by_get_workflows(server, demo_project):
    job_yml = demo_project / ".deepwork/jobs/nested/job.yml"
    job_yml.write_text(job_yml.read_text().replace("steps/second.md", "steps/secnod.md"))
    async with Client(server) as client:
        _, text = await call(client, "get_workflows")
        result, refused = await call(
            client, "start_workflow", {"goal": "g", "job_name": "nested", "workflow_name": "only"}
        )
    payload = json.loads(text)
    assert "nested" not in [job["name"] for job in payload["jobs"]]
    (error,) = payload["errors"]
    assert error["job_name"] == "nested"
    assert error["error"].startswith(
        "Step 'second' has instructions_file 'steps/secnod.md', which does not exist in the job "
        "folder\nIf this job.yml was edited in this session, fix it directly."
    )
    assert result.is_error
    assert refused == (
        "Error calling tool 'start_workflow': Failed to parse job 'nested': Step 'second' has "
        "instructions_file 'steps/secnod.md', which does not exist in the job folder"
    )


async def test_a_workflow_from_start_to_finish(server, demo_project, mode):
    async with Client(server, mode=mode) as client:
        result, text = await call(
            client, "start_workflow", {"goal": "g", "job_name": "demo", "workflow_name": "main"}
        )
        started = json.loads(text)
        assert list(started) == ["begin_step", "stack"]
        assert list(started["begin_step"]) == [
            "session_id",
            "step_id",
            "job_dir",
            "step_expected_outputs",
            "step_reviews",
            "step_instructions",
            "common_job_info",
        ]
        _, text = await call(client, "finished_step", {"outputs": {"notes.md": "notes.md"}})
        step = json.loads(text)
        assert list(step) == [
            "status",
            "feedback",
            "failed_reviews",
            "begin_step",
            "summary",
            "all_outputs",
            "stack",
        ]
        assert step["status"] == "next_step"
        assert step["feedback"] is None
        assert step["summary"] is None
        _, text = await call(
            client, "finished_step", {"outputs": {"a.md": "a.md", "b.md": "b.md"}, "notes": "n"}
        )
        # wrap_up has a review: in self-review mode the agent is told to review its own work.
        _, text = await call(client, "finished_step", {"outputs": {"summary.md": "summary.md"}})
        review = json.loads(text)
        assert review["status"] == "needs_work"
        assert review["failed_reviews"] is None
        sid = started["begin_step"]["session_id"]
        instructions = f".deepwork/tmp/quality_review_{sid}_wrap_up.md"
        assert review["feedback"].startswith(
            f"Quality review required. Review instructions have been written to: {instructions}"
        )
        assert "quality_review_override_reason" in review["feedback"]
        _, text = await call(
            client,
            "finished_step",
            {
                "outputs": {"summary.md": "summary.md"},
                "quality_review_override_reason": "Self-review passed: all criteria met",
            },
        )
        done = json.loads(text)
    assert done["status"] == "workflow_complete"
    assert done["stack"] == []
    assert list(done["all_outputs"]) == ["notes.md", "a.md", "b.md", "summary.md"]
    written = (demo_project / instructions).read_text()
    assert "- **Complete**: The summary covers every note." in written
    assert "- summary.md  (output: summary.md)" in written
    assert "- notes.md  (input: notes.md from gather)" in written
    stored = await ReviewResult.objects.aget()
    assert stored.passed
    assert stored.override_reason == "Self-review passed: all criteria met"


async def test_errors_carry_deepwork_wording(server, mode):
    async with Client(server, mode=mode) as client:
        cases = [
            (
                "finished_step",
                {"outputs": {}},
                "Error calling tool 'finished_step': No active "
                "workflow session. Use start_workflow to begin a workflow.",
            ),
            (
                "start_workflow",
                {"goal": "g", "job_name": "nope", "workflow_name": "x"},
                "Error calling tool 'start_workflow': Job not found: nope",
            ),
            (
                "abort_workflow",
                {"explanation": "x", "session_id": "abc"},
                "Error calling tool 'abort_workflow': Session 'abc' not found in active stack",
            ),
            (
                "go_to_step",
                {"step_id": "x"},
                "Error calling tool 'go_to_step': No active "
                "workflow session. Use start_workflow to begin a workflow.",
            ),
        ]
        for tool, args, message in cases:
            result, text = await call(client, tool, args)
            assert result.is_error, tool
            assert text == message
            assert not result.structured_content

        await call(
            client, "start_workflow", {"goal": "g", "job_name": "demo", "workflow_name": "main"}
        )
        result, text = await call(client, "finished_step", {"outputs": {"notes.md": "../x.md"}})
        assert result.is_error
        assert text == (
            "Error calling tool 'finished_step': Output 'notes.md': '../x.md' resolves outside "
            "the project root; outputs must be files inside the project"
        )
        result, text = await call(client, "finished_step", {"outputs": "notes.md"})
        assert result.is_error
        assert text.startswith("1 validation error for call[finished_step]\noutputs\n")
        result, text = await call(client, "start_workflow", {"job_name": "demo"})
        assert text.startswith("2 validation errors for call[start_workflow]")
    # None of the refused calls moved the session.
    session = await WorkflowSession.objects.aget()
    assert session.current_step_id == "gather"
    assert session.revision == 0


async def test_abort_and_go_to_step(server, mode):
    async with Client(server, mode=mode) as client:
        await call(
            client, "start_workflow", {"goal": "g", "job_name": "demo", "workflow_name": "main"}
        )
        await call(client, "finished_step", {"outputs": {"notes.md": "notes.md"}})
        _, text = await call(client, "go_to_step", {"step_id": "gather"})
        back = json.loads(text)
        assert back["begin_step"]["step_id"] == "gather"
        assert back["invalidated_steps"] == ["gather", "part_a", "part_b"]
        _, text = await call(
            client, "start_workflow", {"goal": "g", "job_name": "nested", "workflow_name": "x"}
        )
        _, text = await call(client, "abort_workflow", {"explanation": "not needed"})
    assert json.loads(text) == {
        "aborted_workflow": "nested/only",
        "aborted_step": "first",
        "explanation": "not needed",
        "stack": [{"workflow": "demo/main", "step": "gather"}],
        "resumed_workflow": "demo/main",
        "resumed_step": "gather",
    }
    kinds = [kind async for kind in Event.objects.order_by("id").values_list("kind", flat=True)]
    assert "step_reopened" in kinds
    assert kinds[-1] == "session_aborted"


async def test_each_call_is_logged_with_the_stack_at_debug(server, caplog):
    caplog.set_level("DEBUG", logger="deepwork.mcp")
    async with Client(server, mode="legacy") as client:
        await call(
            client, "start_workflow", {"goal": "g", "job_name": "demo", "workflow_name": "main"}
        )
        await call(client, "get_workflows")
    calls = [
        r for r in caplog.records if r.name == "deepwork.mcp" and r.getMessage().startswith("tool=")
    ]
    assert any(
        r.getMessage().startswith("tool=get_workflows") and "demo/main:gather" in r.getMessage()
        for r in calls
    )
    assert {r.levelname for r in calls} == {"DEBUG"}


async def test_a_refusal_is_an_answer_not_an_error_in_the_log(server, caplog):
    caplog.set_level("DEBUG")
    async with Client(server, mode="legacy") as client:
        for tool, args in [
            ("finished_step", {"outputs": {}}),
            ("abort_workflow", {"explanation": "x"}),
            ("get_active_workflow", {}),
        ]:
            result, text = await call(client, tool, args)
            assert result.is_error
            assert text == (
                f"Error calling tool '{tool}': No active workflow session. Use start_workflow "
                "to begin a workflow."
            )
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []


async def test_review_tools_over_deepreview_rules(server, demo_project, monkeypatch, tmp_path):
    from tests.reviews import commit_all, isolate_git, make_repo

    isolate_git(monkeypatch, tmp_path)
    make_repo(demo_project)
    (demo_project / ".deepreview").write_text(
        "python_style:\n"
        "  description: Python files follow the style guide\n"
        "  match: {include: ['**/*.py']}\n"
        "  review: {strategy: individual, instructions: Check the style.}\n"
    )
    commit_all(demo_project, "rules")
    (demo_project / "app.py").write_text("print('hi')\n")  # untracked: still a change

    async with Client(server, mode="legacy") as client:
        result, text = await call(client, "get_configured_reviews")
        assert result.structured_content == {
            "result": [
                {
                    "name": "python_style",
                    "description": "Python files follow the style guide",
                    "defining_file": ".deepreview:1",
                }
            ]
        }
        assert json.loads(text) == result.structured_content["result"]

        result, text = await call(client, "get_review_instructions")
        assert not result.is_error
        assert result.structured_content == {"result": text}
        assert text.startswith("Invoke the following list of Tasks in parallel:\n\n")
        assert 'name: "python_style review of app.py"' in text
        assert "\tsubagent_type: general-purpose" in text
        review_id = text.split("review_instructions/")[1].split(".md")[0]

        _, text = await call(client, "mark_review_as_passed", {"review_id": review_id})
        assert text == f"Review '{review_id}' marked as passed."
        _, text = await call(client, "get_review_instructions")
        assert text == "All matching reviews have already passed for the current file contents."

        (demo_project / "app.py").write_text("print('changed')\n")
        _, text = await call(client, "get_review_instructions", {"files": ["app.py"]})
        assert 'name: "python_style review of app.py"' in text

        _, text = await call(client, "get_review_instructions", {"files": ["../outside.py"]})
        assert text.startswith("Review error: Only files inside the project can be reviewed")
        _, text = await call(client, "mark_review_as_passed", {"review_id": "../x"})
        assert text.startswith("Validation error: ")


async def test_get_workflows_answers_unchanged_job_files_without_the_database(
    demo_project, monkeypatch
):
    from mcp_bridge.toolsets import calls
    from tests.support.factories import write_job

    trips = []
    real = calls.db_tool_call

    async def counted(state, tool, *args, **kwargs):
        trips.append(tool)
        return await real(state, tool, *args, **kwargs)

    monkeypatch.setattr("mcp_bridge.toolsets.deepwork.common.db_tool_call", counted)
    async with Client(create_server(demo_project)) as client:
        _, first = await call(client, "get_workflows")
        _, again = await call(client, "get_workflows")
        assert again == first
        assert trips == ["get_workflows"]

        write_job(demo_project, "later", LATER_JOB, ["only"])
        _, changed = await call(client, "get_workflows")

    assert trips == ["get_workflows", "get_workflows"]
    assert "later" in {job["name"] for job in json.loads(changed)["jobs"]}


LATER_JOB = """\
name: later
version: "1.0.0"
summary: "Added while the server runs"
common_job_info_provided_to_all_steps_at_runtime: "x"
workflows:
  - name: main
    summary: "Main"
    steps: [only]
steps:
  - id: only
    name: "Only"
    description: "Only"
    instructions_file: steps/only.md
    outputs:
      out.md:
        type: file
        description: "Out"
        required: true
    reviews: []
"""
