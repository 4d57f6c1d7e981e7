"""The tracker's services on the real database: status rules, races with real threads, file
changes in a real git repository, and events written for every change.

The races gate on the slow part each call does outside its transaction (the project snapshot
or the file comparison): every thread has read the same state before any of them writes.
"""

from __future__ import annotations

import subprocess
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from django.db import connections

from tracker import services as tracker
from tracker.models import Phase, Task, TrackedWorkflow
from workflows.errors import Conflict, InvalidInput, WorkflowError
from workflows.models import Event

pytestmark = pytest.mark.django_db(transaction=True)

CONTENDERS = 6


def in_thread(fn: Callable[..., Any]) -> Callable[..., Any]:
    def wrapper(*args: Any) -> Any:
        try:
            return fn(*args)
        except WorkflowError as exc:
            return exc
        finally:
            connections.close_all()

    return wrapper


def gated(monkeypatch, name: str, parties: int) -> None:
    """Make ``tracker.<name>`` wait until ``parties`` threads have reached it."""
    everyone = threading.Barrier(parties)
    original = getattr(tracker, name)

    def waiting(*args: Any, **kwargs: Any) -> Any:
        everyone.wait(timeout=30)
        return original(*args, **kwargs)

    monkeypatch.setattr(tracker, name, waiting)


def git(root: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True)


@pytest.fixture
def workflow(project, agent) -> TrackedWorkflow:
    return tracker.tracked_workflow_start(project=project, agent=agent, name="w", objective="o")


def test_two_agents_completing_one_task_exactly_one_wins(project, agent, workflow, monkeypatch):
    task = tracker.task_start(
        project=project, agent=agent, workflow_id=str(workflow.pk), name="t", goal="g"
    ).task
    gated(monkeypatch, "_changes", CONTENDERS)
    statuses = ["success", "failed", "partial_success"] * 2

    @in_thread
    def complete(n: int) -> Any:
        return tracker.task_complete(
            project=project,
            agent=agent,
            task_id=str(task.pk),
            status=statuses[n],
            summary=f"by {n}",
            root=Path(project.root_path),
        )

    with ThreadPoolExecutor(CONTENDERS) as pool:
        results = list(pool.map(complete, range(CONTENDERS)))

    winners = [r for r in results if isinstance(r, tracker.TaskCompleted)]
    losers = [r for r in results if isinstance(r, Conflict)]
    assert len(winners) == 1, results
    assert len(losers) == CONTENDERS - 1, results
    assert all("Task is not in progress: 't'" in str(loser) for loser in losers)
    task.refresh_from_db()
    won = results.index(winners[0])
    assert task.status == tracker.TASK_OUTCOMES[statuses[won]]
    assert task.summary == f"by {won}"
    assert Event.objects.filter(kind="task:updated").count() == 1


def test_tasks_racing_to_open_one_phase_create_it_once(project, agent, workflow, monkeypatch):
    gated(monkeypatch, "_snapshot", CONTENDERS)

    @in_thread
    def start(n: int) -> Any:
        return tracker.task_start(
            project=project,
            agent=agent,
            workflow_id=str(workflow.pk),
            name=f"t{n}",
            goal="g",
            phase=1,
            root=Path(project.root_path),
        )

    with ThreadPoolExecutor(CONTENDERS) as pool:
        results = list(pool.map(start, range(CONTENDERS)))

    assert all(isinstance(r, tracker.TaskStarted) for r in results), results
    assert sum(r.phase_created for r in results) == 1
    assert len({r.phase.pk for r in results}) == 1
    assert Phase.objects.count() == 1
    assert Event.objects.filter(kind="phase:created").count() == 1
    assert Task.objects.filter(phase__number=1).count() == CONTENDERS


def test_a_subtask_cannot_start_under_a_finished_parent(project, agent, workflow):
    parent = tracker.task_start(
        project=project, agent=agent, workflow_id=str(workflow.pk), name="p", goal="g"
    ).task
    tracker.task_complete(
        project=project, agent=agent, task_id=str(parent.pk), status="success", summary="s"
    )
    before = Task.objects.count()
    with pytest.raises(Conflict, match="sub-tasks start only under a running task"):
        tracker.task_start(
            project=project,
            agent=agent,
            workflow_id=str(workflow.pk),
            name="c",
            goal="g",
            parent_task_id=str(parent.pk),
        )
    assert Task.objects.count() == before


def test_a_phase_once_closed_takes_no_new_task(project, agent, workflow):
    started = tracker.phase_start(
        project=project, agent=agent, workflow_id=str(workflow.pk), number=1
    )
    tracker.phase_complete(project=project, agent=agent, phase_id=str(started.phase.pk))
    with pytest.raises(Conflict, match=r"phase 1 \('Phase 1'\) is already COMPLETED"):
        tracker.task_start(
            project=project, agent=agent, workflow_id=str(workflow.pk), name="t", goal="g", phase=1
        )
    with pytest.raises(Conflict, match="already COMPLETED"):
        tracker.phase_complete(project=project, agent=agent, phase_id=str(started.phase.pk))
    workflow.refresh_from_db()
    assert workflow.current_phase == 1


def test_file_changes_of_a_task_in_a_git_repository(project, agent, workflow, tmp_path):
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    git(root, "config", "user.email", "t@example.com")
    git(root, "config", "user.name", "t")
    (root / "src").mkdir()
    (root / "src" / "keep.py").write_text("keep\n")
    (root / "src" / "edit.py").write_text("edit\n")
    (root / "gone.txt").write_text("gone\n")
    (root / "dirty.txt").write_text("clean\n")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "start")
    (root / "dirty.txt").write_text("dirty before the task\n")  # not the task's doing

    started = tracker.task_start(
        project=project,
        agent=agent,
        workflow_id=str(workflow.pk),
        name="t",
        goal="g",
        areas=["src"],
        root=root,
    )
    assert started.task.snapshot["kind"] == "git"
    (root / "src" / "edit.py").write_text("edited\n")
    (root / "src" / "new.py").write_text("new\n")
    (root / "gone.txt").unlink()
    (root / "notes.md").write_text("outside the areas\n")

    done = tracker.task_complete(
        project=project,
        agent=agent,
        task_id=str(started.task.pk),
        status="success",
        summary="s",
        root=root,
    )
    assert done.files.as_dict() == {
        "added": ["notes.md", "src/new.py"],
        "modified": ["src/edit.py"],
        "deleted": ["gone.txt"],
    }
    assert done.verification.scope_match is False
    assert done.verification.unexpected_files == ["gone.txt", "notes.md"]
    task = Task.objects.get(pk=started.task.pk)
    assert task.files_changed == done.files.as_dict()
    assert task.unexpected_files == ["gone.txt", "notes.md"]
    assert any("outside the declared areas (src)" in w for w in task.warnings)
    event = Event.objects.get(kind="task:updated")
    assert event.payload["files_changed"] == done.files.as_dict()


def test_concurrent_tasks_in_one_checkout_are_warned(project, agent, workflow):
    root = Path(project.root_path)
    first = tracker.task_start(
        project=project, agent=agent, workflow_id=str(workflow.pk), name="a", goal="g", root=root
    ).task
    second = tracker.task_start(
        project=project, agent=agent, workflow_id=str(workflow.pk), name="b", goal="g", root=root
    ).task
    done = tracker.task_complete(
        project=project,
        agent=agent,
        task_id=str(first.pk),
        status="success",
        summary="s",
        root=root,
    )
    assert any(f"'b' ({second.pk})" in w and "may" in w for w in done.files.warnings)


def test_bad_input_changes_nothing(project, agent, workflow):
    task = tracker.task_start(
        project=project, agent=agent, workflow_id=str(workflow.pk), name="t", goal="g"
    ).task
    before = (Task.objects.count(), Event.objects.count())
    with pytest.raises(InvalidInput, match="status 'done' is not one of: success, partial_success"):
        tracker.task_complete(
            project=project, agent=agent, task_id=str(task.pk), status="done", summary="s"
        )
    with pytest.raises(InvalidInput, match="type 'bug' is not one of: documentation_gap"):
        tracker.issue_log(
            project=project,
            agent=agent,
            task_id=str(task.pk),
            type="bug",
            description="d",
            resolution="r",
        )
    with pytest.raises(InvalidInput, match="progress is nan"):
        tracker.milestone_log(
            project=project, agent=agent, task_id=str(task.pk), message="m", progress=float("nan")
        )
    assert (Task.objects.count(), Event.objects.count()) == before
    task.refresh_from_db()
    assert task.status == "IN_PROGRESS"


def test_phase_complete_on_a_closed_phase_leaves_the_task_running(project, agent, workflow):
    first = tracker.task_start(
        project=project, agent=agent, workflow_id=str(workflow.pk), name="a", goal="g", phase=1
    )
    second = tracker.task_start(
        project=project, agent=agent, workflow_id=str(workflow.pk), name="b", goal="g", phase=1
    )
    closed = tracker.task_complete(
        project=project,
        agent=agent,
        task_id=str(first.task.pk),
        status="success",
        summary="s",
        phase_complete=True,
    )
    assert closed.phase is not None
    assert f"'b' ({second.task.pk})" in closed.phase.warnings[0]
    events_before = Event.objects.count()
    with pytest.raises(
        Conflict, match=r"phase_complete: phase 1 \('Phase 1'\) is already COMPLETED"
    ):
        tracker.task_complete(
            project=project,
            agent=agent,
            task_id=str(second.task.pk),
            status="success",
            summary="s",
            phase_complete=True,
        )
    assert Task.objects.get(pk=second.task.pk).status == "IN_PROGRESS"
    assert Event.objects.count() == events_before


def test_a_person_resolves_a_blocker_once_and_the_agent_sees_who_and_when(project, agent, workflow):
    from tests.support.factories import make_user
    from tracker.selectors import context_get

    task = tracker.task_start(
        project=project, agent=agent, workflow_id=str(workflow.pk), name="t", goal="g"
    ).task
    blocker = tracker.issue_log(
        project=project,
        agent=agent,
        task_id=str(task.pk),
        type="unclear_requirement",
        description="which?",
        resolution="asked",
        requires_human_review=True,
    )
    plain = tracker.issue_log(
        project=project,
        agent=agent,
        task_id=str(task.pk),
        type="other",
        description="d",
        resolution="r",
    )
    ada = make_user(username="ada")
    tracker.blocker_resolve(issue_id=blocker.pk, by=ada, resolution="Use JSON.", via="dashboard")
    with pytest.raises(Conflict, match=f"issue {blocker.pk} was already resolved by ada at"):
        tracker.blocker_resolve(issue_id=blocker.pk, by=ada, resolution="again", via="dashboard")
    with pytest.raises(InvalidInput, match="does not require human review"):
        tracker.blocker_resolve(issue_id=plain.pk, by=ada, resolution="x", via="dashboard")

    context = context_get(project=project, workflow_id=str(workflow.pk), include=["blockers"])
    assert context["blockers"] == []
    assert context["has_blockers"] is False
    [resolved] = context["resolved_blockers"]
    assert resolved["human_resolution"] == "Use JSON."
    assert resolved["resolved_by"] == "ada"
    assert resolved["resolved_at"]
    event = Event.objects.get(kind="issue:updated")
    assert event.payload["by"] == "ada"
    assert event.payload["issue_id"] == str(blocker.pk)


def test_get_context_pages_open_and_resolved_blockers_apart(project, agent, workflow):
    """Both blocker lists come from one query; each keeps its own pages, count and cursor."""
    from tests.support.factories import make_user
    from tracker.selectors import context_get

    task = tracker.task_start(
        project=project, agent=agent, workflow_id=str(workflow.pk), name="t", goal="g"
    ).task
    issues = [
        tracker.issue_log(
            project=project,
            agent=agent,
            task_id=str(task.pk),
            type="other",
            description=f"d{n}",
            resolution="r",
            requires_human_review=n != 6,  # one plain issue, never listed
        )
        for n in range(7)
    ]
    ada = make_user(username="ada")
    resolved = [issues[n] for n in (0, 2, 3)]
    for issue in resolved:
        tracker.blocker_resolve(
            issue_id=issue.pk, by=ada, resolution=f"fix {issue.pk}", via="dashboard"
        )
    open_ = [issues[n] for n in (1, 4, 5)]

    def walk(name: str) -> list[int]:
        seen: list[int] = []
        cursor: dict[str, str] = {}
        while True:
            page = context_get(
                project=project,
                workflow_id=str(workflow.pk),
                include=["blockers"],
                limit=2,
                cursor=cursor,
            )
            assert page[f"{name}_count"] == 3
            assert len(page[name]) <= 2
            seen += [int(row["id"]) for row in page[name]]
            following = page[f"{name}_next_cursor"]
            if following is None:
                return seen
            cursor = {name: following}

    assert walk("blockers") == sorted((i.pk for i in open_), reverse=True)
    assert walk("resolved_blockers") == sorted((i.pk for i in resolved), reverse=True)
    first = context_get(
        project=project, workflow_id=str(workflow.pk), include=["blockers"], limit=2
    )
    assert first["has_blockers"] is True
    assert [b["description"] for b in first["blockers"]] == ["d5", "d4"]
    assert [r["human_resolution"] for r in first["resolved_blockers"]] == [
        f"fix {issues[3].pk}",
        f"fix {issues[2].pk}",
    ]
    assert {r["resolved_by"] for r in first["resolved_blockers"]} == {"ada"}


def test_get_context_costs_the_same_queries_for_few_and_many_rows(project, agent, workflow):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from tracker.selectors import INCLUDES, context_get

    def log_rows(count: int) -> None:
        task = tracker.task_start(
            project=project, agent=agent, workflow_id=str(workflow.pk), name="t", goal="g", phase=1
        ).task
        for n in range(count):
            tracker.decision_log(
                project=project,
                agent=agent,
                task_id=str(task.pk),
                category="other",
                question=f"q{n}",
                chosen="c",
                reasoning="r",
            )
            tracker.milestone_log(project=project, agent=agent, task_id=str(task.pk), message="m")
            tracker.issue_log(
                project=project,
                agent=agent,
                task_id=str(task.pk),
                type="other",
                description="d",
                resolution="r",
                requires_human_review=True,
            )

    def queries() -> int:
        with CaptureQueriesContext(connection) as captured:
            context_get(
                project=project, workflow_id=str(workflow.pk), include=list(INCLUDES), limit=10
            )
        return len(captured)

    log_rows(2)
    few = queries()
    log_rows(25)
    assert queries() == few


def test_tasks_completing_at_once_leave_true_workflow_totals(project, agent, workflow, monkeypatch):
    tasks = [
        tracker.task_start(
            project=project, agent=agent, workflow_id=str(workflow.pk), name=f"t{n}", goal="g"
        ).task
        for n in range(CONTENDERS)
    ]
    gated(monkeypatch, "_changes", CONTENDERS)

    @in_thread
    def complete(n: int) -> Any:
        return tracker.task_complete(
            project=project,
            agent=agent,
            task_id=str(tasks[n].pk),
            status="success",
            summary="s",
            tokens_input=n + 1,
            tokens_output=100,
            root=Path(project.root_path),
        )

    with ThreadPoolExecutor(CONTENDERS) as pool:
        results = list(pool.map(complete, range(CONTENDERS)))

    assert all(isinstance(r, tracker.TaskCompleted) for r in results), results
    workflow.refresh_from_db()
    assert workflow.total_tokens == sum(n + 1 + 100 for n in range(CONTENDERS))
    durations = Task.objects.filter(workflow=workflow).values_list("duration_ms", flat=True)
    assert workflow.total_duration_ms == sum(durations)


def test_the_current_phase_is_the_one_in_progress(project, agent, workflow):
    from tracker.selectors import context_get

    def current() -> int:
        answer = context_get(project=project, workflow_id=str(workflow.pk), include=["tasks"])
        return answer["current_phase"]

    assert current() == 0
    tracker.task_start(
        project=project, agent=agent, workflow_id=str(workflow.pk), name="t", goal="g", phase=1
    )
    assert current() == 1
    second = tracker.phase_start(
        project=project, agent=agent, workflow_id=str(workflow.pk), number=2
    )
    assert current() == 2
    tracker.phase_complete(project=project, agent=agent, phase_id=str(second.phase.pk))
    assert current() == 2


def test_completing_a_workflow_says_what_became_of_its_open_phases(project, agent, workflow):
    task = tracker.task_start(
        project=project, agent=agent, workflow_id=str(workflow.pk), name="t", goal="g", phase=1
    ).task
    tracker.task_complete(
        project=project, agent=agent, task_id=str(task.pk), status="success", summary="s"
    )
    done = tracker.tracked_workflow_complete(
        project=project, agent=agent, workflow_id=str(workflow.pk), status="completed", summary="s"
    )
    assert done.warnings == [
        "phase 1 ('Phase 1') was still in progress; completed with the workflow"
    ]
    assert Phase.objects.get(workflow=workflow, number=1).status == Phase.Status.COMPLETED

    other = tracker.tracked_workflow_start(project=project, agent=agent, name="o", objective="o")
    for number in (1, 2):
        tracker.phase_start(project=project, agent=agent, workflow_id=str(other.pk), number=number)
    partial = tracker.tracked_workflow_complete(
        project=project, agent=agent, workflow_id=str(other.pk), status="partial", summary="s"
    )
    assert partial.warnings == [
        "phases 1 ('Phase 1'), 2 ('Phase 2') were still in progress and left so; complete or "
        "fail each with complete_phase"
    ]
