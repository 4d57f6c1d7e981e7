"""REST for multi-agent DAG workflows, under /api/dag/.

The same services and wire models as the ``agents`` MCP toolset, the API's tokens and its one
error shape. Reads need ``workflows.view_workflowsession``; defining, executing and deleting
need ``workflows.drive_session``; a person completing or failing a human step needs
``dag.decide_human_step``.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from django.http import HttpRequest
from ninja import Router, Schema, Status
from ninja.params.functions import Path, Query
from pydantic import Field

from accounts.identity import identity_agent_id, identity_project_check, identity_project_scope
from accounts.people import signed_in_user
from api.auth import DECIDE_HUMAN_STEP, DRIVE, VIEW, TokenAuth, caller, via
from api.common import ACTION_ERRORS, READ_ERRORS, served, served_project
from dag import selectors, services
from dag.schemas import (
    DagDefineResponse,
    DagDelegatedOut,
    DagDeleteResponse,
    DagExecuteResponse,
    DagIssueOut,
    DagListResponse,
    DagReportResponse,
    DagStepResultOut,
    DagWorkflowOut,
    DagWorkflowSummary,
)
from workflows.liveness import responsive_seconds
from workflows.models import Job
from workflows.selectors.catalog import project_get

router = Router(tags=["dag"])

WorkflowId = Annotated[str, Path(min_length=1, max_length=255)]
StepId = Annotated[str, Path(min_length=1, max_length=255)]
AgentIdField = Field(min_length=1, max_length=128, description="An agent id.")


class DagDefineIn(Schema):
    project: int = Field(ge=1, le=2**63 - 1, description="Project id.")
    creator_id: str = AgentIdField
    name: str = Field(min_length=1, max_length=255)
    description: str | None = Field(default=None, max_length=20_000)
    steps: list[Any] = Field(description="The step objects, as define_workflow takes them.")
    execution_type: Literal["sync", "async"] | None = Field(
        default=None,
        description="How the workflow's own tool (workflow-tools) runs it; async by default.",
    )


class DagExecuteIn(Schema):
    triggering_agent_id: str = AgentIdField


class DagDeleteIn(Schema):
    requesting_agent_id: str = AgentIdField
    force: bool = False


class DagCompleteIn(Schema):
    result: Any = None


class DagFailIn(Schema):
    error_message: str = Field(min_length=1, max_length=20_000)


class DagAgentRow(Schema):
    agent_id: str
    roles: list[str]
    last_heartbeat: str | None
    responsive: bool
    state: str  # responsive, silent (lease ran out) or gone (left cleanly)
    load: int


class DagAgentList(Schema):
    items: list[DagAgentRow]
    responsive_seconds: float


def _job(request: HttpRequest, workflow_id: str) -> Job:
    """The defined workflow ``workflow_id``, if this request's identity may see its project."""
    job = selectors.dag_job_by_id(workflow_id)
    identity_project_check(caller(request), job.project_id, f"workflow {workflow_id!r}")
    return job


def _delegation(advance: services.Advance) -> dict[str, Any]:
    return {
        "delegated": [
            DagDelegatedOut(step_id=d.step_id, agent_id=d.agent_id) for d in advance.delegated
        ],
        "issues": [DagIssueOut(step_id=i.step_id, reason=i.reason) for i in advance.issues],
    }


@router.get("/workflows", response={200: DagListResponse, **READ_ERRORS}, auth=TokenAuth(VIEW))
def list_dag_workflows(
    request: HttpRequest,
    project: Annotated[int | None, Query(ge=1, le=2**63 - 1)] = None,
    creator_id: Annotated[str | None, Query(min_length=1, max_length=128)] = None,
) -> DagListResponse:
    """Defined workflows (id, name, creator, step count, status), newest first; one project's
    or one creator's with the filters."""
    identity = caller(request)
    project = identity_project_scope(identity, project)
    scope = project_get(project_id=project) if project is not None else None
    creator = None if creator_id is None else identity_agent_id(identity, creator_id, acting=False)
    rows = selectors.dag_summaries(project=scope, creator_id=creator)
    return DagListResponse(
        workflows=[DagWorkflowSummary.model_validate(r) for r in rows], count=len(rows)
    )


@router.get(
    "/workflows/{workflow_id}",
    response={200: DagWorkflowOut, **READ_ERRORS},
    auth=TokenAuth(VIEW),
)
def get_dag_workflow(request: HttpRequest, workflow_id: WorkflowId) -> DagWorkflowOut:
    """The full workflow: definition, status, and every step's status, agent, result and
    timing."""
    return DagWorkflowOut.model_validate(selectors.dag_details(job=_job(request, workflow_id)))


@router.get(
    "/workflows/{workflow_id}/steps/{step_id}/result",
    response={200: DagStepResultOut, **READ_ERRORS},
    auth=TokenAuth(VIEW),
)
def get_dag_step_result(
    request: HttpRequest,
    workflow_id: WorkflowId,
    step_id: StepId,
    offset: Annotated[int, Query(ge=0, le=2**62)] = 0,
) -> DagStepResultOut:
    """One step's result as its JSON text, a page at a time (results too big to show with the
    workflow are left out there): ask again with `next_offset` until it is null."""
    return DagStepResultOut.model_validate(
        selectors.dag_step_result(
            job=selectors.dag_job_by_id(workflow_id), step_id=step_id, offset=offset
        )
    )


@router.post(
    "/workflows", response={201: DagDefineResponse, **ACTION_ERRORS}, auth=TokenAuth(DRIVE)
)
def define_dag_workflow(request: HttpRequest, body: DagDefineIn) -> Status[DagDefineResponse]:
    """Define a workflow in a project, checked as `define_workflow` checks it. The creator is
    the caller: a token agent's own id or one of its sub-agents."""
    identity = caller(request)
    defined = services.dag_define(
        project=served_project(request, body.project),
        creator_id=identity_agent_id(identity, body.creator_id, acting=True),
        name=body.name,
        description=body.description,
        steps=body.steps,
        execution_type=body.execution_type,
    )
    details = DagWorkflowOut.model_validate(selectors.dag_details(job=defined.job))
    return Status(
        201,
        DagDefineResponse(
            message=f"Workflow {details.workflow_id!r} defined with {details.step_count} "
            "step(s); status pending.",
            workflow=details,
            warnings=defined.warnings,
        ),
    )


@router.post(
    "/workflows/{workflow_id}/execute",
    response={200: DagExecuteResponse, **ACTION_ERRORS},
    auth=TokenAuth(DRIVE),
)
def execute_dag_workflow(
    request: HttpRequest, workflow_id: WorkflowId, body: DagExecuteIn
) -> DagExecuteResponse:
    """Start the workflow's one run (its creator, the creator's sub-agents, or a person with
    `workflows.drive_session` through a token not allowed MCP); the answer lists the steps
    delegated and any issues."""
    identity = caller(request)
    job = _job(request, workflow_id)
    advance = services.dag_execute(
        project=served(job.project),
        workflow_id=workflow_id,
        triggering_agent_id=identity_agent_id(identity, body.triggering_agent_id, acting=True),
        by=identity.person,
    )
    return DagExecuteResponse(
        message=f"Workflow {workflow_id!r} started: {len(advance.delegated)} step(s) delegated",
        workflow_id=workflow_id,
        status=advance.status,
        **_delegation(advance),
    )


@router.post(
    "/workflows/{workflow_id}/delete",
    response={200: DagDeleteResponse, **ACTION_ERRORS},
    auth=TokenAuth(DRIVE),
)
def delete_dag_workflow(
    request: HttpRequest, workflow_id: WorkflowId, body: DagDeleteIn
) -> DagDeleteResponse:
    """Delete a workflow: only its creator (the caller, never merely named in the body), and a
    running one only with `force`."""
    job = _job(request, workflow_id)
    status = services.dag_delete(
        project=job.project,
        workflow_id=workflow_id,
        requesting_agent_id=identity_agent_id(
            caller(request), body.requesting_agent_id, acting=True
        ),
        force=body.force,
    )
    return DagDeleteResponse(
        message=f"Workflow {workflow_id!r} ({status}) deleted.", workflow_id=workflow_id
    )


def _person_answer(report: services.Report, verb: str) -> DagReportResponse:
    return DagReportResponse(
        message=report.note or f"Step {report.step_id!r} {verb}; workflow is {report.status}",
        workflow_id=report.workflow_id,
        step_id=report.step_id,
        workflow_status=report.status,
        already_reported=report.already,
        **_delegation(report.advance),
    )


@router.post(
    "/workflows/{workflow_id}/steps/{step_id}/complete",
    response={200: DagReportResponse, **ACTION_ERRORS},
    auth=TokenAuth(DECIDE_HUMAN_STEP),
)
def complete_human_step(
    request: HttpRequest, workflow_id: WorkflowId, step_id: StepId, body: DagCompleteIn
) -> DagReportResponse:
    """Complete a human step (role `human`, or assigned to `user:<you>`) with a result."""
    _job(request, workflow_id)
    report = services.dag_person_report(
        workflow_id=workflow_id,
        step_id=step_id,
        by=signed_in_user(request),
        via=via(request),
        result=body.result,
    )
    return _person_answer(report, "completed")


@router.post(
    "/workflows/{workflow_id}/steps/{step_id}/fail",
    response={200: DagReportResponse, **ACTION_ERRORS},
    auth=TokenAuth(DECIDE_HUMAN_STEP),
)
def fail_human_step(
    request: HttpRequest, workflow_id: WorkflowId, step_id: StepId, body: DagFailIn
) -> DagReportResponse:
    """Fail a human step, saying why; the workflow fails with it."""
    _job(request, workflow_id)
    report = services.dag_person_report(
        workflow_id=workflow_id,
        step_id=step_id,
        by=signed_in_user(request),
        via=via(request),
        error_message=body.error_message,
    )
    return _person_answer(report, "failed")


@router.get("/agents", response={200: DagAgentList, **READ_ERRORS}, auth=TokenAuth(VIEW))
def list_dag_agents(
    request: HttpRequest, project: Annotated[int, Query(ge=1, le=2**63 - 1)]
) -> DagAgentList:
    """A project's agents: roles, last heartbeat, whether responsive, and steps held."""
    identity_project_check(caller(request), project)
    rows = selectors.dag_agents(project=project_get(project_id=project))
    return DagAgentList(
        items=[DagAgentRow.model_validate(row) for row in rows],
        responsive_seconds=responsive_seconds(),
    )
