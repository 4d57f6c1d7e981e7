"""DAG workflows under real concurrency: many agents completing sibling steps at the same moment
(real threads, each with its own connection) on the real database. Meant for PostgreSQL
(DATABASE_URL), where row locks do the work; on SQLite, IMMEDIATE transactions serialise."""

from __future__ import annotations

import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import pytest
from django.db import connections

from dag import services as dag
from workflows.db import retrying_when_busy
from workflows.errors import Conflict
from workflows.models import Event, Project, StepRun, WorkflowSession

pytestmark = pytest.mark.django_db(transaction=True)

WIDTH = 12


def in_thread(fn):
    def wrapper(*args):
        try:
            return fn(*args)
        finally:
            connections.close_all()

    return wrapper


def fan(prefix: str, after: str) -> list[dict]:
    return [
        {
            "step_id": f"{prefix}{n:02}",
            "description": "x",
            "assigned_role": "swe",
            "depends_on": [after],
        }
        for n in range(WIDTH)
    ]


STEPS = [
    {"step_id": "root", "description": "x", "assigned_role": "swe"},
    *fan("s", "root"),
    {
        "step_id": "join",
        "description": "x",
        "assigned_role": "swe",
        "depends_on": [f"s{n:02}" for n in range(WIDTH)],
    },
    *fan("t", "join"),
    {
        "step_id": "final",
        "description": "x",
        "assigned_role": "swe",
        "depends_on": [f"t{n:02}" for n in range(WIDTH)],
    },
]


def held(wid: str) -> list[tuple[str, str]]:
    return list(
        StepRun.objects.filter(session__session_id=wid, status=StepRun.Status.ASSIGNED)
        .order_by("step_id")
        .values_list("step_id", "assigned_agent__agent_id")
    )


def race_completions(project: Project, wid: str, pairs: list[tuple[str, str]]) -> list:
    """Every pair completes its step at the same moment, while dispatchers sweep."""
    barrier = threading.Barrier(len(pairs) + 3, timeout=60)

    @in_thread
    def complete(pair):
        step_id, agent_id = pair
        barrier.wait()
        return retrying_when_busy(
            lambda: dag.dag_report_completion(
                project=project, workflow_id=wid, step_id=step_id, agent_id=agent_id, result=step_id
            )
        )()

    @in_thread
    def sweep(_):
        barrier.wait()
        return retrying_when_busy(lambda: dag.dag_dispatch(project=project))()

    with ThreadPoolExecutor(len(pairs) + 3) as pool:
        # Everything is submitted before any result is awaited: the barrier needs them all.
        reports = [pool.submit(complete, pair) for pair in pairs]
        sweeps = [pool.submit(sweep, n) for n in range(3)]
        for future in sweeps:
            future.result()
        return [future.result() for future in reports]


def test_siblings_completing_at_once_assign_each_successor_once_and_complete_once(tmp_path):
    project = Project.objects.create(root_path=str(tmp_path), name="race")
    for n in range(WIDTH):
        dag.dag_agent_register(project=project, agent_id=f"a{n:02}", roles=["swe"])
    wid = dag.dag_define(
        project=project, creator_id="boss", name="race", description="", steps=STEPS
    ).job.dir_name
    dag.dag_execute(project=project, workflow_id=wid, triggering_agent_id="boss")
    [(root, root_agent)] = held(wid)
    dag.dag_report_completion(project=project, workflow_id=wid, step_id=root, agent_id=root_agent)

    for successor in ("join", "final"):
        siblings = held(wid)
        assert len(siblings) == WIDTH
        # Least loaded first: every agent holds exactly one sibling.
        assert len({agent for _, agent in siblings}) == WIDTH
        reports = race_completions(project, wid, siblings)
        assert all(not report.already for report in reports)
        delegated = [d for report in reports for d in report.advance.delegated]
        # Exactly one of the racing completions saw the fan-in ready and handed it out.
        assert [d.step_id for d in delegated] == [successor]
        [(step_id, agent_id)] = held(wid)
        assert step_id == successor
        last = dag.dag_report_completion(
            project=project, workflow_id=wid, step_id=step_id, agent_id=agent_id
        )
        if successor == "join":
            assert len(last.advance.delegated) == WIDTH
        else:
            assert last.status == "completed"

    assignments = Counter(
        e.payload["step_id"] for e in Event.objects.filter(kind=Event.Kind.DAG_STEP_ASSIGNED)
    )
    assert set(assignments.values()) == {1}  # no step was ever handed out twice
    assert len(assignments) == len(STEPS)
    assert Event.objects.filter(kind=Event.Kind.DAG_STEP_COMPLETED).count() == len(STEPS)
    assert Event.objects.filter(kind=Event.Kind.SESSION_COMPLETED).count() == 1
    assert WorkflowSession.objects.get(session_id=wid).status == "completed"


def test_two_executes_at_once_start_one_execution(tmp_path):
    project = Project.objects.create(root_path=str(tmp_path), name="race")
    wid = dag.dag_define(
        project=project, creator_id="boss", name="race", description="", steps=STEPS[:1]
    ).job.dir_name
    barrier = threading.Barrier(4, timeout=60)

    @in_thread
    def execute(_):
        barrier.wait()
        try:
            retrying_when_busy(
                lambda: dag.dag_execute(
                    project=project, workflow_id=wid, triggering_agent_id="boss"
                )
            )()
        except Conflict as exc:
            return exc.message
        return "started"

    with ThreadPoolExecutor(4) as pool:
        outcomes = sorted(pool.map(execute, range(4)))
    assert outcomes[-1] == "started"
    assert (
        outcomes[:-1]
        == [
            f"Workflow '{wid}' is already running; a workflow runs once (define it again to run it "
            "again)"
        ]
        * 3
    )
    assert WorkflowSession.objects.filter(session_id=wid).count() == 1
    assert StepRun.objects.count() == 1
