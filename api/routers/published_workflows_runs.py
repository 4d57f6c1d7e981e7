"""What the published-workflows endpoints do, kept out of their router: each builds the
project's local sources (its DeepWork jobs, its DAG workflows) and calls them, so REST answers
as the MCP workflow tools do. A DAG workflow's run id is ``dag:<workflow_id>``, as there."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from accounts.identity import Identity, identity_agent_id, identity_session_check, identity_via
from api.errors import ApiError
from api.routers.published_workflows_schemas import RunStartIn
from workflow_tools.dag_source import DAG_SOURCE_KEY, DagSource
from workflow_tools.deepwork_source import DeepWorkSource
from workflow_tools.sources import (
    PublishedWorkflow,
    WorkflowSource,
    arguments_problem,
    input_validator,
)
from workflows import json_schemas
from workflows.models import Agent
from workflows.selectors.catalog import project_get
from workflows.selectors.sessions import session_agent_id
from workflows.services.agents import agent_ensure
from workflows.services.catalog import catalog_view

DAG_PREFIX = f"{DAG_SOURCE_KEY}:"


def _sources(project_id: int, identity: Identity | None = None) -> tuple[DeepWorkSource, DagSource]:
    """The project's local sources, acting for ``identity``: its agent names mean what the
    identity rule says, and a token agent cancels as its agent, not as its person."""
    project = project_get(project_id=project_id)
    agent: Callable[[], Agent] | None = None
    if identity is not None and identity.agent_id is not None:
        own = identity.agent_id
        agent = lambda: agent_ensure(project=project, agent_id=own)  # noqa: E731
    return (
        DeepWorkSource(project=lambda: project, view=lambda: catalog_view(project=project)),
        DagSource(
            project=lambda: project,
            agent=agent,
            acting=(
                None
                if identity is None
                else lambda agent_id: identity_agent_id(identity, agent_id, acting=True)
            ),
            person=None if identity is None else identity.person,
        ),
    )


def _for_run(
    project_id: int, run_id: str, identity: Identity | None = None
) -> tuple[WorkflowSource, str]:
    deepwork, dag = _sources(project_id, identity)
    if run_id.startswith(DAG_PREFIX):
        return dag, run_id.removeprefix(DAG_PREFIX)
    return deepwork, run_id


def published_list(*, project_id: int) -> dict[str, Any]:
    workflows = [wf for source in _sources(project_id) for wf in source.workflows()]
    return {"count": len(workflows), "results": [workflow.wire() for workflow in workflows]}


def _find(
    project_id: int, workflow_id: str, identity: Identity
) -> tuple[WorkflowSource, PublishedWorkflow]:
    for source in _sources(project_id, identity):
        for workflow in source.workflows():
            if workflow.id == workflow_id:
                return source, workflow
    raise ApiError(404, "not_found", f"No published workflow has the id '{workflow_id}'")


def run_start(*, project_id: int, body: RunStartIn, identity: Identity) -> dict[str, Any]:
    source, workflow = _find(project_id, body.workflow_id, identity)
    try:
        validator = input_validator(workflow.input_schema)
    except json_schemas.SchemaProblem as exc:
        raise ApiError(
            500, "invalid_schema", f"The input schema of {workflow.id} is refused: {exc.message}"
        ) from None
    problem = arguments_problem(workflow.id, validator, body.input)
    if problem:
        raise ApiError(400, "invalid_input", problem)
    started = source.start(
        workflow=workflow,
        arguments=body.input,
        agent_id=identity_agent_id(identity, body.agent_id, acting=True),
    )
    result = started.result
    dag = source.key == DAG_SOURCE_KEY
    return {
        "run_id": DAG_PREFIX + started.run_id if dag else started.run_id,
        "workflow_id": started.workflow_id,
        "status": started.status,
        "result": result if dag else result.model_dump(mode="json"),
    }


def run_status(*, project_id: int, run_id: str) -> dict[str, Any]:
    source, local_id = _for_run(project_id, run_id)
    return {**source.status(run_id=local_id).wire(), "run_id": run_id}


def run_cancel(*, project_id: int, run_id: str, reason: str, identity: Identity) -> dict[str, Any]:
    """Cancel as the identity: a person (recorded as them, with the token), or a token agent
    as its agent, which may cancel only what it may (a DAG run: its creator's family; a
    DeepWork run: a session of its own agent, as ``abort_workflow`` over MCP)."""
    source, local_id = _for_run(project_id, run_id, identity)
    if identity.person is None and source.key != DAG_SOURCE_KEY:
        # An unknown run is the source's to refuse, in its words.
        held_by = session_agent_id(project=project_get(project_id=project_id), session_id=local_id)
        if held_by is not None:
            identity_session_check(identity, project_id=project_id, agent_id=held_by)
    status = source.cancel(
        run_id=local_id, reason=reason, by=identity.person, via=identity_via(identity)
    )
    return {**status.wire(), "run_id": run_id}
