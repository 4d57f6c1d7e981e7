"""Sessions over REST, at /api/sessions: reading them and their whole history, and driving
them as an agent would (start, finish a step, go back, abort), plus a person's ruling on a
step's review. Actions call the same services as the MCP tools and answer with the same wire
models, rendered by the same DeepWork dialect."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any

from asgiref.sync import async_to_sync
from django.http import HttpRequest, HttpResponse
from django.utils import timezone
from ninja import Router, Status
from ninja.params.functions import Query

from accounts.identity import (
    identity_agent_id,
    identity_person_required,
    identity_project_check,
    identity_project_scope,
    identity_session_check,
)
from accounts.people import signed_in_user
from api.auth import ABORT, DECIDE, DRIVE, VIEW, TokenAuth, caller, via
from api.common import ACTION_ERRORS, READ_ERRORS, served, served_project
from api.errors import ApiError
from api.routers.insights_schemas import HistoryOut
from api.schemas import (
    AbortIn,
    Cursor,
    DecisionOut,
    FinishIn,
    GoToStepIn,
    Name,
    OverrideIn,
    RequestChangesIn,
    SessionDetailOut,
    SessionPage,
    SessionQuery,
    StartIn,
)
from reviews.gate import GateConfig
from reviews.history import history_markdown, session_history
from reviews.models import HumanDecision
from reviews.rulings import review_override, review_request_changes
from reviews.selectors import session_with_reviews
from reviews.services import step_finish_gated
from workflows.dialects import deepwork
from workflows.models import WorkflowSession
from workflows.schemas import (
    AbortWorkflowResponse,
    FinishedStepResponse,
    GoToStepResponse,
    StartWorkflowResponse,
)
from workflows.selectors.sessions import (
    SessionFilter,
    session_get,
    session_page,
    step_run_for_decision,
)
from workflows.services.catalog import catalog_view

# A REST client finishing a step that has reviews gets what an agent without an external
# reviewer gets: ``needs_work`` with self-review instructions written under .deepwork/tmp.
# Then someone who may rule on reviews passes it: a hand-in with ``override_reason``, or
# POST .../override.
REST_GATE = GateConfig()

MARKDOWN_ANSWER = {"200": {"content": {"text/markdown": {"schema": {"type": "string"}}}}}

router = Router()


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
    served(session.project)
    return session


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


@router.get("", response={200: SessionPage, **READ_ERRORS}, tags=["sessions"], auth=TokenAuth(VIEW))
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


@router.post(
    "",
    response={201: StartWorkflowResponse, **ACTION_ERRORS},
    tags=["actions"],
    auth=TokenAuth(DRIVE),
)
def start_workflow(request: HttpRequest, body: StartIn) -> Status[StartWorkflowResponse]:
    """Start a workflow on an agent's stack (by default the agent `api:<username>`) and get
    its first step, as `start_workflow` answers an agent."""
    identity = caller(request)
    project = served_project(request, body.project)
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
        by=identity.person,
    )
    return Status(201, answer)


@router.get(
    "/{session_id}",
    response={200: SessionDetailOut, **READ_ERRORS},
    tags=["sessions"],
    auth=TokenAuth(VIEW),
)
def get_session(request: HttpRequest, session_id: Name) -> WorkflowSession:
    """One session with its step runs, each with its review results and human decisions."""
    session = session_with_reviews(session_id=session_id)
    identity_project_check(caller(request), session.project_id, f"session {session_id!r}")
    return session


@router.post(
    "/{session_id}/finish",
    response={200: FinishedStepResponse, **ACTION_ERRORS},
    tags=["actions"],
    auth=TokenAuth(DRIVE),
)
def finish_step(request: HttpRequest, session_id: Name, body: FinishIn) -> FinishedStepResponse:
    """Hand in the current step's outputs, as `finished_step`: `needs_work` (with feedback or
    self-review instructions), `next_step` or `workflow_complete`. With `override_reason` the
    quality review is skipped, which also needs `reviews.decide_review`."""
    # Before anything is looked up or written: the override passes the gate on any session.
    identity = caller(request)
    if body.override_reason is not None:
        identity_person_required(identity, "skipping a review with 'override_reason'")
        if not request.user.has_perm(DECIDE):
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
        by=identity.person,
    )
    return deepwork.finished_step(outcome)


@router.post(
    "/{session_id}/abort",
    response={200: AbortWorkflowResponse, **ACTION_ERRORS},
    tags=["actions"],
    auth=TokenAuth(ABORT),
)
def abort_session(request: HttpRequest, session_id: Name, body: AbortIn) -> AbortWorkflowResponse:
    """Abort the session, a person's decision (an MCP agent's token aborts its own sessions
    over MCP); the reason, who aborted and through which credential are recorded."""
    session = _session(request, session_id)
    return deepwork.abort_workflow(
        project=session.project,
        agent=session.agent,
        explanation=body.reason,
        session_id=session.session_id,
        by=signed_in_user(request),
        via=via(request),
    )


@router.post(
    "/{session_id}/go-to-step",
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
        by=caller(request).person,
    )


@router.post(
    "/{session_id}/steps/{step_id}/override",
    response={201: DecisionOut, **ACTION_ERRORS},
    tags=["actions"],
    auth=TokenAuth(DECIDE),
)
def override_review(
    request: HttpRequest, session_id: Name, step_id: Name, body: OverrideIn
) -> Status[HumanDecision]:
    """Pass the current step's review: the agent's next finish advances."""
    run = step_run_for_decision(session=_session(request, session_id), step_id=step_id)
    decision = review_override(
        step_run=run, reason=body.reason, by=signed_in_user(request), via=via(request)
    )
    return Status(201, decision)


@router.post(
    "/{session_id}/steps/{step_id}/request-changes",
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
        step_run=run, feedback=body.feedback, by=signed_in_user(request), via=via(request)
    )
    return Status(201, decision)


@router.get(
    "/{session_id}/history",
    response={200: HistoryOut, **READ_ERRORS},
    tags=["sessions"],
    auth=TokenAuth(VIEW),
)
def get_session_history(request: HttpRequest, session_id: Name) -> dict[str, Any]:
    """The session's whole history: its step runs with outputs and notes, every review and
    person's ruling, nested sessions and events (`events_truncated` past 10,000)."""
    _session(request, session_id)
    return session_history(session_id=session_id)


@router.get(
    "/{session_id}/history/markdown",
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
