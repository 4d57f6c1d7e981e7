"""Dashboard fixtures: people with and without permissions, and sessions driven through the
real services (reviews are concluded with stored verdicts instead of a reviewer program)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from django.contrib.auth.models import User
from django.test import Client

from reviews.gate import CommandReviewer, GateConfig, Verdict
from reviews.rulings import review_request_changes
from reviews.services import review_conclude, review_plan
from tests.support.driving import step_finish
from tests.support.factories import make_user
from workflows.models import Agent, Project, StepRun, WorkflowSession
from workflows.results import NeedsWork
from workflows.services import sessions
from workflows.services.agents import agent_ensure
from workflows.services.catalog import Catalog

# Never run: review_conclude is handed the verdicts directly.
GATE = GateConfig(reviewer=CommandReviewer("never-run-reviewer"), max_attempts=100)


def client_for(user: User | None, *, enforce_csrf: bool = False) -> Client:
    client = Client(enforce_csrf_checks=enforce_csrf)
    if user is not None:
        client.force_login(user)
    return client


@pytest.fixture
def watcher(db) -> User:
    # The password is for the test that logs in through the form.
    return make_user(username="wanda", groups=("Watchers",), password="pw-wanda")


@pytest.fixture
def decider(db) -> User:
    return make_user(username="dana", groups=("Deciders",))


@pytest.fixture
def nobody(db) -> User:
    """Logged in, but without the permission to watch."""
    return make_user(username="nemo")


@pytest.fixture
def watching(watcher) -> Client:
    return client_for(watcher)


@pytest.fixture
def deciding(decider) -> Client:
    return client_for(decider)


@dataclass
class Driver:
    """Drives sessions of the demo project through the services, as an agent would."""

    project: Project
    agent: Agent
    catalog: Catalog

    def start(self, job: str = "demo", workflow: str = "main", goal: str = "Write it up"):
        response = sessions.session_start(
            project=self.project,
            agent=self.agent,
            catalog=self.catalog.view(),
            job_name=job,
            workflow_name=workflow,
            goal=goal,
        )
        return WorkflowSession.objects.get(session_id=response.begun.session.session_id)

    def finish(self, outputs: dict, notes: str | None = None):
        return step_finish(project=self.project, agent=self.agent, outputs=outputs, notes=notes)

    def fail_review(self, outputs: dict, feedback: str = "The summary misses the B half"):
        """Hand in the current (reviewed) step and record a failing external verdict."""
        checkpoint = sessions.step_checkpoint(
            project=self.project, agent=self.agent, outputs=outputs
        )
        plan = review_plan(checkpoint=checkpoint, gate=GATE, override_reason=None)
        assert plan.tasks, "the step has no review to fail"
        verdict = Verdict(
            passed=False,
            feedback=feedback,
            criteria_results=[
                {"criterion": "Complete", "passed": False, "feedback": "Part B is missing"},
                {"criterion": "Readable", "passed": True, "feedback": None},
            ],
            duration_ms=1234,
        )
        return review_conclude(
            checkpoint=checkpoint, gate=GATE, plan=plan, results=[verdict] * len(plan.tasks)
        )

    def deliver_changes(self, outputs: dict, *, by, feedback: str = "Say more"):
        """A person requests changes on the current step; the agent's hand-in receives them."""
        top = WorkflowSession.objects.filter(agent=self.agent, status="active").latest("id")
        run = StepRun.objects.get(session=top, status="active")
        review_request_changes(step_run=run, feedback=feedback, by=by, via="dashboard")
        checkpoint = sessions.step_checkpoint(
            project=self.project, agent=self.agent, outputs=outputs
        )
        plan = review_plan(checkpoint=checkpoint, gate=GATE, override_reason=None)
        assert plan.answer is not None
        assert isinstance(plan.answer, NeedsWork)

    def to_wrap_up(self, goal: str = "Write it up") -> WorkflowSession:
        """A demo/main session at its reviewed last step, with one failed review."""
        session = self.start(goal=goal)
        self.finish({"notes.md": "notes.md", "extras": ["extra1.md", "./extra2.md"]}, "gathered")
        self.finish({"a.md": "a.md", "b.md": "b.md"})
        answer = self.fail_review({"summary.md": "summary.md"})
        assert isinstance(answer, NeedsWork)
        session.refresh_from_db()
        return session


@pytest.fixture
def driver(project, agent, catalog) -> Driver:
    return Driver(project=project, agent=agent, catalog=catalog)


@pytest.fixture
def other_driver(project, catalog) -> Driver:
    """A second agent on the same project, with its own stack."""
    return Driver(
        project=project, agent=agent_ensure(project=project, agent_id="agent-two"), catalog=catalog
    )
