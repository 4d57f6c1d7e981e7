"""``get_context`` and the log writes run hand-written SQL (for speed): on the real database
(SQLite, and PostgreSQL with ``DATABASE_URL``), every filter selects the rows the models say
it should, every value reads back as the models hold it, and a log against a task the
project does not have writes nothing."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tracker import services as tracker
from tracker.models import Decision, Issue, Milestone, Task, TrackedWorkflow
from tracker.selectors import INCLUDES, context_get
from workflows.errors import NotFound
from workflows.models import Event

pytestmark = pytest.mark.django_db(transaction=True)

T0 = datetime(2026, 3, 1, 12, 0, 0, 250000, tzinfo=UTC)


def at(minutes: int) -> datetime:
    return T0 + timedelta(minutes=minutes)


@pytest.fixture
def history(project, agent) -> dict[str, Any]:
    """Two phases, four tasks (one a sub-agent's, one nested, one finished), their logs an hour
    apart; every time set by hand so ``since`` cuts between them."""
    workflow = tracker.tracked_workflow_start(project=project, agent=agent, name="w")
    wid = str(workflow.pk)

    def start(name: str, minute: int, **more: Any) -> Task:
        task = tracker.task_start(
            project=project, agent=agent, workflow_id=wid, name=name, goal="g", **more
        ).task
        Task.objects.filter(pk=task.pk).update(started_at=at(minute))
        return task

    build = start("build", 0, phase=1)
    draw = start("draw", 60, phase=1, caller_type="subagent", agent_name="drawer")
    nested = start("nested", 120, phase=2, parent_task_id=str(build.pk))
    loose = start("loose", 180)
    for minute, task in enumerate((build, draw, nested, loose)):
        tid = str(task.pk)
        rows: list[Decision | Milestone | Issue] = [
            tracker.decision_log(
                project=project,
                agent=agent,
                task_id=tid,
                category="trade_off",
                question=f"q {task.name}",
                chosen="c",
                reasoning="r",
                options_considered=["a", "b"],
                trade_offs="t" if minute % 2 else None,
            ),
            tracker.milestone_log(
                project=project,
                agent=agent,
                task_id=tid,
                message=f"m {task.name}",
                progress=None if minute % 2 else 12.5,
                metadata={"n": minute, "deep": [1, {"x": None}]},
            ),
            tracker.issue_log(
                project=project,
                agent=agent,
                task_id=tid,
                type="bug_encountered",
                description=f"d {task.name}",
                resolution="r",
                requires_human_review=True,
            ),
        ]
        for row in rows:
            type(row).objects.filter(pk=row.pk).update(created_at=at(60 * minute + 30))
    tracker.task_complete(
        project=project,
        agent=agent,
        task_id=str(nested.pk),
        status="partial_success",
        summary="half",
        manual_review_needed=True,
    )
    Task.objects.filter(pk=nested.pk).update(
        started_at=at(120),
        completed_at=at(122),
        duration_ms=2500,
        files_changed={"added": ["a.py"]},
    )
    return {"workflow": workflow, "tasks": Task.objects.filter(workflow=workflow)}


def ids(rows: list[dict[str, Any]]) -> list[str]:
    return [row["id"] for row in rows]


def newest_first(queryset: Any) -> list[str]:
    return [str(pk) for pk in queryset.order_by("-id").values_list("pk", flat=True)]


@pytest.mark.parametrize(
    "chosen",
    [
        {},
        {"phase": 1},
        {"phase": 2},
        {"agent": "drawer"},
        {"phase": 1, "agent": "drawer"},
        {"since": "2026-03-01T13:00:00.250000+00:00"},
        {"since": "2026-03-01T14:00:00+01:00"},  # 13:00 UTC
        {"since": "2026-03-01T13:00:00.250000Z", "phase": 2},
        {"agent": "drawer", "since": "2026-03-01T13:30:00.250000Z"},
    ],
)
def test_each_filter_selects_what_the_models_select(project, agent, history, chosen):
    workflow: TrackedWorkflow = history["workflow"]
    answer = context_get(
        project=project, workflow_id=str(workflow.pk), include=list(INCLUDES), **chosen
    )
    tasks = Task.objects.filter(workflow=workflow)
    if "phase" in chosen:
        tasks = tasks.filter(phase__number=chosen["phase"])
    if "agent" in chosen:
        tasks = tasks.filter(agent_name=chosen["agent"])
    since = datetime.fromisoformat(chosen["since"]) if "since" in chosen else None
    if since is not None:
        tasks = tasks.filter(started_at__gte=since)

    def logs(model: type[Decision] | type[Milestone] | type[Issue]) -> Any:
        rows = model.objects.filter(workflow=workflow)
        if "phase" in chosen or "agent" in chosen:
            rows = rows.filter(task__in=tasks)
        return rows if since is None else rows.filter(created_at__gte=since)

    assert ids(answer["tasks"]) == newest_first(tasks)
    assert answer["tasks_count"] == tasks.count()
    for name, model in (("decisions", Decision), ("milestones", Milestone)):
        assert ids(answer[name]) == newest_first(logs(model)), name
        assert answer[f"{name}_count"] == logs(model).count()
    blockers = logs(Issue).filter(requires_human_review=True, resolved_at__isnull=True)
    assert ids(answer["blockers"]) == newest_first(blockers)
    assert answer["has_blockers"] is blockers.exists()
    phases = [p["phase_number"] for p in answer["phase_summary"]]
    assert phases == ([chosen["phase"]] if "phase" in chosen else [1, 2])
    assert answer.get("filters_applied") == (
        {"phase": chosen.get("phase"), "agent": chosen.get("agent"), "since": chosen.get("since")}
        if chosen
        else None
    )


def test_every_value_reads_back_as_the_models_hold_it(project, agent, history):
    workflow: TrackedWorkflow = history["workflow"]
    answer = context_get(project=project, workflow_id=str(workflow.pk), include=list(INCLUDES))
    for shown in answer["decisions"]:
        row = Decision.objects.select_related("task").get(pk=shown["id"])
        assert shown == {
            "id": str(row.pk),
            "task_id": str(row.task_id),
            "task_name": row.task.name,
            "agent_name": row.task.agent_name or row.task.agent.agent_id,
            "category": "TRADE_OFF",
            "question": row.question,
            "options_considered": ["a", "b"],
            "chosen": "c",
            "reasoning": "r",
            "trade_offs": row.trade_offs or None,
            "created_at": row.created_at.isoformat(),
        }
    assert {d["agent_name"] for d in answer["decisions"]} == {"drawer", agent.agent_id}
    for shown in answer["milestones"]:
        milestone = Milestone.objects.get(pk=shown["id"])
        assert (shown["progress"], shown["metadata"]) == (milestone.progress, milestone.metadata)
        assert shown["created_at"] == milestone.created_at.isoformat()
    assert shown["created_at"] == "2026-03-01T12:30:00.250000+00:00"  # the oldest, read last
    nested = next(t for t in answer["tasks"] if t["name"] == "nested")
    build = next(t for t in answer["tasks"] if t["name"] == "build")
    assert nested["parent_task_id"] == build["id"]
    assert nested["manual_review_needed"] is True
    assert build["manual_review_needed"] is False
    assert (nested["status"], nested["duration_seconds"]) == ("PARTIAL_SUCCESS", 2)
    assert nested["files_changed"] == {"added": ["a.py"]}
    assert build["files_changed"] is None
    assert nested["completed_at"] == "2026-03-01T14:02:00.250000+00:00"
    loose = next(t for t in answer["tasks"] if t["name"] == "loose")
    assert loose["phase_id"] is None
    first, second = answer["phase_summary"]
    assert first["tasks"] == {"total": 2, "completed": 0, "failed": 0, "in_progress": 2}
    assert second["tasks"] == {"total": 1, "completed": 1, "failed": 0, "in_progress": 0}
    assert second["duration_seconds"] == 2  # 2.5 s rounds half to even, as before


def test_a_log_against_another_projects_task_writes_nothing(project, agent, history, tmp_path):
    from workflows.services.agents import agent_ensure
    from workflows.services.projects import project_ensure

    elsewhere = project_ensure(root_path=tmp_path)
    stranger = agent_ensure(project=elsewhere, agent_id="stranger")
    task = history["tasks"].first()
    before = (Decision.objects.count(), Issue.objects.count(), Event.objects.count())
    for wire_id in (str(task.pk), "999999", "x1"):
        with pytest.raises(NotFound, match="task_id"):
            tracker.decision_log(
                project=elsewhere,
                agent=stranger,
                task_id=wire_id,
                category="other",
                question="q",
                chosen="c",
                reasoning="r",
            )
        with pytest.raises(NotFound, match="task_id"):
            tracker.issue_log(
                project=elsewhere,
                agent=stranger,
                task_id=wire_id,
                type="other",
                description="d",
                resolution="r",
            )
    assert (Decision.objects.count(), Issue.objects.count(), Event.objects.count()) == before


def test_a_logged_row_is_what_the_database_holds(project, agent, history):
    task = history["tasks"].first()
    row = tracker.milestone_log(
        project=project, agent=agent, task_id=str(task.pk), message="m", progress=40
    )
    stored = Milestone.objects.get(pk=row.pk)
    for field in Milestone._meta.concrete_fields:
        assert getattr(row, field.attname) == getattr(stored, field.attname), field.name
    assert (row.workflow_id, row.task_id) == (task.workflow_id, task.pk)
    event = Event.objects.filter(kind=Event.Kind.MILESTONE_CREATED).latest("id")
    assert event.payload["milestone_id"] == str(row.pk)
    assert event.payload["workflow_id"] == str(task.workflow_id)
