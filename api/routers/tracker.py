"""The tracker over REST, at /api/tracker/: what orchestrating agents recorded (tracked
workflows, their task trees, decisions, issues and milestones), read page by page, and a
person's written answer to a blocker. Reads need ``workflows.view_workflowsession``; answering
a blocker needs ``tracker.resolve_blocker``."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from django.http import HttpRequest
from ninja import Router, Status
from ninja.params.functions import Path, Query

from accounts.identity import identity_project_check, identity_project_scope
from accounts.people import signed_in_user
from api.auth import RESOLVE_BLOCKER, VIEW, TokenAuth, caller, via
from api.common import ACTION_ERRORS, MAX_ID, READ_ERRORS
from api.routers.tracker_schemas import (
    IssueOut,
    IssuePage,
    MilestonePage,
    ResolveIn,
    SubtaskPage,
    TrackedDecisionPage,
    TrackedTaskPage,
    TrackedWorkflowDetailOut,
    TrackedWorkflowPage,
    TrackedWorkflowQuery,
)
from tracker.models import Decision, Issue, Milestone, TrackedWorkflow
from tracker.selectors import (
    SUBTASK_LIMIT,
    WORKFLOW_PROFILES,
    WORKFLOW_STATUSES,
    TrackedWorkflowFilter,
    issue_page,
    log_page,
    subtask_page,
    task_get_by_id,
    task_tree_page,
    tracked_workflow_detail,
    tracked_workflow_get,
    tracked_workflow_page,
)
from tracker.services import blocker_resolve

router = Router(tags=["tracker"])

TrackerCursor = Annotated[
    int | None, Query(ge=1, le=MAX_ID, description="`next_cursor` of the previous page.")
]
PageLimit = Annotated[int, Query(ge=1, le=200)]
SubtaskLimit = Annotated[
    int, Query(ge=1, le=200, description="Sub-tasks nested under each task, per level.")
]
WorkflowId = Annotated[int, Path(ge=1, le=MAX_ID)]


def _tracked(request: HttpRequest, workflow_id: int) -> TrackedWorkflow:
    workflow = tracked_workflow_get(workflow_id=workflow_id)
    identity_project_check(caller(request), workflow.project_id, f"tracked workflow {workflow_id}")
    return workflow


@router.get(
    "/workflows",
    response={200: TrackedWorkflowPage, **READ_ERRORS},
    auth=TokenAuth(VIEW),
)
def list_tracked_workflows(
    request: HttpRequest,
    filters: Annotated[TrackedWorkflowQuery, Query()],
    cursor: TrackerCursor = None,
    limit: PageLimit = 50,
) -> dict[str, Any]:
    """Tracked workflows, newest first, filtered; pages follow `next_cursor`."""
    items, following = tracked_workflow_page(
        filters=TrackedWorkflowFilter(
            project_id=identity_project_scope(caller(request), filters.project),
            status=WORKFLOW_STATUSES[filters.status] if filters.status else None,
            profile=WORKFLOW_PROFILES[filters.profile] if filters.profile else None,
            agent_id=filters.agent,
        ),
        limit=limit,
        before=cursor,
    )
    return {"items": items, "next_cursor": following}


@router.get(
    "/workflows/{workflow_id}",
    response={200: TrackedWorkflowDetailOut, **READ_ERRORS},
    auth=TokenAuth(VIEW),
)
def get_tracked_workflow(request: HttpRequest, workflow_id: WorkflowId) -> TrackedWorkflow:
    """One tracked workflow with its phases, latest progress and the sizes of its lists; the
    lists (tasks, decisions, issues, milestones) are paged at their own paths."""
    workflow = tracked_workflow_detail(workflow_id=workflow_id)
    identity_project_check(caller(request), workflow.project_id, f"tracked workflow {workflow_id}")
    return workflow


@router.get(
    "/workflows/{workflow_id}/tasks",
    response={200: TrackedTaskPage, **READ_ERRORS},
    auth=TokenAuth(VIEW),
)
def list_tracked_tasks(
    request: HttpRequest,
    workflow_id: WorkflowId,
    cursor: TrackerCursor = None,
    limit: PageLimit = 50,
    subtask_limit: SubtaskLimit = SUBTASK_LIMIT,
) -> dict[str, Any]:
    """The task tree: top-level tasks newest first, each with the first `subtask_limit` of its
    sub-tasks nested (and theirs, level by level), and each task's files changed. A task with
    more sub-tasks has a `subtasks_next_cursor` for `/api/tracker/tasks/{id}/subtasks`."""
    workflow = _tracked(request, workflow_id)
    items, following = task_tree_page(
        workflow=workflow, limit=limit, before=cursor, subtask_limit=subtask_limit
    )
    return {"items": items, "next_cursor": following}


@router.get(
    "/tasks/{task_id}/subtasks",
    response={200: SubtaskPage, **READ_ERRORS},
    auth=TokenAuth(VIEW),
)
def list_tracked_subtasks(
    request: HttpRequest,
    task_id: Annotated[int, Path(ge=1, le=MAX_ID)],
    cursor: TrackerCursor = None,
    limit: PageLimit = 50,
    subtask_limit: SubtaskLimit = SUBTASK_LIMIT,
) -> dict[str, Any]:
    """One task's sub-tasks, oldest first, each with the first `subtask_limit` of its own
    nested; pages follow `next_cursor` (or a task's `subtasks_next_cursor`)."""
    task = task_get_by_id(task_id=task_id)
    identity_project_check(caller(request), task.project_id, f"task {task_id}")
    items, following = subtask_page(
        task=task, limit=limit, after=cursor, subtask_limit=subtask_limit
    )
    return {"items": items, "next_cursor": following}


@router.get(
    "/workflows/{workflow_id}/decisions",
    response={200: TrackedDecisionPage, **READ_ERRORS},
    auth=TokenAuth(VIEW),
)
def list_tracked_decisions(
    request: HttpRequest,
    workflow_id: WorkflowId,
    cursor: TrackerCursor = None,
    limit: PageLimit = 50,
) -> dict[str, Any]:
    """The decisions the agents logged, newest first."""
    workflow = _tracked(request, workflow_id)
    items, following = log_page(workflow=workflow, model=Decision, limit=limit, before=cursor)
    return {"items": items, "next_cursor": following}


@router.get(
    "/workflows/{workflow_id}/issues",
    response={200: IssuePage, **READ_ERRORS},
    auth=TokenAuth(VIEW),
)
def list_tracked_issues(
    request: HttpRequest,
    workflow_id: WorkflowId,
    blockers: Annotated[
        Literal["open", "resolved"] | None,
        Query(description="Only blockers (issues needing a person): still open, or answered."),
    ] = None,
    cursor: TrackerCursor = None,
    limit: PageLimit = 50,
) -> dict[str, Any]:
    """The issues the agents logged, newest first, with people's answers to blockers."""
    workflow = _tracked(request, workflow_id)
    items, following = issue_page(workflow=workflow, limit=limit, before=cursor, blockers=blockers)
    return {"items": items, "next_cursor": following}


@router.get(
    "/workflows/{workflow_id}/milestones",
    response={200: MilestonePage, **READ_ERRORS},
    auth=TokenAuth(VIEW),
)
def list_tracked_milestones(
    request: HttpRequest,
    workflow_id: WorkflowId,
    cursor: TrackerCursor = None,
    limit: PageLimit = 50,
) -> dict[str, Any]:
    """The milestones the agents logged, newest first, with their progress."""
    workflow = _tracked(request, workflow_id)
    items, following = log_page(workflow=workflow, model=Milestone, limit=limit, before=cursor)
    return {"items": items, "next_cursor": following}


@router.post(
    "/issues/{issue_id}/resolve",
    response={201: IssueOut, **ACTION_ERRORS},
    auth=TokenAuth(RESOLVE_BLOCKER),
)
def resolve_blocker(
    request: HttpRequest, issue_id: Annotated[int, Path(ge=1, le=MAX_ID)], body: ResolveIn
) -> Status[Issue]:
    """Answer a blocker in writing, once (409 after that); the agent's next `get_context`
    lists it among `resolved_blockers` with who and when."""
    project_id = Issue.objects.filter(pk=issue_id).values_list("project_id", flat=True).first()
    if project_id is not None:
        identity_project_check(caller(request), project_id, f"issue {issue_id}")
    issue = blocker_resolve(
        issue_id=issue_id, by=signed_in_user(request), via=via(request), resolution=body.resolution
    )
    return Status(201, issue)
