"""Races between agents, with real threads on the real database (SQLite here, PostgreSQL in CI).

A quality-gate callback is the seam: every thread has read and validated the same state before
any of them tries to write, which is the interleaving that loses updates in DeepWork 0.9.1.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
from django.db import connections

from tests.support.driving import step_finish
from workflows.errors import Conflict, WorkflowError
from workflows.models import Event, StepRun, WorkflowSession
from workflows.services import sessions
from workflows.services.agents import ProcessHolder, agent_claim

pytestmark = pytest.mark.django_db(transaction=True)

CONTENDERS = 8


def in_thread(fn):
    """Run ``fn`` on a pool thread with its own connection, closed afterwards."""

    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        finally:
            connections.close_all()

    return wrapper


def start_demo(project, agent, catalog) -> str:
    return sessions.session_start(
        project=project,
        agent=agent,
        catalog=catalog.view(),
        job_name="demo",
        workflow_name="main",
        goal="race",
    ).begun.session.session_id


def finish_in_thread(project, agent, sid, gate):
    """A finished_step on ``sid`` from its own thread; returns the answer or the error."""

    @in_thread
    def run(*_):
        try:
            return step_finish(
                project=project,
                agent=agent,
                outputs={"notes.md": "notes.md"},
                session_id=sid,
                quality_gate=gate,
            )
        except WorkflowError as exc:
            return exc

    return run


def test_concurrent_finished_step_advances_exactly_once(project, agent, catalog):
    sid = start_demo(project, agent, catalog)
    everyone_has_read = threading.Barrier(CONTENDERS)

    def gate(_checkpoint):
        everyone_has_read.wait(timeout=30)
        return None

    contender = finish_in_thread(project, agent, sid, gate)

    with ThreadPoolExecutor(CONTENDERS) as pool:
        results = list(pool.map(contender, range(CONTENDERS)))

    winners = [r for r in results if not isinstance(r, Exception)]
    losers = [r for r in results if isinstance(r, Exception)]
    assert len(winners) == 1
    assert winners[0].begin_step.step_id == "part_a"
    assert len(losers) == CONTENDERS - 1
    for loser in losers:
        assert isinstance(loser, Conflict)
        assert str(loser) == (
            f"Session '{sid}' moved on while this call ran: its current step is now 'part_a'; "
            "nothing was changed"
        )
    session = WorkflowSession.objects.get(session_id=sid)
    assert session.revision == 1
    assert StepRun.objects.filter(session=session, step_id="gather").get().status == "completed"
    assert StepRun.objects.filter(session=session, step_id="part_a").count() == 1
    assert Event.objects.filter(session=session, kind=Event.Kind.STEP_FINISHED).count() == 1


def test_abort_racing_finished_step_leaves_one_consistent_outcome(project, agent, catalog):
    sid = start_demo(project, agent, catalog)
    finisher_has_read = threading.Event()
    abort_done = threading.Event()

    def gate(_checkpoint):
        finisher_has_read.set()
        abort_done.wait(timeout=30)
        return None

    finisher = finish_in_thread(project, agent, sid, gate)

    @in_thread
    def aborter():
        finisher_has_read.wait(timeout=30)
        try:
            return sessions.session_abort(
                project=project, agent=agent, explanation="stop", session_id=sid
            )
        finally:
            abort_done.set()

    with ThreadPoolExecutor(2) as pool:
        finished = pool.submit(finisher)
        aborted = pool.submit(aborter)
        finish_result, abort_result = finished.result(), aborted.result()

    assert abort_result.step_id == "gather"
    assert isinstance(finish_result, Conflict)
    assert "was aborted by another call" in str(finish_result)
    session = WorkflowSession.objects.get(session_id=sid)
    assert session.status == WorkflowSession.Status.ABORTED
    assert not StepRun.objects.filter(session=session, status=StepRun.Status.COMPLETED).exists()


def test_many_agents_each_run_their_own_workflow_without_losing_a_transition(project, catalog):
    agents = 16
    view = catalog.view()

    @in_thread
    def run(_):
        agent = agent_claim(project=project, holder=ProcessHolder.for_this_process())
        sessions.session_start(
            project=project,
            agent=agent,
            catalog=view,
            job_name="demo",
            workflow_name="main",
            goal="parallel",
        )
        for outputs in (
            {"notes.md": "notes.md"},
            {"a.md": "a.md", "b.md": "b.md"},
            {"summary.md": "summary.md"},
        ):
            last = step_finish(project=project, agent=agent, outputs=outputs)
        return last.status

    with ThreadPoolExecutor(8) as pool:
        statuses = list(pool.map(run, range(agents)))

    assert statuses == ["workflow_complete"] * agents
    assert WorkflowSession.objects.filter(status="completed", revision=3).count() == agents
    assert StepRun.objects.filter(status="completed").count() == agents * 4
