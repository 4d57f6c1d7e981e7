"""What the published-workflows endpoints do, kept out of ``api.api``: each builds the
project's local sources (its DeepWork jobs, its DAG workflows) and calls them, so REST answers
as the MCP workflow tools do. A DAG workflow's run id is ``dag:<workflow_id>``, as there."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import User

from api.errors import ApiError
from api.wftools_schemas import RunStartIn
from workflows import json_schemas
from workflows.dag_source import DAG_SOURCE_KEY, DagSource
from workflows.dialects.deepwork_source import DeepWorkSource
from workflows.selectors.catalog import project_get
from workflows.services.catalog import catalog_view
from workflows.workflow_sources import (
    PublishedWorkflow,
    WorkflowSource,
    arguments_problem,
    input_validator,
)

DAG_PREFIX = f"{DAG_SOURCE_KEY}:"


def _sources(project_id: int) -> tuple[DeepWorkSource, DagSource]:
    project = project_get(project_id=project_id)
    return (
        DeepWorkSource(project=lambda: project, view=lambda: catalog_view(project=project)),
        DagSource(project=lambda: project),
    )


def _for_run(project_id: int, run_id: str) -> tuple[WorkflowSource, str]:
    deepwork, dag = _sources(project_id)
    if run_id.startswith(DAG_PREFIX):
        return dag, run_id.removeprefix(DAG_PREFIX)
    return deepwork, run_id


def published_list(*, project_id: int) -> dict[str, Any]:
    workflows = [wf for source in _sources(project_id) for wf in source.workflows()]
    return {"count": len(workflows), "results": [workflow.wire() for workflow in workflows]}


def _find(project_id: int, workflow_id: str) -> tuple[WorkflowSource, PublishedWorkflow]:
    for source in _sources(project_id):
        for workflow in source.workflows():
            if workflow.id == workflow_id:
                return source, workflow
    raise ApiError(404, "not_found", f"No published workflow has the id '{workflow_id}'")


def run_start(*, project_id: int, body: RunStartIn, user: User) -> dict[str, Any]:
    source, workflow = _find(project_id, body.workflow_id)
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
        agent_id=body.agent_id or f"api:{user.get_username()}",
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


def run_cancel(*, project_id: int, run_id: str, reason: str, user: User) -> dict[str, Any]:
    source, local_id = _for_run(project_id, run_id)
    return {**source.cancel(run_id=local_id, reason=reason, by=user).wire(), "run_id": run_id}
