"""Defined multi-agent DAG workflows as a workflow source: what
is published, executing with the calling agent as the triggering agent, status with progress
and results, and cancel as failing the run; on the real database (SQLite, and PostgreSQL with
DATABASE_URL)."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from dag import services as dag
from workflow_tools.dag_source import DagSource
from workflows.errors import Conflict, Forbidden, InvalidInput, NotFound
from workflows.models import Agent, Event, Job, Project, StepRun, WorkflowSession
from workflows.services.agents import agent_ensure

pytestmark = pytest.mark.django_db

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
def proj(tmp_path) -> Project:
    return Project.objects.create(root_path=str(tmp_path), name="p")


@pytest.fixture
def lead(proj) -> Agent:
    return agent_ensure(project=proj, agent_id="lead")


@pytest.fixture
def source(proj, lead) -> DagSource:
    return DagSource(project=lambda: proj, agent=lambda: lead)


def define(proj, name="Ship", steps=TWO, creator="lead", **extra) -> str:
    defined = dag.dag_define(
        project=proj, creator_id=creator, name=name, description="ship it", steps=steps, **extra
    )
    return defined.job.dir_name


def finish(proj, workflow_id: str, agent_id: str, step_id: str, result) -> None:
    dag.dag_report_completion(
        project=proj, workflow_id=workflow_id, step_id=step_id, agent_id=agent_id, result=result
    )


def snapshot(proj) -> tuple:
    return (
        list(WorkflowSession.objects.values_list("session_id", "status", "abort_reason")),
        list(StepRun.objects.order_by("id").values_list("step_id", "status")),
        Event.objects.count(),
    )


def test_defined_workflows_are_published_until_they_run(proj, source):
    assert source.workflows() == ()
    wid = define(proj)
    fast = define(proj, name="Quick", execution_type="sync")
    ship, quick = source.workflows()  # oldest first
    assert (ship.id, ship.name, ship.category, ship.version) == (wid, "Ship", "dag", "1")
    assert ship.description == "ship it (a multi-agent workflow of 2 steps defined by lead)"
    assert ship.execution_type == "async"
    assert (quick.id, quick.execution_type) == (fast, "sync")
    assert ship.metadata == {"kind": "dag", "creator_id": "lead", "step_count": 2}
    assert ship.input_schema["additionalProperties"] is False
    assert set(ship.input_schema["properties"]) == {"triggering_agent_id"}
    # Nothing changed: the same object, which tells the provider to rebuild nothing.
    assert source.workflows() is source.workflows()

    source.start(workflow=ship, arguments={}, agent_id="lead")
    assert [w.id for w in source.workflows()] == [fast]  # a workflow runs once
    dag.dag_delete(project=proj, workflow_id=fast, requesting_agent_id="lead")
    assert source.workflows() == ()


def test_other_projects_workflows_are_not_published(proj, source, tmp_path):
    other = Project.objects.create(root_path=str(tmp_path / "other"), name="other")
    define(other)
    assert source.workflows() == ()


def test_details_tell_the_execution_type(proj):
    from dag.selectors import dag_details

    define(proj, name="Later")
    define(proj, name="Now", execution_type="sync")
    later, now = Job.objects.order_by("id")
    assert dag_details(job=later)["execution_type"] == "async"
    assert dag_details(job=now)["execution_type"] == "sync"


def test_a_bad_execution_type_is_refused_and_stores_nothing(proj):
    with pytest.raises(InvalidInput, match="execution_type must be 'sync' or 'async', not 'now'"):
        define(proj, execution_type="now")
    assert not Job.objects.exists()


def test_start_executes_with_the_calling_agent_as_trigger(proj, source):
    dag.dag_agent_register(project=proj, agent_id="w", roles=["swe"])
    wid = define(proj)
    [workflow] = source.workflows()
    started = source.start(workflow=workflow, arguments={}, agent_id="lead")
    assert (started.run_id, started.workflow_id, started.status) == (wid, wid, "RUNNING")
    assert started.result == {"delegated": [{"step_id": "draft", "agent_id": "w"}], "issues": []}
    session = WorkflowSession.objects.get(session_id=wid)
    assert (session.agent.agent_id, session.status) == ("lead", "running")
    before = snapshot(proj)
    with pytest.raises(Conflict, match="is already running; a workflow runs once"):
        source.start(workflow=workflow, arguments={}, agent_id="lead")
    assert snapshot(proj) == before


def test_a_named_triggering_agent_is_used(proj, source):
    define(proj)
    [workflow] = source.workflows()
    # The creator's sub-agent: the creator's family may execute what it defined.
    started = source.start(
        workflow=workflow, arguments={"triggering_agent_id": "lead/boss"}, agent_id="lead"
    )
    assert started.result["issues"] == [
        {"step_id": "draft", "reason": "no responsive agent has the role 'swe'"}
    ]
    assert WorkflowSession.objects.get(session_id=started.run_id).agent.agent_id == "lead/boss"


def test_status_follows_the_run_to_its_results(proj, source):
    dag.dag_agent_register(project=proj, agent_id="w", roles=["swe"])
    wid = define(proj)
    [workflow] = source.workflows()
    source.start(workflow=workflow, arguments={}, agent_id="lead")
    running = source.status(run_id=wid)
    assert (running.status, running.workflow_id, running.result, running.error) == (
        "RUNNING",
        wid,
        None,
        None,
    )
    assert running.progress == {
        "completed_steps": 0,
        "total_steps": 2,
        "current_step": "draft",
        "in_progress": ["draft"],
    }
    finish(proj, wid, "w", "draft", {"text": "v1"})
    assert source.status(run_id=wid).progress["completed_steps"] == 1
    finish(proj, wid, "w", "check", "fine")
    done = source.status(run_id=wid)
    assert done.status == "COMPLETED"
    assert done.result == {"draft": {"text": "v1"}, "check": "fine"}
    assert done.progress == {
        "completed_steps": 2,
        "total_steps": 2,
        "current_step": None,
        "in_progress": [],
    }
    assert done.started_at is not None
    assert done.ended_at is not None


def test_a_failed_step_is_a_failed_run_with_its_details(proj, source):
    dag.dag_agent_register(project=proj, agent_id="w", roles=["swe"])
    wid = define(proj)
    [workflow] = source.workflows()
    source.start(workflow=workflow, arguments={}, agent_id="lead")
    dag.dag_report_failure(
        project=proj, workflow_id=wid, step_id="draft", agent_id="w", error_message="disk full"
    )
    failed = source.status(run_id=wid)
    assert (failed.status, failed.error, failed.result) == (
        "FAILED",
        "Step 'draft' failed: disk full",
        None,
    )


def test_unknown_and_unexecuted_runs_are_told_apart(proj, source):
    wid = define(proj)
    with pytest.raises(NotFound, match=f"Workflow '{wid}' has not been executed yet"):
        source.status(run_id=wid)
    with pytest.raises(NotFound, match="Unknown run id 'dag:dag-nope': no DAG workflow"):
        source.status(run_id="dag-nope")


def test_cancel_fails_the_run_for_good(proj, source):
    dag.dag_agent_register(project=proj, agent_id="w", roles=["swe"])
    wid = define(proj)
    [workflow] = source.workflows()
    source.start(workflow=workflow, arguments={}, agent_id="lead")
    cancelled = source.cancel(run_id=wid, reason="  wrong plan ")
    assert (cancelled.status, cancelled.error) == ("CANCELLED", "Cancelled by lead: wrong plan")
    assert WorkflowSession.objects.get(session_id=wid).status == "failed"
    event = Event.objects.filter(kind=Event.Kind.SESSION_FAILED).get()
    assert event.payload["error_message"] == "Cancelled by lead: wrong plan"
    assert event.agent.agent_id == "lead"
    # The agent holding a step learns its report no longer counts.
    late = dag.dag_report_completion(
        project=proj, workflow_id=wid, step_id="draft", agent_id="w", result=1
    )
    assert late.already
    assert "changed nothing" in late.note
    before = snapshot(proj)
    with pytest.raises(Conflict, match=f"Workflow '{wid}' is already failed; nothing to cancel"):
        source.cancel(run_id=wid, reason="again")
    assert snapshot(proj) == before


def test_only_the_creator_or_the_trigger_cancels_and_a_reason_is_needed(proj, lead, source):
    wid = define(proj, creator="boss")
    [workflow] = source.workflows()
    source.start(workflow=workflow, arguments={"triggering_agent_id": "boss"}, agent_id="lead")
    before = snapshot(proj)
    with pytest.raises(
        Forbidden,
        match=r"Only the workflow's creator \('boss'\), its sub-agents \(boss/<name>\), the "
        r"agent that executed it \('boss'\) or a person with the permission may cancel its "
        r"run; 'lead' may not",
    ):
        source.cancel(run_id=wid, reason="mine now")
    with pytest.raises(InvalidInput, match="A reason is required to cancel a run"):
        DagSource(project=lambda: proj, agent=lambda: Agent.objects.get(agent_id="boss")).cancel(
            run_id=wid, reason="   "
        )
    assert snapshot(proj) == before
    boss = DagSource(project=lambda: proj, agent=lambda: Agent.objects.get(agent_id="boss"))
    assert boss.cancel(run_id=wid, reason="done with it").status == "CANCELLED"


def test_a_person_may_cancel(proj, source, django_user_model):
    wid = define(proj)
    [workflow] = source.workflows()
    source.start(workflow=workflow, arguments={}, agent_id="lead")
    ana = django_user_model.objects.create_user("ana")
    status = DagSource(project=lambda: proj).cancel(run_id=wid, reason="budget", by=ana)
    assert status.error == "Cancelled by user:ana: budget"


def test_listing_and_status_cost_the_same_queries_for_few_or_many(proj, source):
    def listing_queries() -> int:
        with CaptureQueriesContext(connection) as captured:
            source.workflows()
        return len(captured)

    for _ in range(2):
        define(proj)
    few = listing_queries()
    for _ in range(18):
        define(proj)
    assert listing_queries() == few == 1

    def status_queries(steps: int) -> int:
        wid = define(proj, steps=[{"step_id": f"s{n}", "description": "d"} for n in range(steps)])
        dag.dag_execute(project=proj, workflow_id=wid, triggering_agent_id="lead")
        with CaptureQueriesContext(connection) as captured:
            assert source.status(run_id=wid).progress["total_steps"] == steps
        return len(captured)

    assert status_queries(2) == status_queries(20) == 2
