"""A token is one identity wherever it is used: the project binding and the "acts only as
itself and its sub-agents" rule of hosted /mcp hold on the REST API with the same secret, and
a DAG workflow is executed and cancelled only by its creator's family or a person.

Each test is an attack a hostile token holder made: another project's data read, a session
started on another token's agent (whose next /mcp call would be handed it), another token's
workflow deleted by naming its creator, human steps completed and blockers resolved in a
project the token is not bound to.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from django.test import Client

from accounts.services import api_token_create
from dag import services as dag
from tests.api.conftest import (
    EVERYTHING,
    Caller,
    assert_error,
)
from tests.conftest import NESTED_JOB
from tests.support.factories import make_user, write_job
from tracker import services as tracker
from tracker.models import Issue
from workflows.dialects import deepwork
from workflows.models import Event, Job, Project, WorkflowSession
from workflows.services.agents import agent_ensure
from workflows.services.catalog import catalog_view
from workflows.services.projects import project_add

pytestmark = pytest.mark.django_db

PLAN = [
    {"step_id": "build", "description": "Build", "assigned_role": "swe"},
    {"step_id": "approve", "description": "Approve", "assigned_role": "human"},
]


def project_at(path: Path) -> Project:
    path.mkdir(parents=True, exist_ok=True)
    write_job(path, "nested", NESTED_JOB, ["first", "second"])
    return project_add(root_path=str(path)).project


class World:
    """Two projects; a victim token agent bound to the first with a session, a tracked
    blocker and a DAG workflow there; attackers with every permission."""

    def __init__(self, tmp_path: Path) -> None:
        self.one = project_at(tmp_path / "one")
        self.two = project_at(tmp_path / "two")
        victim_user = make_user(username="victim", perms=EVERYTHING)
        victim, self.victim_secret = api_token_create(
            user=victim_user, name="laptop", mcp=True, mcp_project=self.one
        )
        self.victim_agent = f"token-{victim.pk}-laptop"
        # The victim's own session on its own stack, as its /mcp calls start it.
        started = deepwork.start_workflow(
            project=self.one,
            agent_id=self.victim_agent,
            catalog=catalog_view(project=self.one),
            job_name="nested",
            workflow_name="only",
            goal="the victim's goal",
        )
        self.victim_session = started.begin_step.session_id
        agent = agent_ensure(project=self.one, agent_id=self.victim_agent)
        workflow = tracker.tracked_workflow_start(project=self.one, agent=agent, name="w")
        on = tracker.task_start(
            project=self.one, agent=agent, workflow_id=str(workflow.pk), name="t", goal="g"
        ).task
        self.tracked = workflow.pk
        self.blocker = tracker.issue_log(
            project=self.one,
            agent=agent,
            task_id=str(on.pk),
            type="unclear_requirement",
            description="which?",
            resolution="asked",
            requires_human_review=True,
        ).pk
        self.workflow = dag.dag_define(
            project=self.one, creator_id=self.victim_agent, name="Ship", description="", steps=PLAN
        ).job.dir_name
        attacker = make_user(username="mallory", perms=EVERYTHING)
        # Bound elsewhere: to project two.
        _, secret = api_token_create(user=attacker, name="bound", mcp=True, mcp_project=self.two)
        self.bound = Caller(Client(), secret, attacker)
        # On the victim's project, but another agent.
        roaming, secret = api_token_create(user=attacker, name="roaming", mcp=True)
        self.roaming = Caller(Client(), secret, attacker)
        self.roaming_agent = f"token-{roaming.pk}-roaming"
        # A person's key (no MCP): acts as its person, never as a token's agent.
        _, secret = api_token_create(user=attacker, name="key")
        self.key = Caller(Client(), secret, attacker)

    def snapshot(self) -> tuple:
        return (
            WorkflowSession.objects.count(),
            Event.objects.count(),
            Issue.objects.filter(resolved_at__isnull=False).count(),
            Job.objects.filter(source=Job.Source.DEFINED).count(),
        )


@pytest.fixture
def world(tmp_path: Path) -> World:
    return World(tmp_path)


def start_body(project: Project, agent_id: str | None) -> dict:
    body = {"project": project.pk, "job_name": "nested", "workflow_name": "only", "goal": "evil"}
    return body if agent_id is None else {**body, "agent_id": agent_id}


def test_a_token_bound_elsewhere_starts_nothing_on_another_project_or_agent(world):
    before = world.snapshot()
    error = assert_error(
        world.bound.post("/api/sessions", start_body(world.one, world.victim_agent)),
        403,
        "forbidden",
    )
    assert error["message"] == (
        f"token {world.bound.token[:12]}… (bound) may use only project {world.two.pk}; "
        f"not project {world.one.pk}"
    )
    # On its own project, still not as another token's agent.
    for caller in (world.bound, world.roaming):
        project = world.two if caller is world.bound else world.one
        error = assert_error(
            caller.post("/api/sessions", start_body(project, world.victim_agent)), 403, "forbidden"
        )
        assert f"Agent {world.victim_agent!r} belongs to another API token" in error["message"]
    error = assert_error(
        world.key.post("/api/sessions", start_body(world.one, world.victim_agent)),
        403,
        "forbidden",
    )
    assert "may not act as it" in error["message"]
    assert world.snapshot() == before
    # The victim's stack holds its own session only: its next /mcp call is handed nothing else.
    stack = WorkflowSession.objects.filter(agent__agent_id=world.victim_agent)
    assert list(stack.values_list("session_id", flat=True)) == [world.victim_session]


def test_a_token_agent_starts_sessions_as_itself_on_rest_as_on_mcp(world):
    started = world.roaming.post("/api/sessions", start_body(world.one, None))
    assert started.status_code == 201, started.content
    sub = world.roaming.post("/api/sessions", start_body(world.one, "helper"))
    assert sub.status_code == 201, sub.content
    agents = {
        s.agent.agent_id
        for s in WorkflowSession.objects.select_related("agent").exclude(
            session_id=world.victim_session
        )
    }
    assert agents == {world.roaming_agent, f"{world.roaming_agent}/helper"}


def test_a_token_acts_on_no_session_of_another_tokens_agent(world):
    before = world.snapshot()
    for caller in (world.roaming, world.key):
        finish = caller.post(
            f"/api/sessions/{world.victim_session}/finish", {"outputs": {"first.md": "first.md"}}
        )
        assert "agent" in assert_error(finish, 403, "forbidden")["message"]
        moved = caller.post(
            f"/api/sessions/{world.victim_session}/go-to-step", {"step_id": "first"}
        )
        assert_error(moved, 403, "forbidden")
    assert world.snapshot() == before


def test_a_token_bound_elsewhere_reads_nothing_of_the_other_project(world):
    bound = world.bound
    one = world.one.pk
    for path in (
        f"/api/projects/{one}",
        f"/api/projects/{one}/jobs",
        f"/api/sessions/{world.victim_session}",
        f"/api/sessions/{world.victim_session}/history",
        f"/api/sessions/{world.victim_session}/history/markdown",
        f"/api/tracker/workflows/{world.tracked}",
        f"/api/tracker/workflows/{world.tracked}/tasks",
        f"/api/tracker/workflows/{world.tracked}/issues",
        f"/api/dag/workflows/{world.workflow}",
        f"/api/projects/{one}/published-workflows",
        "/api/insights/agents",
    ):
        params = {"project": one} if path.startswith("/api/insights") else {}
        error = assert_error(bound.get(path, **params), 403, "forbidden")
        assert f"may use only project {world.two.pk}" in error["message"], path
    for path in ("/api/sessions", "/api/events", "/api/tracker/workflows", "/api/dag/agents"):
        assert_error(bound.get(path, project=one), 403, "forbidden")
    # Lists without a filter are the bound project's.
    assert bound.get("/api/sessions").json()["items"] == []
    assert bound.get("/api/tracker/workflows").json()["items"] == []
    assert bound.get("/api/dag/workflows").json()["count"] == 0
    assert [p["id"] for p in bound.get("/api/projects").json()["items"]] == [world.two.pk]
    assert all(e["project"] == world.two.pk for e in bound.get("/api/events").json()["items"])


def test_another_tokens_dag_workflow_is_not_deleted_by_naming_its_creator(world):
    before = world.snapshot()
    delete = f"/api/dag/workflows/{world.workflow}/delete"
    claim = {"requesting_agent_id": world.victim_agent, "force": True}
    assert (
        "may use only project"
        in (assert_error(world.bound.post(delete, claim), 403, "forbidden")["message"])
    )
    assert (
        "belongs to another API token"
        in (assert_error(world.roaming.post(delete, claim), 403, "forbidden")["message"])
    )
    assert (
        "may not act as it"
        in (assert_error(world.key.post(delete, claim), 403, "forbidden")["message"])
    )
    # Naming itself, the caller is not the creator.
    mine = {"requesting_agent_id": world.roaming_agent}
    assert (
        "Only the workflow's creator"
        in (assert_error(world.roaming.post(delete, mine), 403, "forbidden")["message"])
    )
    assert world.snapshot() == before


def test_only_the_creators_family_executes_a_dag_workflow_over_rest(world):
    before = world.snapshot()
    execute = f"/api/dag/workflows/{world.workflow}/execute"
    refused = world.roaming.post(execute, {"triggering_agent_id": world.roaming_agent})
    error = assert_error(refused, 403, "forbidden")
    assert error["message"] == (
        f"Only the workflow's creator ({world.victim_agent!r}), its sub-agents "
        f"({world.victim_agent}/<name>) or a person with the permission may execute workflow "
        f"{world.workflow!r}; {world.roaming_agent!r} may not"
    )
    assert world.snapshot() == before
    victim = Caller(Client(), world.victim_secret)
    started = victim.post(execute, {"triggering_agent_id": "lead"})
    assert started.status_code == 200, started.content
    session = WorkflowSession.objects.select_related("agent").get(session_id=world.workflow)
    assert session.agent.agent_id == f"{world.victim_agent}/lead"


def test_human_steps_and_blockers_of_another_project_are_out_of_reach(world):
    victim = Caller(Client(), world.victim_secret)
    execute = f"/api/dag/workflows/{world.workflow}/execute"
    assert victim.post(execute, {"triggering_agent_id": world.victim_agent}).status_code == 200
    dag.dag_agent_register(project=world.one, agent_id="w", roles=["swe"])
    dag.dag_dispatch(project=world.one)
    dag.dag_report_completion(
        project=world.one, workflow_id=world.workflow, step_id="build", agent_id="w"
    )
    before = world.snapshot()
    step = f"/api/dag/workflows/{world.workflow}/steps/approve"
    assert_error(world.bound.post(f"{step}/complete", {"result": "ok"}), 403, "forbidden")
    assert_error(world.bound.post(f"{step}/fail", {"error_message": "no"}), 403, "forbidden")
    resolve = world.bound.post(f"/api/tracker/issues/{world.blocker}/resolve", {"resolution": "x"})
    # A bound token is an agent's, and answering a blocker is a person's decision anywhere.
    assert (
        "is an MCP agent's token; answering a blocker"
        in (assert_error(resolve, 403, "forbidden")["message"])
    )
    assert world.snapshot() == before
