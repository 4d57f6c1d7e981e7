"""A small history with hand-chosen timestamps, for checking every insight against figures
worked out by hand (see each test).

The rows are written directly: the services stamp "now", and an insight reads history, so the
times must be set exactly. The catalog (jobs, workflows, steps) comes from the real sync.

Days: D0 = 2026-02-28 (outside the range), D1..D3 = 2026-03-01..03 (the range).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from pathlib import Path

import pytest

from insights.filters import InsightFilter
from insights.tallies import insight_tallies_rebuild
from reviews.models import HumanDecision, ReviewResult, copied_from
from tests.conftest import DEMO_JOB
from tests.support.factories import make_user, write_job
from tracker.models import Decision, Issue, Task, TrackedWorkflow
from workflows.models import Agent, Event, Job, Project, StepRun, WorkflowSession
from workflows.services.catalog import Catalog
from workflows.services.projects import project_ensure

UTC = dt.UTC
D0, D1, D2, D3 = (dt.date(2026, 2, 28) + dt.timedelta(days=n) for n in range(4))
NOW = dt.datetime(2026, 3, 3, 12, 0, tzinfo=UTC)


def at(day: dt.date, hour: int, minute: int = 0, second: int = 0) -> dt.datetime:
    return dt.datetime(day.year, day.month, day.day, hour, minute, second, tzinfo=UTC)


def in_range(**kwargs) -> InsightFilter:
    return InsightFilter(since=D1, until=D3, **kwargs)


@dataclass
class History:
    p1: Project
    p2: Project
    sessions: dict[str, WorkflowSession]
    runs: dict[str, StepRun]
    tracked: TrackedWorkflow


def _catalog(root: Path) -> tuple[Project, Job]:
    root.mkdir(parents=True, exist_ok=True)
    write_job(root, "demo", DEMO_JOB, ["gather", "part_a", "part_b", "wrap_up"])
    project = project_ensure(root_path=root.resolve())
    Catalog(project).view()
    return project, Job.objects.get(project=project, name="demo", is_current=True)


@pytest.fixture
def history(db, tmp_path) -> History:
    return build_history(tmp_path)


def build_history(tmp_path: Path) -> History:
    p1, job1 = _catalog(tmp_path / "one")
    p2, job2 = _catalog(tmp_path / "two")
    a1 = Agent.objects.create(project=p1, agent_id="a1", explicit=True)
    a2 = Agent.objects.create(project=p1, agent_id="a2", explicit=True)
    b1 = Agent.objects.create(project=p2, agent_id="b1", explicit=True)
    sessions: dict[str, WorkflowSession] = {}
    runs: dict[str, StepRun] = {}

    def session(name, agent, job, workflow, started, status, ended=None):
        sessions[name] = WorkflowSession.objects.create(
            session_id=name,
            project=agent.project,
            agent=agent,
            job=job,
            workflow=job.workflows.get(name=workflow),
            job_name="demo",
            workflow_name=workflow,
            goal=f"goal of {name}",
            status=status,
            current_step_id="gather",
            started_at=started,
            updated_at=ended or started,
            completed_at=ended,
            abort_reason="stopped" if status == "aborted" else None,
        )
        return sessions[name]

    def run(key, name, step_id, entry, started, seconds, status="completed"):
        s = sessions[name]
        runs[key] = StepRun.objects.create(
            session=s,
            step_def=s.job.steps.get(step_id=step_id),
            step_id=step_id,
            entry_index=entry,
            status=status,
            outputs={},
            started_at=started,
            completed_at=None if seconds is None else started + dt.timedelta(seconds=seconds),
        )
        if status == "completed":
            Event.objects.create(
                project=s.project,
                session=s,
                agent=s.agent,
                kind=Event.Kind.STEP_FINISHED,
                created_at=runs[key].completed_at,
                payload={"step_id": step_id, "outputs": {}, "notes": None},
            )
        return runs[key]

    done, aborted, active = "completed", "aborted", "active"
    session("s1", a1, job1, "main", at(D1, 10), done, at(D1, 11))
    session("s2", a1, job1, "main", at(D1, 11), aborted, at(D1, 12))
    session("s3", a2, job1, "main", at(D2, 9), done, at(D2, 11))
    session("s4", a2, job1, "main", at(D3, 9), active)
    session("s5", a1, job1, "quick", at(D3, 10), done, at(D3, 10, 5))
    session("s6", a1, job1, "main", at(D0, 10), done, at(D0, 12))
    session("s7", b1, job2, "main", at(D2, 8), done, at(D2, 9))

    run("s1.gather", "s1", "gather", 0, at(D1, 10), 10)
    run("s1.part_a", "s1", "part_a", 1, at(D1, 10, 1), 5)
    run("s1.part_b", "s1", "part_b", 1, at(D1, 10, 1), 7)
    run("s1.wrap_up", "s1", "wrap_up", 2, at(D1, 10, 2), 60)
    run("s2.gather", "s2", "gather", 0, at(D1, 11), 20)
    run("s3.gather.old", "s3", "gather", 0, at(D2, 9), 500, status="invalidated")
    run("s3.gather", "s3", "gather", 0, at(D2, 9, 10), 30)
    run("s3.wrap_up", "s3", "wrap_up", 2, at(D2, 9, 5), 120)
    run("s4.gather", "s4", "gather", 0, at(D3, 9), None, status="active")
    run("s5.gather", "s5", "gather", 0, at(D3, 10), 3)
    run("s6.gather", "s6", "gather", 0, at(D0, 10), 1000)
    run("s7.gather", "s7", "gather", 0, at(D2, 8), 40)

    def review(key, attempt, passed, when, criteria, feedback, millis):
        r = runs[key]
        ReviewResult.objects.create(
            step_run=r,
            session=r.session,
            **copied_from(r.session),
            step_id=r.step_id,
            attempt=attempt,
            run_each="summary.md",
            target_file="summary.md",
            passed=passed,
            feedback=feedback,
            criteria_results=[
                {"criterion": c, "passed": ok, "feedback": fb} for c, ok, fb in criteria
            ],
            reviewer_kind=ReviewResult.Reviewer.EXTERNAL,
            reviewer="claude",
            duration_ms=millis,
            created_at=when,
        )

    review(
        "s1.wrap_up",
        1,
        False,
        at(D1, 10, 3),
        [("Complete", False, "Misses note 3"), ("Clear", True, None)],
        "Not yet",
        4000,
    )
    review(
        "s1.wrap_up",
        2,
        True,
        at(D1, 10, 4),
        [("Complete", True, None), ("Clear", True, None)],
        "Good",
        6000,
    )
    review(
        "s3.wrap_up",
        1,
        False,
        at(D2, 9, 10),
        [("Complete", False, "Too short"), ("Clear", True, None)],
        "Short",
        2000,
    )
    # Outside the range: never counted.
    review("s6.gather", 1, False, at(D0, 11), [("Complete", False, "old")], "old", 99000)

    dana = make_user(username="dana")
    eve = make_user(username="eve")
    HumanDecision.objects.create(
        step_run=runs["s3.wrap_up"],
        kind="override",
        decided_by=dana,
        decided_by_name="dana",
        reason="fine as is",
        created_at=at(D2, 9, 30),
        consumed_at=at(D2, 9, 31),
    )
    HumanDecision.objects.create(
        step_run=runs["s4.gather"],
        kind="request_changes",
        decided_by=eve,
        decided_by_name="eve",
        reason="more notes",
        created_at=at(D3, 9, 5),
    )

    def event(name, kind, when):
        s = sessions[name]
        Event.objects.create(
            project=s.project,
            session=s,
            agent=s.agent,
            kind=kind,
            created_at=when,
            payload={
                "step_ids": ["wrap_up"],
                "attempt": 1,
                "reviews": 1,
                "failed": 1,
                "override_reason": None,
            },
        )

    event("s1", Event.Kind.REVIEW_FAILED, at(D1, 10, 3))
    event("s3", Event.Kind.REVIEW_FAILED, at(D2, 9, 10))
    event("s6", Event.Kind.REVIEW_FAILED, at(D0, 11))
    event("s1", Event.Kind.REVIEW_PASSED, at(D1, 10, 4))

    tracked = TrackedWorkflow.objects.create(project=p1, agent=a1, name="Port the parser")

    def task(name, started, ended, changed):
        return Task.objects.create(
            project=p1,
            agent=a1,
            workflow=tracked,
            name=name,
            goal=name,
            status="SUCCESS" if ended else "IN_PROGRESS",
            started_at=started,
            completed_at=ended,
            files_changed=changed,
        )

    t1 = task("t1", at(D1, 8), at(D1, 9), {"added": ["a", "b"], "modified": ["c"], "deleted": []})
    task("t2", at(D2, 8), at(D2, 9), {"added": [], "modified": ["d"], "deleted": ["e"]})
    task("t3", at(D3, 8), None, {})
    task("t0", at(D0, 8), at(D0, 9), {"added": ["old"], "modified": [], "deleted": []})
    for category, when in (
        ("ARCHITECTURE", at(D1, 9)),
        ("ARCHITECTURE", at(D2, 9)),
        ("TRADE_OFF", at(D3, 9)),
        ("OTHER", at(D0, 9)),
    ):
        Decision.objects.create(
            project=p1,
            agent=a1,
            workflow=tracked,
            task=t1,
            category=category,
            question="q",
            chosen="c",
            reasoning="r",
            created_at=when,
        )

    def issue(description, blocker, created, resolved=None):
        Issue.objects.create(
            project=p1,
            agent=a1,
            workflow=tracked,
            task=t1,
            type="UNCLEAR_REQUIREMENT",
            description=description,
            resolution="asked",
            requires_human_review=blocker,
            created_at=created,
            resolved_at=resolved,
            human_resolution="answer" if resolved else "",
        )

    issue("Which API?", True, at(D2, 12))
    issue("Which format?", True, at(D1, 8), at(D1, 10))
    issue("Flaky test", False, at(D1, 8))
    # The rows were written directly, past the event writer that keeps the tallies.
    insight_tallies_rebuild()
    return History(p1, p2, sessions, runs, tracked)
