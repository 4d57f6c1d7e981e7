"""Multi-agent DAG workflows: validation, the scheduler, reports, authorization,
lost agents and deletion, on the real database (SQLite, and PostgreSQL with DATABASE_URL)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from dag import selectors
from dag import services as dag
from dag.plan import dag_plan
from workflows.errors import Conflict, Forbidden, InvalidInput, NotFound
from workflows.models import (
    Agent,
    Event,
    Job,
    Project,
    Step,
    StepRun,
    Workflow,
    WorkflowSession,
    WorkflowStep,
)
from workflows.services.agents import agent_heartbeat

pytestmark = pytest.mark.django_db


# A fan-out / fan-in: plan, then three builds side by side, then a review of all three.
FAN = [
    {"step_id": "plan", "description": "Plan the work", "assigned_role": "planner"},
    *(
        {
            "step_id": f"build_{n}",
            "description": f"Build part {n}",
            "assigned_role": "swe",
            "depends_on": ["plan"],
            "tool_to_call": "make",
            "tool_arguments": {"part": n},
        }
        for n in (1, 2, 3)
    ),
    {
        "step_id": "review",
        "description": "Review it all",
        "assigned_role": "qa",
        "depends_on": ["build_1", "build_2", "build_3"],
    },
]


@pytest.fixture
def proj(tmp_path) -> Project:
    return Project.objects.create(root_path=str(tmp_path), name="p")


def define(proj, steps=FAN, creator="boss"):
    return dag.dag_define(
        project=proj, creator_id=creator, name="Ship", description="ship it", steps=steps
    )


def register(proj, agent_id, *roles):
    return dag.dag_agent_register(project=proj, agent_id=agent_id, roles=list(roles))


def statuses(job) -> dict[str, str]:
    return {s["step_id"]: s["status"] for s in selectors.dag_details(job=job)["steps"]}


def counts() -> tuple[int, ...]:
    return (
        Job.objects.count(),
        Step.objects.count(),
        WorkflowStep.objects.count(),
        WorkflowSession.objects.count(),
        StepRun.objects.count(),
        Event.objects.count(),
    )


# --- Validation at definition time ----------------------------------------------------------


@pytest.mark.parametrize(
    ("steps", "message"),
    [
        ([], "steps must hold at least one step"),
        ("a", "steps must be a list of step objects, not str"),
        ([1], "steps[0] must be an object, not int"),
        ([{"description": "x"}], "steps[0].step_id is required"),
        ([{"step_id": " ", "description": "x"}], "steps[0].step_id must not be empty"),
        ([{"step_id": "a"}], "Step 'a': description is required"),
        (
            [{"step_id": "a", "description": "x"}, {"step_id": "a", "description": "y"}],
            "steps[1].step_id 'a' is already used by steps[0]; step ids must be unique within a "
            "workflow",
        ),
        (
            [{"step_id": "a", "description": "x", "depends_on": ["zz"]}],
            "Step 'a' depends on 'zz', which is not a step of this workflow",
        ),
        ([{"step_id": "a", "description": "x", "depends_on": ["a"]}], "Step 'a' depends on itself"),
        (
            [
                {"step_id": "a", "description": "x", "depends_on": ["b"]},
                {"step_id": "b", "description": "y", "depends_on": ["a"]},
            ],
            "The steps' dependencies form a cycle: a -> b -> a",
        ),
        (
            [
                {"step_id": "root", "description": "r"},
                {"step_id": "a", "description": "x", "depends_on": ["root", "c"]},
                {"step_id": "b", "description": "y", "depends_on": ["a"]},
                {"step_id": "c", "description": "z", "depends_on": ["b"]},
            ],
            "The steps' dependencies form a cycle: a -> b -> c -> a",
        ),
        (
            [{"step_id": "a", "description": "x", "tool_arguments": [1, 2]}],
            "Step 'a': tool_arguments must be an object, not list",
        ),
        (
            [{"step_id": "a", "description": "x", "depends_on": "b"}],
            "Step 'a': depends_on must be a list of step ids",
        ),
        (
            [{"step_id": "a", "description": "x", "tool_arguments": {"k": ["\x00"]}}],
            "Step 'a': tool_arguments contains a NUL character; it must be valid Unicode text",
        ),
        (
            [{"step_id": "a\ud800", "description": "x"}],
            "steps[0].step_id contains a lone surrogate (U+D800) at position 1; it must be "
            "valid Unicode text",
        ),
        (
            [{"step_id": "a", "description": "x", "colour": "red"}],
            "steps[0] has unknown field 'colour'",
        ),
    ],
)
def test_bad_definitions_get_a_precise_error_and_store_nothing(proj, steps, message):
    before = counts()
    with pytest.raises(InvalidInput) as caught:
        define(proj, steps=steps)
    assert caught.value.message.startswith(message)
    assert counts() == before


def test_levels_follow_the_longest_chain():
    plan = dag_plan(FAN[::-1])  # order given does not matter
    assert {s.step_id: s.level for s in plan.steps} == {
        "review": 2,
        "build_3": 1,
        "build_2": 1,
        "build_1": 1,
        "plan": 0,
    }


def test_define_stores_the_dag_in_the_catalog_tables_with_warnings_for_unknown_names(proj):
    register(proj, "p1", "planner")
    defined = define(proj)
    job = defined.job
    assert job.source == Job.Source.DEFINED
    assert not job.is_current
    assert job.creator_id == "boss"
    assert job.dir_name.startswith("dag-")
    assert Workflow.objects.get(job=job).name == "Ship"
    review = WorkflowStep.objects.get(workflow__job=job, step__step_id="review")
    assert sorted(n.step.step_id for n in review.depends_on.all()) == [
        "build_1",
        "build_2",
        "build_3",
    ]
    assert review.entry_index == 2
    assert Step.objects.get(job=job, step_id="build_2").tool_arguments == {"part": 2}
    # Roles nobody has yet are warnings, not errors.
    assert defined.warnings == [
        "Step 'build_1': no registered agent has the role 'swe' yet; the step waits for one",
        "Step 'build_2': no registered agent has the role 'swe' yet; the step waits for one",
        "Step 'build_3': no registered agent has the role 'swe' yet; the step waits for one",
        "Step 'review': no registered agent has the role 'qa' yet; the step waits for one",
    ]
    assert Event.objects.filter(kind=Event.Kind.DAG_DEFINED).count() == 1
    details = selectors.dag_details(job=job)
    assert details["status"] == "pending"
    assert set(statuses(job).values()) == {"pending"}


def test_defined_workflows_survive_catalog_syncs_and_stay_out_of_the_folder_catalog(demo_project):
    from workflows.services.catalog import Catalog
    from workflows.services.projects import project_ensure

    project = project_ensure(root_path=demo_project)
    job = define(project).job
    catalog = Catalog(project)
    view = catalog.view()
    assert "demo" in [j.dir_name for j in view.jobs]
    assert view.find(job.dir_name) is None
    assert view.find("Ship") is None
    job.refresh_from_db()
    assert job.source == Job.Source.DEFINED
    assert not job.is_current
    assert selectors.dag_details(job=job)["step_count"] == 5


# --- Execution and the scheduler ---------------------------------------------------------------


def test_fan_out_fan_in_runs_to_completion_exactly_once(proj):
    register(proj, "planner", "planner")
    register(proj, "swe1", "swe")
    register(proj, "swe2", "swe")
    register(proj, "qa", "qa")
    job = define(proj).job
    wid = job.dir_name

    started = dag.dag_execute(project=proj, workflow_id=wid, triggering_agent_id="boss")
    assert [(d.step_id, d.agent_id) for d in started.delegated] == [("plan", "planner")]
    assert started.issues == []
    session = WorkflowSession.objects.get(job=job)
    assert session.status == "running"
    assert session.session_id == wid

    after_plan = dag.dag_report_completion(
        project=proj, workflow_id=wid, step_id="plan", agent_id="planner", result={"ok": 1}
    )
    # Least loaded first, then idle longest, then by id: swe1, swe2, then swe1 again.
    assert [(d.step_id, d.agent_id) for d in after_plan.advance.delegated] == [
        ("build_1", "swe1"),
        ("build_2", "swe2"),
        ("build_3", "swe1"),
    ]
    assignments = selectors.dag_assignments(agent=Agent.objects.get(agent_id="swe1"))
    assert [a["step_id"] for a in assignments] == ["build_1", "build_3"]
    assert assignments[0]["dependency_results"] == {"plan": {"ok": 1}}
    assert assignments[0]["tool_to_call"] == "make"
    assert assignments[0]["tool_arguments"] == {"part": 1}

    for step, agent in (("build_1", "swe1"), ("build_2", "swe2")):
        report = dag.dag_report_completion(
            project=proj, workflow_id=wid, step_id=step, agent_id=agent, result=step
        )
        assert report.advance.delegated == []  # review still waits for build_3
    report = dag.dag_report_completion(
        project=proj, workflow_id=wid, step_id="build_3", agent_id="swe1", result=[3]
    )
    assert [(d.step_id, d.agent_id) for d in report.advance.delegated] == [("review", "qa")]
    review = selectors.dag_assignments(agent=Agent.objects.get(agent_id="qa"))[0]
    assert review["dependency_results"] == {
        "build_1": "build_1",
        "build_2": "build_2",
        "build_3": [3],
    }

    final = dag.dag_report_completion(
        project=proj, workflow_id=wid, step_id="review", agent_id="qa"
    )
    assert final.status == "completed"
    assert selectors.dag_details(job=job)["status"] == "completed"
    assert Event.objects.filter(kind=Event.Kind.SESSION_COMPLETED, session=session).count() == 1
    assert Event.objects.filter(kind=Event.Kind.DAG_STEP_ASSIGNED).count() == 5

    # A repeated report is a no-op that says so.
    again = dag.dag_report_completion(
        project=proj, workflow_id=wid, step_id="review", agent_id="qa"
    )
    assert again.already
    assert again.note == "Step 'review' was already reported completed; nothing changed"
    assert Event.objects.filter(kind=Event.Kind.SESSION_COMPLETED).count() == 1

    with pytest.raises(Conflict, match="already completed; a workflow runs once"):
        dag.dag_execute(project=proj, workflow_id=wid, triggering_agent_id="boss")


def test_no_agent_for_a_role_is_an_issue_retried_when_one_registers(proj):
    job = define(proj).job
    started = dag.dag_execute(project=proj, workflow_id=job.dir_name, triggering_agent_id="boss")
    assert started.delegated == []
    assert [(i.step_id, i.reason) for i in started.issues] == [
        ("plan", "no responsive agent has the role 'planner'")
    ]
    assert statuses(job)["plan"] == "pending"
    assert selectors.dag_details(job=job)["steps"][0]["waiting_for_agent"] is True
    register(proj, "late", "planner")
    outcomes = dag.dag_dispatch(project=proj)
    assert [(d.step_id, d.agent_id) for o in outcomes for d in o.delegated] == [("plan", "late")]
    assert statuses(job)["plan"] == "in_progress"


def test_explicit_agent_wins_over_role_and_waits_while_unresponsive(proj):
    register(proj, "any-planner", "planner")
    steps = [
        {"step_id": "a", "description": "x", "assigned_role": "planner", "assigned_agent_id": "me"}
    ]
    job = define(proj, steps=steps).job
    started = dag.dag_execute(project=proj, workflow_id=job.dir_name, triggering_agent_id="boss")
    assert [(i.step_id, i.reason) for i in started.issues] == [
        ("a", "agent 'me' is not registered")
    ]
    register(proj, "me")
    Agent.objects.filter(agent_id="me").update(lease_until=timezone.now() - timedelta(hours=1))
    [outcome] = dag.dag_dispatch(project=proj)
    assert [i.reason for i in outcome.issues] == [
        "agent 'me' is not responsive (no recent heartbeat)"
    ]
    agent_heartbeat(agent=Agent.objects.get(agent_id="me"), lease_seconds=30)
    [outcome] = dag.dag_dispatch(project=proj)
    assert [(d.step_id, d.agent_id) for d in outcome.delegated] == [("a", "me")]


def test_only_the_assigned_agent_reports_and_bad_reports_change_nothing(proj):
    register(proj, "planner", "planner")
    job = define(proj).job
    wid = job.dir_name
    dag.dag_execute(project=proj, workflow_id=wid, triggering_agent_id="boss")
    before = counts()
    with pytest.raises(InvalidInput, match=r"Only the agent assigned to step 'plan' \('planner'\)"):
        dag.dag_report_completion(
            project=proj, workflow_id=wid, step_id="plan", agent_id="intruder"
        )
    with pytest.raises(InvalidInput, match="Only the agent assigned"):
        dag.dag_report_failure(
            project=proj, workflow_id=wid, step_id="plan", agent_id="intruder", error_message="x"
        )
    with pytest.raises(Conflict, match="'review' of workflow .* is not assigned to any agent"):
        dag.dag_report_completion(project=proj, workflow_id=wid, step_id="review", agent_id="qa")
    with pytest.raises(NotFound, match="has no step 'nope'"):
        dag.dag_report_completion(project=proj, workflow_id=wid, step_id="nope", agent_id="planner")
    with pytest.raises(NotFound, match="Unknown workflow_id 'dag-nope'"):
        dag.dag_report_completion(
            project=proj, workflow_id="dag-nope", step_id="plan", agent_id="planner"
        )
    with pytest.raises(InvalidInput, match="error_message must say what went wrong"):
        dag.dag_report_failure(
            project=proj, workflow_id=wid, step_id="plan", agent_id="planner", error_message=" "
        )
    assert counts() == before
    assert statuses(job)["plan"] == "in_progress"


def test_a_failure_fails_the_workflow_and_later_reports_change_nothing(proj):
    register(proj, "planner", "planner")
    for n in (1, 2):
        register(proj, f"swe{n}", "swe")
    job = define(proj).job
    wid = job.dir_name
    dag.dag_execute(project=proj, workflow_id=wid, triggering_agent_id="boss")
    dag.dag_report_completion(project=proj, workflow_id=wid, step_id="plan", agent_id="planner")
    failed = dag.dag_report_failure(
        project=proj, workflow_id=wid, step_id="build_1", agent_id="swe1", error_message="boom"
    )
    assert failed.status == "failed"
    details = selectors.dag_details(job=job)
    assert details["status"] == "failed"
    assert details["failure_reason"] == "Step 'build_1' failed: boom"
    assert statuses(job)["build_1"] == "failed"
    before = counts()
    late = dag.dag_report_completion(
        project=proj, workflow_id=wid, step_id="build_2", agent_id="swe2", result="late"
    )
    assert late.already
    assert "is failed; this report changed nothing" in late.note
    assert statuses(job)["build_2"] == "in_progress"
    again = dag.dag_report_failure(
        project=proj, workflow_id=wid, step_id="build_1", agent_id="swe1", error_message="boom"
    )
    assert again.already
    assert counts() == before
    assert dag.dag_dispatch(project=proj) == []  # nothing of a failed workflow moves again
    # swe2 still holds build_2 on paper, but a failed workflow's steps are nobody's work now.
    swe2 = Agent.objects.get(project=proj, agent_id="swe2")
    assert statuses(job)["build_2"] == "in_progress"
    assert selectors.dag_assignments(agent=swe2) == []
    assert not selectors.dag_has_assignment(agent_pk=swe2.pk)
    assert {a["agent_id"]: a["load"] for a in selectors.dag_agents(project=proj)}["swe2"] == 0


def test_a_lost_agents_step_is_handed_on_and_recorded(proj):
    register(proj, "planner", "planner")
    register(proj, "swe1", "swe")
    job = define(proj).job
    wid = job.dir_name
    dag.dag_execute(project=proj, workflow_id=wid, triggering_agent_id="boss")
    dag.dag_report_completion(project=proj, workflow_id=wid, step_id="plan", agent_id="planner")
    assert {x["step_id"]: x["assigned_agent_id"] for x in selectors.dag_details(job=job)["steps"]}[
        "build_1"
    ] == "swe1"
    # swe1's lease runs out (it stopped renewing); swe2 arrives.
    Agent.objects.filter(agent_id="swe1").update(lease_until=timezone.now() - timedelta(hours=1))
    register(proj, "swe2", "swe")
    [outcome] = dag.dag_dispatch(project=proj)
    assert sorted(outcome.handed_on) == ["build_1", "build_2", "build_3"]
    assert {d.agent_id for d in outcome.delegated} == {"swe2"}
    handed = Event.objects.filter(kind=Event.Kind.DAG_STEP_HANDED_ON).order_by("id")
    assert [e.payload["step_id"] for e in handed] == ["build_1", "build_2", "build_3"]
    assert handed[0].payload["from_agent_id"] == "swe1"
    assert StepRun.objects.get(step_id="build_1").handoffs == 1
    # The lost agent coming back is told it no longer holds the step.
    with pytest.raises(InvalidInput, match=r"\('swe2'\) may report on it; 'swe1' is not"):
        dag.dag_report_completion(project=proj, workflow_id=wid, step_id="build_1", agent_id="swe1")


def test_delete_only_by_the_creator_and_running_only_with_force(proj):
    register(proj, "planner", "planner")
    job = define(proj).job
    wid = job.dir_name
    with pytest.raises(Forbidden, match=r"Only the workflow's creator \('boss'\) may delete"):
        dag.dag_delete(project=proj, workflow_id=wid, requesting_agent_id="other")
    dag.dag_execute(project=proj, workflow_id=wid, triggering_agent_id="boss")
    before = counts()
    with pytest.raises(Conflict, match="is running; delete it with force=true"):
        dag.dag_delete(project=proj, workflow_id=wid, requesting_agent_id="boss")
    assert counts() == before
    assert (
        dag.dag_delete(project=proj, workflow_id=wid, requesting_agent_id="boss", force=True)
        == "running"
    )
    assert not Job.objects.filter(pk=job.pk).exists()
    assert not StepRun.objects.exists()
    assert Event.objects.filter(kind=Event.Kind.DAG_DELETED).count() == 1
    with pytest.raises(NotFound):
        dag.dag_delete(project=proj, workflow_id=wid, requesting_agent_id="boss")
    # A pending one goes without force.
    other = define(proj).job
    assert (
        dag.dag_delete(project=proj, workflow_id=other.dir_name, requesting_agent_id="boss")
        == "pending"
    )


def test_register_and_heartbeat_rules(proj):
    with pytest.raises(InvalidInput, match="roles must be a list of role names"):
        register(proj, "a", "")
    with pytest.raises(InvalidInput, match="agent_id must be 1 to 128 characters"):
        register(proj, " ")
    with pytest.raises(NotFound, match="Unknown agent 'ghost': register it first"):
        dag.dag_agent(project=proj, agent_id="ghost")
    agent = register(proj, "a", "x", "y", "x")
    assert agent.roles == ["x", "y"]
    assert register(proj, "a", "z").roles == ["z"]


def test_summaries_and_details_take_a_constant_number_of_queries(proj):
    register(proj, "planner", "planner")
    small = define(proj).job
    dag.dag_execute(project=proj, workflow_id=small.dir_name, triggering_agent_id="boss")
    big_steps = [
        {"step_id": f"s{n}", "description": "x", "depends_on": [f"s{n - 1}"] if n else []}
        for n in range(60)
    ]
    big = define(proj, steps=big_steps).job
    dag.dag_execute(project=proj, workflow_id=big.dir_name, triggering_agent_id="boss")
    numbers = []
    for job in (small, big):
        with CaptureQueriesContext(connection) as queries:
            details = selectors.dag_details(job=job)
        numbers.append(len(queries))
        assert details["step_count"] in (5, 60)
    assert numbers[0] == numbers[1]
    define(proj, creator="x")
    with CaptureQueriesContext(connection) as few:
        two = selectors.dag_summaries(project=proj, creator_id="boss")
    for _ in range(5):
        define(proj)
    with CaptureQueriesContext(connection) as many:
        seven = selectors.dag_summaries(project=proj)
    assert len(few) == len(many)
    assert [s["step_count"] for s in two] == [60, 5]
    assert [s["status"] for s in two] == ["running", "running"]
    assert len(seven) == 8
    assert [p["step_count"] for p in selectors.dag_published(project=proj)] == [5] * 5 + [5]


# --- People as agents --------------------------------------------------------------------------


def test_a_human_approval_blocks_the_plan_until_a_person_completes_it(proj):
    from tests.support.factories import make_user

    dana = make_user(username="dana")
    register(proj, "w", "swe")
    steps = [
        {"step_id": "draft", "description": "Draft", "assigned_role": "swe"},
        {
            "step_id": "approve",
            "description": "Approve",
            "assigned_role": "human",
            "depends_on": ["draft"],
        },
        {
            "step_id": "sign",
            "description": "Sign",
            "assigned_agent_id": "user:dana",
            "depends_on": ["approve"],
        },
        {"step_id": "ship", "description": "Ship", "assigned_role": "swe", "depends_on": ["sign"]},
    ]
    defined = define(proj, steps=steps)
    assert defined.warnings == []  # people are not agents to register
    wid = defined.job.dir_name
    dag.dag_execute(project=proj, workflow_id=wid, triggering_agent_id="boss")
    with pytest.raises(Conflict, match="still waiting for the steps it depends on"):
        dag.dag_person_report(
            workflow_id=wid, step_id="approve", by=dana, result="ok", via="dashboard"
        )
    with pytest.raises(InvalidInput, match="is an agent's step"):
        dag.dag_person_report(workflow_id=wid, step_id="draft", by=dana, via="dashboard")
    drafted = dag.dag_report_completion(
        project=proj, workflow_id=wid, step_id="draft", agent_id="w"
    )
    assert [(i.step_id, i.reason) for i in drafted.advance.issues] == [
        ("approve", "waiting for a person to complete it (dashboard or REST API)")
    ]
    # An agent cannot take it, and nobody hands it to one.
    with pytest.raises(Conflict, match="not assigned to any agent"):
        dag.dag_report_completion(project=proj, workflow_id=wid, step_id="approve", agent_id="w")
    approved = dag.dag_person_report(
        workflow_id=wid, step_id="approve", by=dana, result="yes", via="dashboard"
    )
    assert [i.reason for i in approved.advance.issues] == [
        "waiting for dana to complete it (dashboard or REST API)"
    ]
    with pytest.raises(InvalidInput, match="assigned to 'dana'; only that person"):
        dag.dag_person_report(
            workflow_id=wid, step_id="sign", by=make_user(username="eve"), via="dashboard"
        )
    signed = dag.dag_person_report(
        workflow_id=wid, step_id="sign", by=dana, result={"sig": 1}, via="dashboard"
    )
    assert [(d.step_id, d.agent_id) for d in signed.advance.delegated] == [("ship", "w")]
    event = Event.objects.filter(kind=Event.Kind.DAG_STEP_COMPLETED).order_by("id").last()
    assert event.payload == {
        "workflow_id": wid,
        "step_id": "sign",
        "agent_id": "user:dana",
        "by": "dana",
        "via": "dashboard",
    }
    again = dag.dag_person_report(workflow_id=wid, step_id="sign", by=dana, via="dashboard")
    assert again.already
    ship = selectors.dag_assignments(agent=Agent.objects.get(agent_id="w"))[0]
    assert ship["dependency_results"] == {"sign": {"sig": 1}}


def test_a_person_failing_a_human_step_fails_the_workflow(proj):
    from tests.support.factories import make_user

    steps = [{"step_id": "approve", "description": "Approve", "assigned_role": "human"}]
    wid = define(proj, steps=steps).job.dir_name
    dag.dag_execute(project=proj, workflow_id=wid, triggering_agent_id="boss")
    dana = make_user(username="dana")
    before = counts()
    with pytest.raises(InvalidInput, match="error_message must say what went wrong"):
        dag.dag_person_report(
            workflow_id=wid, step_id="approve", by=dana, error_message=" ", via="dashboard"
        )
    assert counts() == before
    failed = dag.dag_person_report(
        workflow_id=wid, step_id="approve", by=dana, error_message="no", via="dashboard"
    )
    assert failed.status == "failed"
    assert WorkflowSession.objects.get(session_id=wid).abort_reason == "Step 'approve' failed: no"


def test_only_agents_that_joined_dag_work_get_steps(proj):
    from workflows.liveness import ProcessHolder
    from workflows.services.agents import agent_claim

    # A DeepWork-only server's agent heartbeats too, but never waits for steps.
    agent_claim(project=proj, holder=ProcessHolder.for_this_process(), agent_id="deepwork-only")
    steps = [{"step_id": "any", "description": "no role, no agent"}]
    wid = define(proj, steps=steps).job.dir_name
    started = dag.dag_execute(project=proj, workflow_id=wid, triggering_agent_id="boss")
    assert [(i.step_id, i.reason) for i in started.issues] == [("any", "no responsive agent")]
    joined = dag.dag_agent_register(project=proj, agent_id="deepwork-only", roles=None)
    assert joined.takes_dag_steps
    [outcome] = dag.dag_dispatch(project=proj)
    assert [(d.step_id, d.agent_id) for d in outcome.delegated] == [("any", "deepwork-only")]
