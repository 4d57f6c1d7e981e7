"""Published workflows over REST, at /api/projects/{project_id}/published-workflows: the list
another server's `mcpserve --workflow-source` reads, and the runs it starts, follows and
cancels. What each operation does is in ``api.routers.published_workflows_runs``."""

from __future__ import annotations

from typing import Annotated, Any

from django.http import HttpRequest
from ninja import Router, Status
from ninja.params.functions import Path

from accounts.identity import identity_project_check
from api.auth import ABORT, DRIVE, VIEW, TokenAuth, caller
from api.common import ACTION_ERRORS, MAX_ID, READ_ERRORS, served_project
from api.routers.published_workflows_runs import published_list, run_cancel, run_start, run_status
from api.routers.published_workflows_schemas import (
    PublishedWorkflowList,
    RunCancelIn,
    RunStartedOut,
    RunStartIn,
    RunStatusOut,
)
from api.schemas import ErrorOut, Name

PUBLISHED = "/{project_id}/published-workflows"
ProjectId = Annotated[int, Path(ge=1, le=MAX_ID)]

router = Router()


@router.get(
    PUBLISHED,
    response={200: PublishedWorkflowList, **READ_ERRORS, 409: ErrorOut},
    tags=["published workflows"],
    auth=TokenAuth(VIEW),
)
def list_published_workflows(request: HttpRequest, project_id: ProjectId) -> dict[str, Any]:
    """The project's published workflows as a workflow list: `{"count", "results"}`,
    each `{id, name, description, category, version, inputSchema, executionType, metadata}`."""
    identity_project_check(caller(request), project_id)
    return published_list(project_id=project_id)


@router.post(
    PUBLISHED + "/runs",
    response={201: RunStartedOut, **ACTION_ERRORS},
    tags=["published workflows"],
    auth=TokenAuth(DRIVE),
)
def start_published_workflow(
    request: HttpRequest, project_id: ProjectId, body: RunStartIn
) -> Status[dict[str, Any]]:
    """Start a published workflow with `input` (checked against its inputSchema; a refusal
    names the path and the rule). A DeepWork workflow's run is a session on the agent's stack;
    `result` is its first step, as `start_workflow` answers. A DAG workflow is executed (run
    id `dag:<workflow_id>`); `result` lists the steps delegated and waiting."""
    served_project(request, project_id)
    return Status(201, run_start(project_id=project_id, body=body, identity=caller(request)))


@router.get(
    PUBLISHED + "/runs/{run_id}",
    response={200: RunStatusOut, **READ_ERRORS},
    tags=["published workflows"],
    auth=TokenAuth(VIEW),
)
def get_published_run(request: HttpRequest, project_id: ProjectId, run_id: Name) -> dict[str, Any]:
    """A run's status: RUNNING, COMPLETED, FAILED or CANCELLED, with progress, result, error."""
    identity_project_check(caller(request), project_id)
    return run_status(project_id=project_id, run_id=run_id)


@router.post(
    PUBLISHED + "/runs/{run_id}/cancel",
    response={200: RunStatusOut, **ACTION_ERRORS},
    tags=["published workflows"],
    # Also an agent's own call (another server's workflow source cancels the runs its agents
    # started): a person cancels any run, as theirs; an agent's token only its own runs, as
    # its agent (``run_cancel``).
    auth=TokenAuth(ABORT, agents=True),
)
def cancel_published_run(
    request: HttpRequest, project_id: ProjectId, run_id: Name, body: RunCancelIn
) -> dict[str, Any]:
    """Cancel a running run (a DeepWork session is aborted, a DAG run fails): a person's
    token any run, recorded as theirs with the token; an MCP agent's token only the runs of
    its own agent (for a DAG run: its creator's family), recorded as the agent's."""
    identity_project_check(caller(request), project_id)
    return run_cancel(
        project_id=project_id, run_id=run_id, reason=body.reason, identity=caller(request)
    )
