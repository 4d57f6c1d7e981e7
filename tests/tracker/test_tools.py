"""The tracker toolset in process: every tool, its answers and every refusal."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from fastmcp import Client, FastMCP

from mcp_bridge.server import create_server
from tracker.models import Decision, Issue, Milestone, Phase, Task, TrackedWorkflow
from workflows.models import Event

pytestmark = [pytest.mark.django_db(transaction=True)]


@pytest.fixture
def server(project_dir) -> FastMCP:
    return create_server(project_dir, toolsets=["tracker"])


SNAPSHOTS = Path(__file__).parent / "snapshots"
TRACKER_TOOLS = [
    "start_workflow",
    "complete_workflow",
    "get_context",
    "start_task",
    "complete_task",
    "log_decision",
    "log_issue",
    "log_milestone",
    "start_phase",
    "complete_phase",
]
DEEPWORK_TOOLS = [
    "get_workflows",
    "start_workflow",
    "finished_step",
    "abort_workflow",
    "go_to_step",
    "get_review_instructions",
    "get_configured_reviews",
    "mark_review_as_passed",
]


@pytest.mark.parametrize(
    ("toolsets", "snapshot", "names"),
    [
        (["tracker"], "tools_list_tracker.json", TRACKER_TOOLS),
        (
            ["deepwork", "tracker"],
            "tools_list_deepwork_tracker.json",
            # The later toolset's clashing name goes under its prefix; so do the others.
            DEEPWORK_TOOLS + [f"tracker_{name}" for name in TRACKER_TOOLS],
        ),
    ],
)
async def test_tools_list_matches_the_snapshot(project_dir, toolsets, snapshot, names):
    # The snapshot holds DeepWork 0.9.1's surface: the 0.9 generation.
    server = create_server(project_dir, toolsets=toolsets, generation="0.9")
    async with Client(server) as client:
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
    path = SNAPSHOTS / snapshot
    if os.environ.get("UPDATE_SNAPSHOTS"):
        path.write_text(json.dumps(listed, indent=2, sort_keys=True) + "\n")
    assert listed == json.loads(path.read_text())
    assert [tool["name"] for tool in listed] == names


async def test_prefixed_tracker_tools_answer_under_their_prefix(project_dir):
    server = create_server(project_dir, toolsets=["deepwork", "tracker"])
    async with Client(server) as client:
        created = await ok(client, "tracker_start_workflow", {"name": "n"})
        message = await refused(
            client, "tracker_start_workflow", {"name": "n", "total_phases": 99}, "VALIDATION_ERROR"
        )
        assert "total_phases is 99" in message
        # Argument errors of a tracker tool keep the tracker's shape under its prefix too.
        message = await refused(
            client, "tracker_start_workflow", {"name": "n", "profile": "x"}, "VALIDATION_ERROR"
        )
        assert message.startswith("profile: Input should be")
        # The deepwork tool of the same name is DeepWork's, with its own error wording.
        result = await client.call_tool("start_workflow", {}, raise_on_error=False)
        assert result.is_error
        assert not result.content[0].text.startswith("{")
    assert created["workflow_id"]


async def ok(client: Client, tool: str, args: dict[str, Any]) -> dict[str, Any]:
    result = await client.call_tool(tool, args, raise_on_error=False)
    text = result.content[0].text
    assert not result.is_error, f"{tool} failed: {text}"
    data = json.loads(text)
    assert result.structured_content == data  # the same answer as text and as structure
    return data


async def refused(client: Client, tool: str, args: dict[str, Any], code: str) -> str:
    result = await client.call_tool(tool, args, raise_on_error=False)
    assert result.is_error, f"{tool} unexpectedly succeeded: {result.content[0].text}"
    data = json.loads(result.content[0].text)
    assert data["error"] is True
    assert data["code"] == code, data
    return data["message"]


def counts() -> tuple[int, ...]:
    return (
        TrackedWorkflow.objects.count(),
        Phase.objects.count(),
        Task.objects.count(),
        Decision.objects.count(),
        Issue.objects.count(),
        Milestone.objects.count(),
        Event.objects.count(),
        Task.objects.filter(status="IN_PROGRESS").count(),
    )


async def start(client: Client, **extra: Any) -> str:
    data = await ok(client, "start_workflow", {"name": "Build it", "objective": "ship", **extra})
    return data["workflow_id"]


async def test_a_workflow_with_phases_nested_tasks_and_logs(server):
    async with Client(server) as client:
        created = await ok(
            client,
            "start_workflow",
            {"name": "Build it", "objective": "ship v1", "profile": "complex"},
        )
        assert created["profile"] == "COMPLEX"
        assert created["total_phases"] == 4
        assert created["status"] == "IN_PROGRESS"
        wf = created["workflow_id"]

        first = await ok(
            client,
            "start_task",
            {"workflow_id": wf, "name": "Design", "goal": "a plan", "phase": 1},
        )
        assert first["phase_created"] is True
        assert first["phase_name"] == "Phase 1"
        again = await ok(
            client,
            "start_task",
            {"workflow_id": wf, "name": "Also", "goal": "more", "phase": 1, "phase_name": "x"},
        )
        assert again["phase_created"] is False
        assert again["phase_id"] == first["phase_id"]
        sub = await ok(
            client,
            "start_task",
            {
                "workflow_id": wf,
                "name": "Sketch",
                "goal": "draw",
                "phase": 1,
                "parent_task_id": first["task_id"],
                "caller_type": "subagent",
                "agent_name": "drawer",
            },
        )
        assert sub["parent_task_id"] == first["task_id"]

        # The parent cannot complete while its sub-task runs: the sub-task is named.
        message = await refused(
            client,
            "complete_task",
            {"task_id": first["task_id"], "status": "success", "outcome": {"summary": "s"}},
            "CONFLICT",
        )
        assert "'Sketch'" in message
        assert "sub-task" in message

        decision = await ok(
            client,
            "log_decision",
            {
                "task_id": sub["task_id"],
                "category": "library_choice",
                "question": "Which lib?",
                "options_considered": ["a", "b"],
                "chosen": "a",
                "reasoning": "smaller",
            },
        )
        assert decision["decision_id"]
        blocker = await ok(
            client,
            "log_issue",
            {
                "task_id": sub["task_id"],
                "type": "documentation_gap",
                "description": "no docs",
                "resolution": "guessed",
                "requires_human_review": True,
            },
        )
        await ok(
            client,
            "log_issue",
            {
                "task_id": sub["task_id"],
                "type": "bug_encountered",
                "description": "d",
                "resolution": "fixed",
            },
        )
        await ok(
            client,
            "log_milestone",
            {"task_id": sub["task_id"], "message": "half", "progress": 50, "metadata": {"k": 1}},
        )
        done = await ok(
            client,
            "complete_task",
            {
                "task_id": sub["task_id"],
                "status": "partial_success",
                "outcome": {
                    "summary": "drawn",
                    "achievements": ["a"],
                    "manual_review_needed": True,
                    "manual_review_reason": "check the colours",
                },
                "metadata": {
                    "tests_status": "not_run",
                    "tokens_input": 10,
                    "tokens_output": 5,
                    "packages_added": ["ink"],
                    "packages_removed": ["crayon"],
                    "commands_executed": ["draw --all"],
                },
            },
        )
        stored = await Task.objects.aget(pk=int(sub["task_id"]))
        assert stored.manual_review_needed is True
        assert stored.manual_review_reason == "check the colours"
        assert (stored.packages_added, stored.packages_removed) == (["ink"], ["crayon"])
        assert stored.commands_executed == ["draw --all"]
        assert stored.tests_status == "NOT_RUN"
        assert done["status"] == "partial_success"
        assert done["files_changed"] == {"added": [], "modified": [], "deleted": []}
        assert done["verification"]["scope_match"] is True
        assert done["phase_status"] == "in_progress"
        # Completed once: a second completion is refused, naming the task and its status.
        message = await refused(
            client,
            "complete_task",
            {"task_id": sub["task_id"], "status": "success", "outcome": {"summary": "s"}},
            "CONFLICT",
        )
        assert "Task is not in progress: 'Sketch'" in message
        assert "PARTIAL_SUCCESS" in message

        await ok(
            client,
            "complete_task",
            {"task_id": again["task_id"], "status": "failed", "outcome": {"summary": "no"}},
        )
        closed = await ok(
            client,
            "complete_task",
            {
                "task_id": first["task_id"],
                "status": "success",
                "outcome": {"summary": "planned"},
                "phase_complete": True,
                "metadata": {"tokens_input": 100},
            },
        )
        assert closed["phase_status"] == "completed"

        phase2 = await ok(client, "start_phase", {"workflow_id": wf, "number": 2, "name": "Build"})
        assert phase2["phase_created"] is True
        assert phase2["status"] == "IN_PROGRESS"
        build = await ok(
            client, "start_task", {"workflow_id": wf, "name": "Code", "goal": "g", "phase": 2}
        )
        assert build["phase_id"] == phase2["phase_id"]
        assert build["phase_created"] is False
        await ok(client, "log_milestone", {"task_id": build["task_id"], "message": "started"})
        # complete_phase warns about the task still running in it.
        phase_done = await ok(client, "complete_phase", {"phase_id": phase2["phase_id"]})
        assert "1 task(s) still in progress" in phase_done["warnings"][0]
        assert "'Code'" in phase_done["warnings"][0]

        context = await ok(
            client,
            "get_context",
            {
                "workflow_id": wf,
                "include": ["decisions", "milestones", "blockers", "tasks", "phase_summary"],
            },
        )
        assert context["workflow_status"] == "IN_PROGRESS"
        assert context["current_phase"] == 2
        assert context["decisions"][0]["options_considered"] == ["a", "b"]  # a real array
        assert context["decisions"][0]["agent_name"] == "drawer"
        assert context["decisions"][0]["category"] == "LIBRARY_CHOICE"
        assert [b["id"] for b in context["blockers"]] == [blocker["issue_id"]]
        assert context["has_blockers"] is True
        assert context["blockers_count"] == 1
        assert [m["message"] for m in context["milestones"]] == ["started", "half"]
        assert context["milestones"][1]["metadata"] == {"k": 1}
        assert context["tasks_count"] == 4
        assert {t["name"]: t["parent_task_id"] for t in context["tasks"]}["Sketch"] == first[
            "task_id"
        ]
        summary = {p["phase_number"]: p for p in context["phase_summary"]}
        assert summary[1]["tasks"] == {"total": 3, "completed": 2, "failed": 1, "in_progress": 0}
        assert summary[1]["status"] == "COMPLETED"
        assert summary[2]["status"] == "COMPLETED"

        # Filters select tasks first, then their logs.
        by_agent = await ok(
            client,
            "get_context",
            {"workflow_id": wf, "include": ["tasks", "milestones"], "filter": {"agent": "drawer"}},
        )
        assert [t["name"] for t in by_agent["tasks"]] == ["Sketch"]
        assert [m["message"] for m in by_agent["milestones"]] == ["half"]
        assert by_agent["filters_applied"] == {"phase": None, "agent": "drawer", "since": None}
        in_phase2 = await ok(
            client,
            "get_context",
            {"workflow_id": wf, "include": ["tasks"], "filter": {"phase": 2}},
        )
        assert [t["name"] for t in in_phase2["tasks"]] == ["Code"]
        missing = await ok(
            client, "get_context", {"workflow_id": wf, "include": ["tasks"], "filter": {"phase": 9}}
        )
        assert missing["warning"] == "Phase 9 not found in workflow"
        assert "tasks" not in missing
        later = await ok(
            client,
            "get_context",
            {"workflow_id": wf, "include": ["tasks"], "filter": {"since": "2999-01-01T00:00:00Z"}},
        )
        assert later["tasks"] == []
        assert later["tasks_count"] == 0

        # complete_workflow: 'completed' is refused while a task runs, naming it.
        message = await refused(
            client,
            "complete_workflow",
            {"workflow_id": wf, "status": "completed", "summary": "done"},
            "CONFLICT",
        )
        assert "'Code'" in message
        assert "still in progress" in message
        await ok(
            client,
            "complete_task",
            {"task_id": build["task_id"], "status": "success", "outcome": {"summary": "ok"}},
        )
        finished = await ok(
            client,
            "complete_workflow",
            {"workflow_id": wf, "status": "completed", "summary": "done", "achievements": ["x"]},
        )
        metrics = finished["metrics"]
        assert metrics["total_phases"] == 2
        assert metrics["total_tasks"] == 4
        assert metrics["total_tokens"] == 115
        assert metrics["files_changed"] == 0
        assert metrics["duration"] >= 0
        assert "task_duration_seconds" in metrics
        assert finished["warnings"] == []
        # Completed once; no new task in a finished workflow.
        await refused(
            client,
            "complete_workflow",
            {"workflow_id": wf, "status": "failed", "summary": "again"},
            "CONFLICT",
        )
        message = await refused(
            client, "start_task", {"workflow_id": wf, "name": "n", "goal": "g"}, "CONFLICT"
        )
        assert "COMPLETED" in message

    kinds = await sync_to_async(
        lambda: list(Event.objects.order_by("id").values_list("kind", flat=True))
    )()
    assert kinds.count("workflow:created") == 1
    assert kinds.count("phase:created") == 2
    assert kinds.count("task:created") == 4
    assert kinds.count("task:updated") == 4
    assert kinds.count("phase:updated") == 2
    assert kinds.count("decision:created") == 1
    assert kinds.count("issue:created") == 2
    assert kinds.count("milestone:created") == 2
    assert kinds[-1] == "workflow:updated"
    last = await Event.objects.order_by("-id").afirst()
    assert last.payload["status"] == "COMPLETED"
    assert last.payload["reason"] == "complete_workflow"


async def test_partial_keeps_its_meaning_and_failed_warns_about_running_tasks(server):
    async with Client(server) as client:
        wf = await start(client)
        task = await ok(client, "start_task", {"workflow_id": wf, "name": "t", "goal": "g"})
        done = await ok(
            client, "complete_workflow", {"workflow_id": wf, "status": "partial", "summary": "s"}
        )
        assert done["status"] == "partial"
        assert f"'t' ({task['task_id']})" in done["warnings"][0]
    assert (await TrackedWorkflow.objects.aget(pk=int(wf))).status == "PARTIAL"


async def test_pagination_walks_every_list_with_cursors(server):
    async with Client(server) as client:
        wf = await start(client)
        task = await ok(client, "start_task", {"workflow_id": wf, "name": "t", "goal": "g"})
        for n in range(5):
            await ok(client, "log_milestone", {"task_id": task["task_id"], "message": f"m{n}"})
        seen: list[str] = []
        cursor: dict[str, str] | None = None
        while True:
            args: dict[str, Any] = {"workflow_id": wf, "include": ["milestones"], "limit": 2}
            if cursor:
                args["cursor"] = cursor
            page = await ok(client, "get_context", args)
            assert page["milestones_count"] == 5
            seen += [m["message"] for m in page["milestones"]]
            if page["milestones_next_cursor"] is None:
                break
            cursor = {"milestones": page["milestones_next_cursor"]}
        assert seen == ["m4", "m3", "m2", "m1", "m0"]


BAD = [
    (
        "start_workflow",
        {"name": "x" * 201},
        "VALIDATION_ERROR",
        "name is 201 characters; the limit is 200",
    ),
    ("start_workflow", {"name": ""}, "VALIDATION_ERROR", "name is empty"),
    (
        "start_workflow",
        {"name": "n", "total_phases": 0},
        "VALIDATION_ERROR",
        "total_phases is 0; it must be from 1 to 20",
    ),
    (
        "start_workflow",
        {"name": "n", "total_phases": 21},
        "VALIDATION_ERROR",
        "total_phases is 21; it must be from 1 to 20",
    ),
    (
        "start_workflow",
        {"name": "n", "profile": "huge"},
        "VALIDATION_ERROR",
        "profile: Input should be 'simple', 'standard' or 'complex'",
    ),
    ("start_workflow", {}, "VALIDATION_ERROR", "name: Missing required argument"),
    (
        "complete_workflow",
        {"workflow_id": "999999", "status": "completed", "summary": "s"},
        "NOT_FOUND",
        "workflow_id '999999': no workflow",
    ),
    (
        "complete_workflow",
        {"workflow_id": "abc", "status": "completed", "summary": "s"},
        "NOT_FOUND",
        "workflow_id 'abc'",
    ),
    (
        "complete_workflow",
        {"workflow_id": "{wf}", "status": "done", "summary": "s"},
        "VALIDATION_ERROR",
        "status: Input should be 'completed', 'failed' or 'partial'",
    ),
    (
        "start_task",
        {"workflow_id": "999999", "name": "n", "goal": "g"},
        "NOT_FOUND",
        "workflow_id '999999'",
    ),
    (
        "start_task",
        {"workflow_id": "{wf}", "name": "x" * 201, "goal": "g"},
        "VALIDATION_ERROR",
        "name is 201 characters; the limit is 200",
    ),
    (
        "start_task",
        {"workflow_id": "{wf}", "name": "n", "goal": "g", "caller_type": "boss"},
        "VALIDATION_ERROR",
        "caller_type: Input should be 'orchestrator' or 'subagent'",
    ),
    (
        "start_task",
        {"workflow_id": "{wf}", "name": "n", "goal": "g", "caller_type": "subagent"},
        "VALIDATION_ERROR",
        "agent_name is required when caller_type is 'subagent'",
    ),
    (
        "start_task",
        {"workflow_id": "{wf}", "name": "n", "goal": "g", "phase": 0},
        "VALIDATION_ERROR",
        "phase is 0; it must be from 1 to 100",
    ),
    (
        "start_task",
        {"workflow_id": "{wf}", "name": "n", "goal": "g", "phase": 1, "phase_name": "p" * 201},
        "VALIDATION_ERROR",
        "phase_name is 201 characters; the limit is 200",
    ),
    (
        "start_task",
        {"workflow_id": "{wf}", "name": "n", "goal": "g", "areas": ["src/[z-a]"]},
        "VALIDATION_ERROR",
        "areas[0] 'src/[z-a]' is not a valid glob: the character range 'z-a' is reversed",
    ),
    (
        "start_task",
        {"workflow_id": "{wf}", "name": "n", "goal": "g", "areas": ["ok/", "{a,b"]},
        "VALIDATION_ERROR",
        "areas[1] '{a,b' is not a valid glob",
    ),
    (
        "start_task",
        {"workflow_id": "{wf}", "name": "n", "goal": "g", "areas": ["../up"]},
        "VALIDATION_ERROR",
        "areas[0] '../up' contains '..'",
    ),
    (
        "start_task",
        {"workflow_id": "{wf}", "name": "n", "goal": "g", "parent_task_id": "999999"},
        "NOT_FOUND",
        "parent_task_id '999999'",
    ),
    (
        "start_task",
        {"workflow_id": "{wf}", "name": "n", "goal": "g", "parent_task_id": "{other_task}"},
        "VALIDATION_ERROR",
        "belongs to workflow",
    ),
    (
        "complete_task",
        {"task_id": "999999", "status": "success", "outcome": {"summary": "s"}},
        "NOT_FOUND",
        "task_id '999999'",
    ),
    (
        "complete_task",
        {"task_id": "{task}", "status": "partial", "outcome": {"summary": "s"}},
        "VALIDATION_ERROR",
        "status: Input should be 'success', 'partial_success' or 'failed'",
    ),
    (
        "complete_task",
        {"task_id": "{task}", "status": "success", "outcome": {}},
        "VALIDATION_ERROR",
        "outcome.summary: Field required",
    ),
    (
        "complete_task",
        {
            "task_id": "{task}",
            "status": "success",
            "outcome": {"summary": "s"},
            "metadata": {"tests_status": "green"},
        },
        "VALIDATION_ERROR",
        "metadata.tests_status: Input should be 'passed', 'failed' or 'not_run'",
    ),
    (
        "complete_task",
        {
            "task_id": "{task}",
            "status": "success",
            "outcome": {"summary": "s"},
            "phase_complete": True,
        },
        "VALIDATION_ERROR",
        "phase_complete is true but the task has no phase",
    ),
    (
        "complete_task",
        {
            "task_id": "{task}",
            "status": "success",
            "outcome": {"summary": "s"},
            "metadata": {"tokens_input": -1},
        },
        "VALIDATION_ERROR",
        "metadata.tokens_input is -1",
    ),
    (
        "log_decision",
        {
            "task_id": "{task}",
            "category": "taste",
            "question": "q",
            "chosen": "c",
            "reasoning": "r",
        },
        "VALIDATION_ERROR",
        "category: Input should be 'architecture', 'library_choice', 'trade_off', 'workaround'",
    ),
    (
        "log_decision",
        {
            "task_id": "999999",
            "category": "other",
            "question": "q",
            "chosen": "c",
            "reasoning": "r",
        },
        "NOT_FOUND",
        "task_id '999999'",
    ),
    (
        "log_issue",
        {"task_id": "{task}", "type": "bug", "description": "d", "resolution": "r"},
        "VALIDATION_ERROR",
        "type: Input should be 'documentation_gap'",
    ),
    (
        "log_issue",
        {"task_id": "999999", "type": "other", "description": "d", "resolution": "r"},
        "NOT_FOUND",
        "task_id '999999'",
    ),
    (
        "log_milestone",
        {"task_id": "{task}", "message": "m" * 501},
        "VALIDATION_ERROR",
        "message is 501 characters; the limit is 500",
    ),
    (
        "log_milestone",
        {"task_id": "{task}", "message": "m", "progress": 100.5},
        "VALIDATION_ERROR",
        "progress is 100.5; it must be from 0 to 100",
    ),
    (
        "log_milestone",
        {"task_id": "{task}", "message": "m", "progress": -1},
        "VALIDATION_ERROR",
        "progress is -1.0; it must be from 0 to 100",
    ),
    ("log_milestone", {"task_id": "999999", "message": "m"}, "NOT_FOUND", "task_id '999999'"),
    (
        "get_context",
        {"workflow_id": "999999", "include": ["tasks"]},
        "NOT_FOUND",
        "workflow_id '999999'",
    ),
    (
        "get_context",
        {"workflow_id": "{wf}", "include": ["everything"]},
        "VALIDATION_ERROR",
        "include.0: Input should be 'decisions'",
    ),
    ("get_context", {"workflow_id": "{wf}", "include": []}, "VALIDATION_ERROR", "include is empty"),
    (
        "get_context",
        {"workflow_id": "{wf}", "include": ["tasks"], "limit": 0},
        "VALIDATION_ERROR",
        "limit is 0; it must be from 1 to 200",
    ),
    (
        "get_context",
        {"workflow_id": "{wf}", "include": ["tasks"], "cursor": {"tasks": "x"}},
        "VALIDATION_ERROR",
        "cursor.tasks 'x' is not a cursor",
    ),
    (
        "get_context",
        {"workflow_id": "{wf}", "include": ["tasks"], "filter": {"since": "yesterday"}},
        "VALIDATION_ERROR",
        "filter.since 'yesterday' is not an ISO 8601",
    ),
    (
        "get_context",
        {"workflow_id": "{wf}", "include": ["tasks"], "filter": {"agent": "a" * 201}},
        "VALIDATION_ERROR",
        "filter.agent is 201 characters; the limit is 200",
    ),
    (
        "get_context",
        {"workflow_id": "{wf}", "include": ["tasks"], "filter": {"phase": 0}},
        "VALIDATION_ERROR",
        "filter.phase is 0; it must be from 1 to 100",
    ),
    (
        "get_context",
        {"workflow_id": "{wf}", "include": ["tasks"], "cursor": {"everything": "1"}},
        "VALIDATION_ERROR",
        "cursor.everything: no such list",
    ),
    (
        "start_phase",
        {"workflow_id": "{wf}", "number": 101},
        "VALIDATION_ERROR",
        "phase is 101; it must be from 1 to 100",
    ),
    ("start_phase", {"workflow_id": "999999", "number": 1}, "NOT_FOUND", "workflow_id '999999'"),
    ("complete_phase", {"phase_id": "999999"}, "NOT_FOUND", "phase_id '999999'"),
    (
        "complete_phase",
        {"phase_id": "{phase}", "status": "done"},
        "VALIDATION_ERROR",
        "status: Input should be 'completed' or 'failed'",
    ),
]


@pytest.mark.parametrize(
    ("tool", "args", "code", "expected"), BAD, ids=[f"{b[0]}-{i}" for i, b in enumerate(BAD)]
)
async def test_bad_input_gets_a_precise_error_and_changes_nothing(
    server, tool, args, code, expected
):
    async with Client(server) as client:
        wf = await start(client)
        phase = await ok(client, "start_phase", {"workflow_id": wf, "number": 1})
        task = await ok(client, "start_task", {"workflow_id": wf, "name": "t", "goal": "g"})
        other_wf = await start(client)
        other = await ok(client, "start_task", {"workflow_id": other_wf, "name": "o", "goal": "g"})
        values = {
            "wf": wf,
            "task": task["task_id"],
            "other_task": other["task_id"],
            "phase": phase["phase_id"],
        }
        filled = json.loads(
            json.dumps(args)
            .replace("{wf}", values["wf"])
            .replace("{task}", values["task"])
            .replace("{other_task}", values["other_task"])
            .replace("{phase}", values["phase"])
        )
        before = await sync_to_async(counts)()
        message = await refused(client, tool, filled, code)
        assert expected in message, message
        assert await sync_to_async(counts)() == before


async def test_an_unexpected_failure_answers_internal_error_in_the_same_shape(server, monkeypatch):
    from tracker import services

    def broken(**_: Any) -> None:
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(services, "decision_log", broken)
    async with Client(server) as client:
        wf = await start(client)
        task = await ok(client, "start_task", {"workflow_id": wf, "name": "t", "goal": "g"})
        message = await refused(
            client,
            "log_decision",
            {
                "task_id": task["task_id"],
                "category": "other",
                "question": "q",
                "chosen": "c",
                "reasoning": "r",
            },
            "INTERNAL_ERROR",
        )
    assert "RuntimeError" in message
    assert "disk on fire" not in message  # details stay in the server's log
