"""The workflow tools free a DAG workflow's tool name by reacting to the scheduler's events, not
by the scheduler writing their rows: the name goes when an execution or a deletion is recorded,
in the same transaction (so it stays if that rolls back), and nothing else frees one."""

from __future__ import annotations

import pytest
from django.db import transaction

from dag import services as dag
from workflow_tools.models import WorkflowToolName, workflow_key
from workflow_tools.services import workflow_tool_names_assign
from workflow_tools.sources import PublishedWorkflow
from workflows.models import Project
from workflows.services.sessions import session_start

pytestmark = pytest.mark.django_db

STEPS = [{"step_id": "only", "description": "Do it", "assigned_role": "swe"}]


def named(project: Project, key: str, name: str) -> None:
    workflow_tool_names_assign(
        project=project,
        wanted=[(key, PublishedWorkflow(id=key.split(":", 1)[1], name=name, description=name))],
        reserved=[],
    )


def names(project: Project) -> set[str]:
    return set(
        WorkflowToolName.objects.filter(project=project).values_list("workflow_key", flat=True)
    )


def define(project: Project) -> str:
    wid = dag.dag_define(
        project=project, creator_id="lead", name="Plan", description="", steps=STEPS
    ).job.dir_name
    named(project, workflow_key("dag", wid), "Plan")
    return wid


def test_executing_and_deleting_free_only_that_workflows_name(project):
    ran, deleted, kept = define(project), define(project), define(project)
    named(project, "deepwork:build", "build")
    dag.dag_execute(project=project, workflow_id=ran, triggering_agent_id="lead")
    assert names(project) == {f"dag:{deleted}", f"dag:{kept}", "deepwork:build"}
    dag.dag_delete(project=project, workflow_id=deleted, requesting_agent_id="lead")
    assert names(project) == {f"dag:{kept}", "deepwork:build"}


def test_a_deepwork_session_starting_frees_no_name(project, agent, catalog):
    kept = define(project)
    named(project, "deepwork:demo", "demo")
    session_start(
        project=project,
        agent=agent,
        catalog=catalog.view(),
        job_name="demo",
        workflow_name="main",
        goal="g",
    )
    assert names(project) == {f"dag:{kept}", "deepwork:demo"}


class ChangedMind(Exception):
    pass


def test_the_name_stays_when_the_execution_or_deletion_rolls_back(project):
    wid = define(project)
    seen: list[set[str]] = []

    def execute_then_roll_back() -> None:
        with transaction.atomic():
            dag.dag_execute(project=project, workflow_id=wid, triggering_agent_id="lead")
            seen.append(names(project))
            raise ChangedMind

    def delete_then_roll_back() -> None:
        with transaction.atomic():
            dag.dag_delete(project=project, workflow_id=wid, requesting_agent_id="lead")
            seen.append(names(project))
            raise ChangedMind

    for attempt in (execute_then_roll_back, delete_then_roll_back):
        with pytest.raises(ChangedMind):
            attempt()
        assert names(project) == {f"dag:{wid}"}  # back with the rollback
    assert seen == [set(), set()]  # freed inside each transaction
