"""What the published-workflows endpoints do, kept out of ``api.api``: each builds the
project's DeepWork source and calls it, so REST answers as the MCP workflow tools do."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import User

from api.errors import ApiError
from api.wftools_schemas import RunStartIn
from workflows.dialects.deepwork_source import DeepWorkSource
from workflows.selectors.catalog import project_get
from workflows.services.catalog import catalog_view
from workflows.workflow_sources import PublishedWorkflow, arguments_refusal


def _source(project_id: int) -> DeepWorkSource:
    project = project_get(project_id=project_id)
    return DeepWorkSource(project=lambda: project, view=lambda: catalog_view(project=project))


def published_list(*, project_id: int) -> dict[str, Any]:
    workflows = _source(project_id).workflows()
    return {"count": len(workflows), "results": [workflow.wire() for workflow in workflows]}


def _find(source: DeepWorkSource, workflow_id: str) -> PublishedWorkflow:
    for workflow in source.workflows():
        if workflow.id == workflow_id:
            return workflow
    raise ApiError(404, "not_found", f"No published workflow has the id '{workflow_id}'")


def run_start(*, project_id: int, body: RunStartIn, user: User) -> dict[str, Any]:
    from jsonschema.validators import validator_for

    source = _source(project_id)
    workflow = _find(source, body.workflow_id)
    schema = dict(workflow.input_schema)
    errors = list(validator_for(schema)(schema).iter_errors(body.input))
    if errors:
        raise ApiError(400, "invalid_input", arguments_refusal(workflow.id, errors))
    started = source.start(
        workflow=workflow,
        arguments=body.input,
        agent_id=body.agent_id or f"api:{user.get_username()}",
    )
    return {
        "run_id": started.run_id,
        "workflow_id": started.workflow_id,
        "status": started.status,
        "result": started.result.model_dump(mode="json"),
    }


def run_status(*, project_id: int, run_id: str) -> dict[str, Any]:
    return _source(project_id).status(run_id=run_id).wire()


def run_cancel(*, project_id: int, run_id: str, reason: str, user: User) -> dict[str, Any]:
    return _source(project_id).cancel(run_id=run_id, reason=reason, by=user).wire()
