"""The REST API: one NinjaAPI mounted at /api/.

Every operation needs ``Authorization: Bearer <token>`` (see ``api.auth``); the OpenAPI
document (/api/openapi.json) and its Swagger page (/api/docs) are public, as they hold no
data. Reads need ``workflows.view_workflowsession``; the actions need the permission named on
each. Finishing a step with ``override_reason`` skips its review, so it also needs
``reviews.decide_review``. Actions call the same services as the MCP tools and answer with the
same wire models, rendered by the same DeepWork dialect.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from functools import wraps
from typing import Annotated, Any

from asgiref.sync import async_to_sync
from django.http import HttpRequest, HttpResponse, HttpResponseNotAllowed
from django.urls import URLPattern, URLResolver, path
from django.utils import timezone
from django.views.decorators.csrf import csrf_exempt
from ninja import NinjaAPI, Status
from ninja.operation import Operation

# The functions, not ninja's ``Path``/``Query`` shortcuts: ``Annotated[int, Query(ge=1)]`` is
# what the shortcuts build at runtime, and the one spelling mypy also accepts.
from ninja.params.functions import Path, Query

from accounts.identity import (
    ADD_PROJECT,
    identity_agent_id,
    identity_project_add_check,
    identity_project_check,
    identity_project_scope,
    identity_session_check,
)
from api import errors
from api.auth import ABORT, DECIDE, DRIVE, VIEW, TokenAuth, caller
from api.common import ACTION_ERRORS, MAX_ID, READ_ERRORS
from api.errors import ApiError, error_body
from api.routers.tracker import router as tracker_router
from api.schemas import (
    AbortIn,
    CatalogOut,
    Cursor,
    DecisionOut,
    ErrorOut,
    EventPage,
    FinishIn,
    GoToStepIn,
    Name,
    OverrideIn,
    ProjectAddedOut,
    ProjectAddIn,
    ProjectOut,
    ProjectPage,
    RequestChangesIn,
    SessionDetailOut,
    SessionPage,
    SessionQuery,
    StartIn,
)
from deepwork_site.auth import signed_in_user
from reviews.models import HumanDecision
from reviews.selectors import session_with_reviews
from reviews.services import GateConfig, review_override, review_request_changes, step_finish_gated
from workflows.dialects import deepwork
from workflows.models import Project, WorkflowSession
from workflows.schemas import (
    AbortWorkflowResponse,
    FinishedStepResponse,
    GoToStepResponse,
    StartWorkflowResponse,
)
from workflows.selectors.catalog import project_catalogs, project_get, project_page
from workflows.selectors.events import events_after
from workflows.selectors.sessions import (
    SessionFilter,
    session_get,
    session_page,
    step_run_for_decision,
)
from workflows.services.catalog import catalog_view
from workflows.services.projects import project_add

# A REST client finishing a step that has reviews gets what an agent without an external
# reviewer gets: ``needs_work`` with self-review instructions written under .deepwork/tmp.
# Then someone who may rule on reviews passes it: a hand-in with ``override_reason``, or
# POST .../override.
REST_GATE = GateConfig()


class DeepworkAPI(NinjaAPI):
    """NinjaAPI whose every answer under /api/, including an unknown path or method, is JSON
    in the one error shape."""

    def _get_urls(self) -> list[URLResolver | URLPattern]:
        urls = super()._get_urls()
        for pattern in urls:
            if isinstance(pattern, URLPattern):
                if pattern.name == "api-root":
                    pattern.callback = _unknown_path
                else:
                    pattern.callback = _json_not_allowed(pattern.callback)
        # Last, so it only catches what no operation matched.
        urls.append(path("<path:unknown>", _unknown_path))
        return urls

    def get_openapi_operation_id(self, operation: Operation) -> str:
        return operation.view_func.__name__


def _error_response(request: HttpRequest, status: int, code: str, message: str) -> HttpResponse:
    return HttpResponse(
        api.renderer.render(request, error_body(status, code, message), response_status=status),
        status=status,
        content_type=api.get_content_type(),
    )


@csrf_exempt
def _unknown_path(request: HttpRequest, **kwargs: object) -> HttpResponse:
    return _error_response(
        request, 404, "not_found", f"No API operation at {request.path}; see /api/docs"
    )


def _json_not_allowed(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    @wraps(view)
    def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        response = view(request, *args, **kwargs)
        if isinstance(response, HttpResponseNotAllowed):
            allowed = response["Allow"]
            response = _error_response(
                request,
                405,
                "method_not_allowed",
                f"{request.method} is not allowed here; use {allowed}",
            )
            response["Allow"] = allowed
        return response

    return wrapper


api = DeepworkAPI(
    title="deepwork-server",
    version="1",
    urls_namespace="api",
    description=__doc__,
    # Each operation names its permission; an operation that forgets to is still not public.
    auth=TokenAuth(VIEW),
)
errors.install(api)
# Each context's operations in a router of their own (the rest still below, in this module).
api.add_router("/tracker", tracker_router)


def _session(request: HttpRequest, session_id: str) -> WorkflowSession:
    """The session ``session_id``, if this request's identity may see its project."""
    session = session_get(session_id=session_id)
    identity_project_check(caller(request), session.project_id, f"session {session_id!r}")
    return session


def _acted_on(request: HttpRequest, session_id: str) -> WorkflowSession:
    """The session ``session_id``, if this request's identity may act as its agent."""
    session = session_get(session_id=session_id)
    identity_session_check(
        caller(request), project_id=session.project_id, agent_id=session.agent.agent_id
    )
    return session


def _project(request: HttpRequest, project_id: int) -> Project:
    identity_project_check(caller(request), project_id)
    return project_get(project_id=project_id)


EARLIEST = datetime.min.replace(tzinfo=UTC)
LATEST = datetime.max.replace(tzinfo=UTC)


def _utc(value: datetime | None) -> datetime | None:
    """``value`` in UTC (a naive one is taken as UTC). A moment beyond what the database
    stores, e.g. 0001-01-01T00:00+01:00, becomes the earliest or latest one: as a bound it
    selects the same sessions."""
    if value is None:
        return None
    if timezone.is_naive(value):
        return value.replace(tzinfo=UTC)
    try:
        return value.astimezone(UTC)
    except OverflowError:
        return EARLIEST if value.year == datetime.min.year else LATEST


# Reads


@api.get(
    "/projects", response={200: ProjectPage, **READ_ERRORS}, tags=["projects"], auth=TokenAuth(VIEW)
)
def list_projects(
    request: HttpRequest,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
    offset: Annotated[int, Query(ge=0, le=10**9)] = 0,
) -> dict[str, Any]:
    """Projects by name, `limit` at a time from `offset`, with the total `count` (a token
    bound to a project lists that one)."""
    bound = caller(request).project_id
    if bound is not None:
        return {"items": [project_get(project_id=bound)][offset : offset + limit], "count": 1}
    items, count = project_page(limit=limit, offset=offset)
    return {"items": items, "count": count}


@api.get(
    "/projects/{project_id}",
    response={200: ProjectOut, **READ_ERRORS},
    tags=["projects"],
    auth=TokenAuth(VIEW),
)
def get_project(request: HttpRequest, project_id: Annotated[int, Path(ge=1, le=MAX_ID)]) -> Project:
    """One project."""
    return _project(request, project_id)


@api.get(
    "/projects/{project_id}/jobs",
    response={200: CatalogOut, **READ_ERRORS},
    tags=["projects"],
    auth=TokenAuth(VIEW),
)
def list_jobs(
    request: HttpRequest, project_id: Annotated[int, Path(ge=1, le=MAX_ID)]
) -> dict[str, Any]:
    """The project's jobs (current revisions) with their workflows and steps, and the job
    folders that currently fail to load, as last synced from the project folder."""
    [catalog] = project_catalogs(projects=[_project(request, project_id)], with_steps=True)
    return {"jobs": catalog.jobs, "errors": catalog.errors}


@api.get(
    "/sessions", response={200: SessionPage, **READ_ERRORS}, tags=["sessions"], auth=TokenAuth(VIEW)
)
def list_sessions(
    request: HttpRequest,
    filters: Annotated[SessionQuery, Query()],
    cursor: Annotated[
        Cursor | None, Query(description="`next_cursor` of the previous page.")
    ] = None,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
) -> dict[str, Any]:
    """Sessions, newest first, filtered; pages follow `next_cursor` (no total count)."""
    page = session_page(
        filters=SessionFilter(
            project_id=identity_project_scope(caller(request), filters.project),
            job=filters.job,
            status=filters.status,
            agent_id=filters.agent,
            started_after=_utc(filters.started_after),
            started_before=_utc(filters.started_before),
        ),
        limit=limit,
        before=cursor,
    )
    return {"items": page.sessions, "next_cursor": page.older}


@api.get(
    "/sessions/{session_id}",
    response={200: SessionDetailOut, **READ_ERRORS},
    tags=["sessions"],
    auth=TokenAuth(VIEW),
)
def get_session(request: HttpRequest, session_id: Name) -> WorkflowSession:
    """One session with its step runs, each with its review results and human decisions."""
    session = session_with_reviews(session_id=session_id)
    identity_project_check(caller(request), session.project_id, f"session {session_id!r}")
    return session


@api.get("/events", response={200: EventPage, **READ_ERRORS}, tags=["events"], auth=TokenAuth(VIEW))
def list_events(
    request: HttpRequest,
    after: Annotated[int, Query(ge=0, le=MAX_ID, description="Only events with a larger id.")] = 0,
    project: Annotated[int | None, Query(ge=1, le=MAX_ID, description="Project id.")] = None,
    session: Annotated[Name | None, Query(description="Session id.")] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 100,
) -> dict[str, Any]:
    """Events after an id, oldest first: the audit trail and a polling feed."""
    items, has_more = events_after(
        after=after,
        project_id=identity_project_scope(caller(request), project),
        session_id=session,
        limit=limit,
    )
    return {"items": items, "last_id": items[-1]["id"] if items else after, "has_more": has_more}


# Actions: the services the MCP tools call, with the same validation and answers.


@api.post(
    "/projects",
    response={200: ProjectAddedOut, 201: ProjectAddedOut, **ACTION_ERRORS},
    tags=["projects"],
    auth=TokenAuth(ADD_PROJECT),
)
def add_project(request: HttpRequest, body: ProjectAddIn) -> Status[dict[str, Any]]:
    """Serve a folder on the server as a project: 201 with its id, or 200 with the project
    that already serves it. A folder that is not there (yet) or that the server cannot read
    is added anyway, with a warning saying so: a server may mount it later. Needs
    `workflows.add_project` and a person's token (not an MCP agent's)."""
    identity_project_add_check(caller(request))
    added = project_add(root_path=body.root_path)
    project = added.project
    return Status(
        201 if added.created else 200,
        {
            "id": project.pk,
            "name": project.name,
            "root_path": project.root_path,
            "created_at": project.created_at,
            "created": added.created,
            "folder_found": added.folder_found,
            "warnings": list(added.warnings),
        },
    )


@api.post(
    "/sessions",
    response={201: StartWorkflowResponse, **ACTION_ERRORS},
    tags=["actions"],
    auth=TokenAuth(DRIVE),
)
def start_workflow(request: HttpRequest, body: StartIn) -> Status[StartWorkflowResponse]:
    """Start a workflow on an agent's stack (by default the agent `api:<username>`) and get
    its first step, as `start_workflow` answers an agent."""
    user = signed_in_user(request)
    identity = caller(request)
    project = _project(request, body.project)
    agent_id = identity_agent_id(identity, body.agent_id, acting=True)
    catalog = catalog_view(project=project)
    answer = deepwork.start_workflow(
        project=project,
        agent_id=agent_id,
        catalog=catalog,
        job_name=body.job_name,
        workflow_name=body.workflow_name,
        goal=body.goal,
        instance_id=body.instance_id,
        by=user,
    )
    return Status(201, answer)


@api.post(
    "/sessions/{session_id}/finish",
    response={200: FinishedStepResponse, **ACTION_ERRORS},
    tags=["actions"],
    auth=TokenAuth(DRIVE),
)
def finish_step(request: HttpRequest, session_id: Name, body: FinishIn) -> FinishedStepResponse:
    """Hand in the current step's outputs, as `finished_step`: `needs_work` (with feedback or
    self-review instructions), `next_step` or `workflow_complete`. With `override_reason` the
    quality review is skipped, which also needs `reviews.decide_review`."""
    # Before anything is looked up or written: the override passes the gate on any session.
    if body.override_reason is not None and not request.user.has_perm(DECIDE):
        raise ApiError(
            403,
            "forbidden",
            f"Skipping the review with 'override_reason' needs the permission '{DECIDE}'",
        )
    session = _acted_on(request, session_id)
    outcome = async_to_sync(step_finish_gated)(
        project=session.project,
        agent=session.agent,
        gate=REST_GATE,
        outputs=body.outputs,
        notes=body.notes,
        override_reason=body.override_reason,
        session_id=session.session_id,
        by=signed_in_user(request),
    )
    return deepwork.finished_step(outcome)


@api.post(
    "/sessions/{session_id}/abort",
    response={200: AbortWorkflowResponse, **ACTION_ERRORS},
    tags=["actions"],
    auth=TokenAuth(ABORT),
)
def abort_session(request: HttpRequest, session_id: Name, body: AbortIn) -> AbortWorkflowResponse:
    """Abort the session; the reason and who aborted are recorded."""
    session = _session(request, session_id)
    return deepwork.abort_workflow(
        project=session.project,
        agent=session.agent,
        explanation=body.reason,
        session_id=session.session_id,
        by=signed_in_user(request),
    )


@api.post(
    "/sessions/{session_id}/go-to-step",
    response={200: GoToStepResponse, **ACTION_ERRORS},
    tags=["actions"],
    auth=TokenAuth(DRIVE),
)
def go_to_step(request: HttpRequest, session_id: Name, body: GoToStepIn) -> GoToStepResponse:
    """Return the session to an earlier step (or restart the current one), as `go_to_step`."""
    session = _acted_on(request, session_id)
    return deepwork.go_to_step(
        project=session.project,
        agent=session.agent,
        step_id=body.step_id,
        session_id=session.session_id,
        by=signed_in_user(request),
    )


@api.post(
    "/sessions/{session_id}/steps/{step_id}/override",
    response={201: DecisionOut, **ACTION_ERRORS},
    tags=["actions"],
    auth=TokenAuth(DECIDE),
)
def override_review(
    request: HttpRequest, session_id: Name, step_id: Name, body: OverrideIn
) -> Status[HumanDecision]:
    """Pass the current step's review: the agent's next finish advances."""
    run = step_run_for_decision(session=_session(request, session_id), step_id=step_id)
    decision = review_override(step_run=run, reason=body.reason, by=signed_in_user(request))
    return Status(201, decision)


@api.post(
    "/sessions/{session_id}/steps/{step_id}/request-changes",
    response={201: DecisionOut, **ACTION_ERRORS},
    tags=["actions"],
    auth=TokenAuth(DECIDE),
)
def request_changes(
    request: HttpRequest, session_id: Name, step_id: Name, body: RequestChangesIn
) -> Status[HumanDecision]:
    """Send the current step back: the agent's next finish answers `needs_work` with this
    feedback."""
    run = step_run_for_decision(session=_session(request, session_id), step_id=step_id)
    decision = review_request_changes(
        step_run=run, feedback=body.feedback, by=signed_in_user(request)
    )
    return Status(201, decision)


# Published workflows: the list another server's `mcpserve --workflow-source` reads,
# and the runs it starts, follows and cancels.

from api.wftools_schemas import (  # noqa: E402
    PublishedWorkflowList,
    RunCancelIn,
    RunStartedOut,
    RunStartIn,
    RunStatusOut,
)
from api.wftools_views import published_list, run_cancel, run_start, run_status  # noqa: E402

PUBLISHED = "/projects/{project_id}/published-workflows"
ProjectId = Annotated[int, Path(ge=1, le=MAX_ID)]


@api.get(
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


@api.post(
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
    identity_project_check(caller(request), project_id)
    return Status(201, run_start(project_id=project_id, body=body, identity=caller(request)))


@api.get(
    PUBLISHED + "/runs/{run_id}",
    response={200: RunStatusOut, **READ_ERRORS},
    tags=["published workflows"],
    auth=TokenAuth(VIEW),
)
def get_published_run(request: HttpRequest, project_id: ProjectId, run_id: Name) -> dict[str, Any]:
    """A run's status: RUNNING, COMPLETED, FAILED or CANCELLED, with progress, result, error."""
    identity_project_check(caller(request), project_id)
    return run_status(project_id=project_id, run_id=run_id)


@api.post(
    PUBLISHED + "/runs/{run_id}/cancel",
    response={200: RunStatusOut, **ACTION_ERRORS},
    tags=["published workflows"],
    auth=TokenAuth(ABORT),
)
def cancel_published_run(
    request: HttpRequest, project_id: ProjectId, run_id: Name, body: RunCancelIn
) -> dict[str, Any]:
    """Cancel a running run (a DeepWork session is aborted, a DAG run fails; recorded as
    yours)."""
    identity_project_check(caller(request), project_id)
    return run_cancel(
        project_id=project_id, run_id=run_id, reason=body.reason, identity=caller(request)
    )


# Multi-agent DAG workflows, in their own module.
from api.dag import router as dag_router  # noqa: E402

api.add_router("/dag", dag_router)
# Insights (issue 14): each insight's table as JSON or CSV, and a session's whole history.
# Kept together so this block merges apart from the others.

from api.insight_schemas import HistoryOut, InsightName, InsightOut, InsightQuery  # noqa: E402
from reviews.history import history_markdown, session_history  # noqa: E402
from reviews.insight_tables import insight_table  # noqa: E402
from workflows.selectors.insights import InsightFilter, insight_filter  # noqa: E402

CSV_ANSWER = {"200": {"content": {"text/csv": {"schema": {"type": "string"}}}}}
MARKDOWN_ANSWER = {"200": {"content": {"text/markdown": {"schema": {"type": "string"}}}}}


def _insight_filter(request: HttpRequest, query: InsightQuery) -> InsightFilter:
    project_id = identity_project_scope(caller(request), query.project)
    if project_id is not None:
        project_get(project_id=project_id)  # an unknown project is a 404, not an empty chart
    return insight_filter(
        since=query.since,
        until=query.until,
        project_id=project_id,
        job=query.job,
        workflow=query.workflow,
        agent_id=query.agent,
        dialect=query.dialect,
        # Any range the schema allows is answered: a backwards one is empty, a longer one is
        # cut to the limit, and the answer's notes say so.
        clamp=True,
    )


@api.get(
    "/insights/{name}",
    response={200: InsightOut, **READ_ERRORS},
    tags=["insights"],
    auth=TokenAuth(VIEW),
)
def get_insight(
    request: HttpRequest, name: InsightName, query: Annotated[InsightQuery, Query()]
) -> dict[str, Any]:
    """One insight's table (`columns`, `rows`), as the dashboard's insights pages draw it."""
    filters = _insight_filter(request, query)
    return insight_table(name=name, filters=filters).as_json(filters)


@api.get(
    "/insights/{name}/csv",
    response={**READ_ERRORS},
    tags=["insights"],
    auth=TokenAuth(VIEW),
    openapi_extra={"responses": CSV_ANSWER},
)
def get_insight_csv(
    request: HttpRequest, name: InsightName, query: Annotated[InsightQuery, Query()]
) -> HttpResponse:
    """The same table as CSV: a header row, then one row per line."""
    filters = _insight_filter(request, query)
    response = HttpResponse(
        insight_table(name=name, filters=filters).as_csv(), content_type="text/csv; charset=utf-8"
    )
    response["Content-Disposition"] = f'attachment; filename="{name}.csv"'
    return response


@api.get(
    "/sessions/{session_id}/history",
    response={200: HistoryOut, **READ_ERRORS},
    tags=["sessions"],
    auth=TokenAuth(VIEW),
)
def get_session_history(request: HttpRequest, session_id: Name) -> dict[str, Any]:
    """The session's whole history: its step runs with outputs and notes, every review and
    person's ruling, nested sessions and events (`events_truncated` past 10,000)."""
    _session(request, session_id)
    return session_history(session_id=session_id)


@api.get(
    "/sessions/{session_id}/history/markdown",
    response={**READ_ERRORS},
    tags=["sessions"],
    auth=TokenAuth(VIEW),
    openapi_extra={"responses": MARKDOWN_ANSWER},
)
def get_session_history_markdown(request: HttpRequest, session_id: Name) -> HttpResponse:
    """The same history as Markdown, for a post-mortem or a pull request."""
    _session(request, session_id)
    return HttpResponse(
        history_markdown(session_history(session_id=session_id)),
        content_type="text/markdown; charset=utf-8",
    )
