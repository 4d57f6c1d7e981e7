"""A DeepWork run cancelled through the workflow tools: an agent cancels only its own runs;
a person cancels any, recorded as theirs."""

from __future__ import annotations

import pytest

from workflow_tools.deepwork_source import DeepWorkSource
from workflows.dialects import deepwork
from workflows.errors import Forbidden
from workflows.models import Agent, WorkflowSession
from workflows.services.agents import agent_ensure
from workflows.services.catalog import catalog_view

pytestmark = pytest.mark.django_db


def _source(project, agent: Agent | None) -> DeepWorkSource:
    return DeepWorkSource(
        project=lambda: project,
        view=lambda: catalog_view(project=project),
        agent=None if agent is None else (lambda: agent),
    )


def _started_by(project, agent: Agent) -> str:
    answer = deepwork.start_workflow(
        project=project,
        catalog=catalog_view(project=project),
        job_name="demo",
        workflow_name="main",
        goal="g",
        instance_id=None,
        agent=agent,
    )
    return answer.begin_step.session_id


def test_an_agent_cancels_its_own_run_but_not_another_agents(project):
    alice = agent_ensure(project=project, agent_id="alice")
    mallory = agent_ensure(project=project, agent_id="mallory")
    run_id = _started_by(project, alice)

    with pytest.raises(Forbidden, match="is agent 'alice''s; agent 'mallory' may cancel only"):
        _source(project, mallory).cancel(run_id=run_id, reason="mine now")
    assert WorkflowSession.objects.get(session_id=run_id).status == "active"

    status = _source(project, alice).cancel(run_id=run_id, reason="done with it")
    assert status.status == "CANCELLED"
    assert WorkflowSession.objects.get(session_id=run_id).status == "aborted"


def test_a_person_cancels_any_agents_run(project, django_user_model):
    alice = agent_ensure(project=project, agent_id="alice")
    run_id = _started_by(project, alice)
    bob = django_user_model.objects.create_user("bob")

    _source(project, None).cancel(run_id=run_id, reason="stop", by=bob, via="dashboard")

    assert WorkflowSession.objects.get(session_id=run_id).status == "aborted"
