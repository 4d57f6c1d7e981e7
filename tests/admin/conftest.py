"""Admin test data, produced by driving the demo job through the real services."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from reviews.gate import CommandReviewer, GateConfig, Verdict
from reviews.models import ReviewResult
from reviews.rulings import review_request_changes
from reviews.services import review_conclude, review_plan
from tests.support.driving import step_finish
from tests.support.factories import write_job
from workflows.models import Agent, Project, StepRun, WorkflowSession
from workflows.results import NeedsWork
from workflows.services import sessions
from workflows.services.catalog import Catalog

DEMO_OUTPUTS = [
    {"notes.md": "notes.md"},
    {"a.md": "a.md", "b.md": "b.md"},
]
FAILING_REVIEWER = GateConfig(reviewer=CommandReviewer("fake-reviewer"))


@dataclass
class Driver:
    """Runs workflows through the services the way an agent does."""

    project: Project
    agent: Agent
    catalog: Catalog

    def start(self, job: str = "demo", workflow: str = "main", goal: str = "g") -> WorkflowSession:
        response = sessions.session_start(
            project=self.project,
            agent=self.agent,
            catalog=self.catalog.view(),
            job_name=job,
            workflow_name=workflow,
            goal=goal,
        )
        return WorkflowSession.objects.get(session_id=response.begun.session.session_id)

    def finish(self, session: WorkflowSession, outputs: dict) -> None:
        step_finish(
            project=self.project,
            agent=self.agent,
            outputs=outputs,
            session_id=session.session_id,
        )

    def fail_review(self, session: WorkflowSession) -> StepRun:
        """Bring a demo/main session to ``wrap_up`` and hand it in to a reviewer that fails it."""
        for outputs in DEMO_OUTPUTS:
            self.finish(session, outputs)
        return self.hand_in_failing(session)

    def hand_in_failing(self, session: WorkflowSession) -> StepRun:
        """Hand ``wrap_up`` in to a reviewer that fails it.

        This is ``step_finish_gated`` without the reviewer subprocess: the reviewer's verdict is
        given, everything else (attempts, the stored result, the event) is the service's.
        """
        checkpoint = sessions.step_checkpoint(
            project=self.project,
            agent=self.agent,
            outputs={"summary.md": "summary.md"},
            session_id=session.session_id,
        )
        plan = review_plan(checkpoint=checkpoint, gate=FAILING_REVIEWER, override_reason=None)
        verdict = Verdict(
            passed=False,
            feedback="Needs improvement",
            criteria_results=[{"criterion": "Complete", "passed": False, "feedback": "Add more"}],
        )
        response = review_conclude(
            checkpoint=checkpoint,
            gate=FAILING_REVIEWER,
            plan=plan,
            results=[verdict] * len(plan.tasks),
        )
        assert isinstance(response, NeedsWork)
        return StepRun.objects.get(session=session, step_id="wrap_up", status="active")


@pytest.fixture
def driver(project, agent, catalog) -> Driver:
    return Driver(project=project, agent=agent, catalog=catalog)


@pytest.fixture
def failed_run(driver) -> StepRun:
    """An active step run whose last review failed."""
    run = driver.fail_review(driver.start(goal="summarise the notes"))
    assert ReviewResult.objects.filter(step_run=run, passed=False).exists()
    return run


@pytest.fixture
def every_model(demo_project, driver, failed_run, admin_user):
    """At least one row of every registered model, all written by the services."""
    write_job(demo_project, "broken", "name: [unclosed\n", [])
    completed = driver.start(workflow="quick")
    driver.finish(completed, DEMO_OUTPUTS[0])
    aborted = driver.start(job="nested", workflow="only")
    sessions.session_abort(
        project=driver.project,
        agent=driver.agent,
        session_id=aborted.session_id,
        explanation="not needed",
    )
    review_request_changes(
        step_run=failed_run, feedback="Cite the sources", by=admin_user, via="admin"
    )
    return failed_run
