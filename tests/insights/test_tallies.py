"""The insight tallies: kept by the services as a rebuild from the rows would count them,
read back over ranges made of whole months and edge days, and percentiles from their
histograms within 1% of the exact ones. On SQLite and PostgreSQL alike."""

from __future__ import annotations

import datetime as dt
import io
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
from django.core.management import CommandError, call_command
from django.db import connections
from django.db.models import Sum

from dag import services as dag
from insights import histograms, selectors
from insights.models import AgentTally, SessionTally, StepTimeTally
from insights.tallies import insight_tallies_rebuild, insight_tallies_summed
from tests.insights.conftest import D3, in_range
from tests.insights.test_dag import PLAN
from tests.support.demo14 import write_demo14
from tests.support.driving import step_finish
from workflows import events
from workflows.generations import Conversation
from workflows.models import Event, Project, WorkflowSession
from workflows.services import sessions

pytestmark = pytest.mark.django_db


def snapshot() -> dict[str, list[tuple]]:
    return insight_tallies_summed()


def start(project, agent, catalog, workflow="main") -> str:
    return sessions.session_start(
        project=project,
        agent=agent,
        catalog=catalog.view(),
        job_name="demo",
        workflow_name=workflow,
        goal="tallies",
    ).begun.session.session_id


def test_the_services_keep_the_tallies_as_a_rebuild_counts_them(project, agent, catalog):
    # A session completed; one sent back to gather and finished again, then aborted; a quick
    # one completed; and a failed review round.
    first = start(project, agent, catalog)
    step_finish(project=project, agent=agent, outputs={"notes.md": "notes.md"}, session_id=first)
    step_finish(
        project=project,
        agent=agent,
        outputs={"a.md": "a.md", "b.md": "b.md"},
        session_id=first,
    )
    step_finish(project=project, agent=agent, outputs={"summary.md": "summary.md"})
    second = start(project, agent, catalog)
    step_finish(project=project, agent=agent, outputs={"notes.md": "notes.md"}, session_id=second)
    sessions.session_go_to_step(project=project, agent=agent, step_id="gather", session_id=second)
    step_finish(project=project, agent=agent, outputs={"notes.md": "notes.md"}, session_id=second)
    sessions.session_abort(project=project, agent=agent, explanation="enough", session_id=second)
    start(project, agent, catalog, workflow="quick")
    step_finish(project=project, agent=agent, outputs={"notes.md": "notes.md"})
    events.event_record(
        kind=Event.Kind.REVIEW_FAILED,
        project=project,
        session=WorkflowSession.objects.get(session_id=first),
        agent=agent,
        payload={
            "step_ids": ["gather"],
            "attempt": 1,
            "reviews": 1,
            "failed": 1,
            "override_reason": None,
        },
    )

    kept = snapshot()
    insight_tallies_rebuild()
    assert snapshot() == kept

    # And what they hold: three sessions, one completed (main), one aborted, one (quick)
    # completed; seven steps finished, one failed round, one abort; gather's time counted
    # four times (the run sent back too), for the day and for the month.
    assert [row[-3:] for row in kept["sessions"]] == [(2, 1, 1), (1, 1, 0)]
    # The agent's figures per workflow: main (six steps, the failed round, the abort), quick.
    for period in ("day", "month"):
        agents = [(row[-4], *row[-3:]) for row in kept["agents"] if row[0] == period]
        assert agents == [("main", 6, 1, 1), ("quick", 1, 0, 0)]
    gather_days = [row for row in kept["steps"] if row[0] == "day" and row[7] == "gather"]
    assert sum(row[-1] for row in gather_days) == 4
    months = [row for row in kept["steps"] if row[0] == "month"]
    assert sum(row[-1] for row in months) == 7


def test_step_times_from_the_histograms_are_within_one_percent(history, monkeypatch):
    exact = {t.step_id: t for t in selectors.step_times(filters=in_range(), choice=choice())}
    assert not any(t.approximate for t in exact.values())
    monkeypatch.setattr(selectors, "EXACT_STEP_TIMES_LIMIT", 0)
    estimated = selectors.step_times(filters=in_range(), choice=choice())
    assert [t.step_id for t in estimated] == list(exact)
    for t in estimated:
        assert t.approximate
        assert t.runs == exact[t.step_id].runs
        assert t.median_seconds == pytest.approx(exact[t.step_id].median_seconds, rel=0.01)
        assert t.p90_seconds == pytest.approx(exact[t.step_id].p90_seconds, rel=0.01)
    # gather: 10, 20, 30, 40 and 500 s: the 3rd and the 5th, each within 1%.
    assert estimated[0].median_seconds != 30.0
    assert estimated[0].median_seconds == pytest.approx(30.0, rel=histograms.MAX_RELATIVE_ERROR)


def choice() -> selectors.WorkflowChoice:
    return selectors.WorkflowChoice("demo", "main")


@pytest.mark.parametrize(
    ("since", "until"),
    [
        (dt.date(2025, 12, 1), dt.date(2026, 4, 30)),  # whole months only
        (dt.date(2025, 12, 17), dt.date(2026, 3, 2)),  # edges on both sides
        (dt.date(2026, 1, 5), dt.date(2026, 1, 25)),  # inside one month
        (dt.date(2026, 1, 31), dt.date(2026, 3, 1)),  # a whole February between edges
        (dt.date(2026, 2, 1), dt.date(2026, 2, 28)),  # exactly one month
        (dt.date(2026, 3, 3), dt.date(2026, 3, 3)),  # one day
    ],
)
def test_a_range_reads_each_of_its_days_once(history, since, until):
    # A day row of 1 run for every day from December to April, and a month row holding the
    # runs of its days: a range reads its days' runs exactly once, whatever its edges.
    job = WorkflowSession.objects.get(session_id="s1").job
    key = {
        "project": history.p1,
        "generation": "0.9",
        "job": job,
        "job_name": "probe",
        "workflow_name": "probe",
        "step_id": "probe",
        "entry_index": 0,
        "bucket": 1,
    }
    day = dt.date(2025, 12, 1)
    rows = []
    while day <= dt.date(2026, 4, 30):
        rows.append(StepTimeTally(period="day", period_start=day, runs=1, **key))
        day += dt.timedelta(days=1)
    for month in (dt.date(2025, 12, 1), *(dt.date(2026, m, 1) for m in range(1, 5))):
        days = sum(1 for r in rows if r.period_start.replace(day=1) == month)
        rows.append(StepTimeTally(period="month", period_start=month, runs=days, **key))
    StepTimeTally.objects.bulk_create(rows)
    read = StepTimeTally.objects.filter(selectors._periods_q(since, until), job_name="probe")
    assert read.aggregate(n=Sum("runs"))["n"] == (until - since).days + 1
    whole_months = read.filter(period="month").count()
    assert read.count() == whole_months + ((until - since).days + 1) - sum(
        r.runs for r in read.filter(period="month")
    )


def test_dag_executions_are_not_deepwork_sessions(history, tmp_path):
    before = [(d.day, d.started) for d in selectors.sessions_per_day(filters=in_range())]
    project = Project.objects.create(root_path=str(tmp_path / "dag"), name="dag")
    wid = dag.dag_define(
        project=project, creator_id="c", name="Ship", description="", steps=PLAN
    ).job.dir_name
    dag.dag_execute(project=project, workflow_id=wid, triggering_agent_id="c")
    started = WorkflowSession.objects.get(job__dir_name=wid)
    WorkflowSession.objects.filter(pk=started.pk).update(
        started_at=dt.datetime.combine(D3, dt.time(8), tzinfo=dt.UTC)
    )
    insight_tallies_rebuild()
    assert SessionTally.objects.filter(job_id=started.job_id).exists()
    # Neither the tallies nor the rows (an agent's view reads the rows) count it.
    assert [(d.day, d.started) for d in selectors.sessions_per_day(filters=in_range())] == before
    assert selectors.busiest_workflow(filters=in_range()) != selectors.WorkflowChoice(
        started.job_name, started.workflow_name
    )
    agent_view = selectors.sessions_per_day(filters=in_range(agent_id=started.agent.agent_id))
    assert sum(d.started for d in agent_view) == 0


def test_the_rebuild_command_recounts_one_project_or_all(history):
    kept = snapshot()
    SessionTally.objects.filter(project=history.p2).update(started=99)
    AgentTally.objects.all().delete()
    out = io.StringIO()
    call_command("insights_rebuild", "--project", str(history.p2.pk), stdout=out)
    assert "tally rows" in out.getvalue()
    # p2 is whole again; p1's agent rows are still gone.
    assert snapshot()["sessions"] == kept["sessions"]
    assert len(snapshot()["agents"]) < len(kept["agents"])
    call_command("insights_rebuild", stdout=out)
    assert snapshot() == kept
    with pytest.raises(CommandError, match="No project with id 999999"):
        call_command("insights_rebuild", "--project", "999999")


def test_the_step_times_table_says_when_its_figures_are_from_buckets(history, monkeypatch):
    from insights.tables import insight_table

    exact = insight_table(name="step-times", filters=in_range())
    assert not any("buckets" in note for note in exact.notes)
    monkeypatch.setattr(selectors, "EXACT_STEP_TIMES_LIMIT", 0)
    estimated = insight_table(name="step-times", filters=in_range())
    assert any("within 1% of the exact figure" in note for note in estimated.notes)
    assert [row[:3] for row in estimated.rows] == [row[:3] for row in exact.rows]


@pytest.mark.parametrize("top", [1, 2, 8])
def test_agent_activity_filtered_by_a_job_that_holds_everything_is_the_same(
    history, monkeypatch, top
):
    # Every session of the history is job "demo": naming it filters the tallies' rows by job
    # and must find the same figures as reading them all.
    monkeypatch.setattr(selectors, "TOP_AGENTS", top)

    def shown(filters):
        return [
            (a.agent_id, a.steps_per_day, a.steps, a.failed_reviews, a.aborts, a.others)
            for a in selectors.agent_activity(filters=filters)
        ]

    assert shown(in_range()) == shown(in_range(job="demo"))
    assert shown(in_range(agent_id="a2")) == shown(in_range(agent_id="a2", job="demo"))
    # Three agents: all drawn, or the top ones and "other agents".
    assert [a[0] for a in shown(in_range())][: min(top, 3)] == ["a1", "a2", "b1"][: min(top, 3)]


@pytest.mark.django_db(transaction=True)
def test_the_014_services_keep_the_tallies_as_a_rebuild_counts_them(project, demo_project, catalog):
    write_demo14(demo_project)

    def start(conversation):
        sessions.session_start(
            project=project,
            catalog=catalog.view(),
            conversation=Conversation(conversation, None),
            job_name="demo14",
            workflow_name="plain",
            goal="tallies",
        )

    def finish(conversation):
        checkpoint = sessions.step_checkpoint(
            project=project, conversation=Conversation(conversation, None), outputs={}
        )
        sessions.step_advance(checkpoint=checkpoint)

    start("A")
    finish("A")
    finish("A")
    start("B")
    finish("B")
    sessions.session_abort(
        project=project, conversation=Conversation("B", None), explanation="enough"
    )
    kept = snapshot()
    insight_tallies_rebuild()
    assert snapshot() == kept
    # Two 0.14 sessions: one completed, one aborted; three steps finished.
    assert [(row[2], *row[-3:]) for row in kept["sessions"]] == [("0.14", 2, 1, 1)]
    assert sum(row[-3] for row in kept["agents"] if row[0] == "day") == 3
    assert sum(row[-1] for row in kept["steps"] if row[0] == "day") == 3


@pytest.mark.django_db(transaction=True)
def test_agents_finishing_and_aborting_at_once_add_up(project, demo_project, catalog):
    # Eight conversations on one 0.14 workflow, all on the same tally rows (same day, job,
    # workflow, step and, for equal durations, bucket), each finishing its first step, half of
    # them then aborting, all released together: every count lands, none is lost or doubled.
    write_demo14(demo_project)
    contenders = 8
    for n in range(contenders):
        sessions.session_start(
            project=project,
            catalog=catalog.view(),
            conversation=Conversation(f"C{n}", None),
            job_name="demo14",
            workflow_name="plain",
            goal="race",
        )
    ready = threading.Barrier(contenders)

    def contender(n: int) -> None:
        try:
            conversation = f"C{n}"
            checkpoint = sessions.step_checkpoint(
                project=project, conversation=Conversation(conversation, None), outputs={}
            )
            ready.wait(timeout=30)
            sessions.step_advance(checkpoint=checkpoint)
            if n % 2:
                sessions.session_abort(
                    project=project, conversation=Conversation(conversation, None), explanation="x"
                )
        finally:
            connections.close_all()

    with ThreadPoolExecutor(contenders) as pool:
        list(pool.map(contender, range(contenders)))

    kept = snapshot()
    assert sum(row[-3] for row in kept["sessions"]) == contenders
    assert sum(row[-1] for row in kept["sessions"]) == contenders // 2
    assert sum(row[-3] for row in kept["agents"] if row[0] == "day") == contenders
    assert sum(row[-1] for row in kept["agents"] if row[0] == "day") == contenders // 2
    assert sum(row[-1] for row in kept["steps"] if row[0] == "month") == contenders
    insight_tallies_rebuild()
    assert snapshot() == kept
