"""Reads of the REST API. Each runs a fixed number of queries, whatever the number of rows."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from django.db.models import Prefetch, Q, QuerySet

from api.models import ApiToken
from reviews.models import HumanDecision, ReviewResult
from workflows.errors import InvalidInput, NotFound
from workflows.models import (
    Event,
    Job,
    JobLoadError,
    Project,
    Step,
    StepRun,
    Workflow,
    WorkflowSession,
    WorkflowStep,
)


def project_list(*, limit: int, offset: int) -> tuple[list[Project], int]:
    """A page of projects by name, and how many there are (a small table: counting is cheap)."""
    rows = list(Project.objects.order_by("name", "id")[offset : offset + limit])
    return rows, Project.objects.count()


def project_get(*, project_id: int) -> Project:
    project = Project.objects.filter(pk=project_id).first()
    if project is None:
        raise NotFound(f"Project {project_id} not found")
    return project


def project_catalog(*, project: Project) -> tuple[list[Job], list[JobLoadError]]:
    """The project's current job revisions with their steps and workflows (each workflow's
    nodes prefetched), and its load errors, as the last catalog sync by any process left
    them. Five queries."""
    jobs = list(
        Job.objects.filter(project=project, is_current=True)
        .defer("definition")
        .order_by("position", "id")
        .prefetch_related(
            Prefetch("steps", queryset=Step.objects.order_by("position", "id")),
            Prefetch("workflows", queryset=Workflow.objects.order_by("position", "id")),
            Prefetch(
                "workflows__nodes",
                # Only the step ids: the steps themselves come with the line above.
                queryset=WorkflowStep.objects.select_related("step")
                .only("workflow", "entry_index", "position_in_entry", "step__step_id")
                .order_by("entry_index", "position_in_entry"),
            ),
        )
    )
    errors = list(JobLoadError.objects.filter(project=project).order_by("position", "id"))
    return jobs, errors


@dataclass(frozen=True)
class SessionFilter:
    project_id: int | None = None
    job: str | None = None
    status: str | None = None
    agent_id: str | None = None
    started_after: datetime | None = None
    started_before: datetime | None = None


EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _encode_cursor(session: WorkflowSession) -> str:
    micros = (session.started_at - EPOCH) // timedelta(microseconds=1)
    return f"{micros}.{session.pk}"


def _decode_cursor(cursor: str) -> tuple[datetime, int]:
    # The API declares the cursor's pattern (see api.schemas.Cursor), so it parses.
    micros, pk = cursor.split(".")
    return EPOCH + timedelta(microseconds=int(micros)), int(pk)


def _sessions() -> QuerySet[WorkflowSession]:
    # The agent and parent give the agent id and the parent's session id of each row.
    return WorkflowSession.objects.select_related("agent", "parent")


def session_page(
    *, filters: SessionFilter, limit: int, cursor: str | None
) -> tuple[list[WorkflowSession], str | None]:
    """Newest sessions first, ``limit`` at a time, after ``cursor``: one query per page.

    A keyset on (started_at, id) rather than an offset and a total count: deep pages cost the
    same as the first, and nothing counts 100k rows on every page.
    """
    sessions = _sessions()
    if filters.project_id is not None:
        sessions = sessions.filter(project_id=filters.project_id)
    if filters.job is not None:
        job = filters.job
        sessions = sessions.filter(Q(job_name=job) | Q(job__name=job) | Q(job__dir_name=job))
    if filters.status is not None:
        sessions = sessions.filter(status=filters.status)
    if filters.agent_id is not None:
        sessions = sessions.filter(agent__agent_id=filters.agent_id)
    if filters.started_after is not None:
        sessions = sessions.filter(started_at__gte=filters.started_after)
    if filters.started_before is not None:
        sessions = sessions.filter(started_at__lt=filters.started_before)
    if cursor is not None:
        started_at, pk = _decode_cursor(cursor)
        sessions = sessions.filter(
            Q(started_at__lt=started_at) | Q(started_at=started_at, pk__lt=pk)
        )
    rows = list(sessions.order_by("-started_at", "-id")[: limit + 1])
    if len(rows) > limit:
        return rows[:limit], _encode_cursor(rows[limit - 1])
    return rows, None


def session_detail(*, session_id: str) -> WorkflowSession:
    """One session with its step runs, their review results and human decisions: four
    queries."""
    session = (
        _sessions()
        .prefetch_related(
            Prefetch("runs", queryset=StepRun.objects.order_by("entry_index", "id")),
            Prefetch("runs__reviews", queryset=ReviewResult.objects.order_by("id")),
            Prefetch("runs__decisions", queryset=HumanDecision.objects.order_by("id")),
        )
        .filter(session_id=session_id)
        .first()
    )
    if session is None:
        raise NotFound(f"Session '{session_id}' not found")
    return session


def session_for_action(*, session_id: str) -> WorkflowSession:
    """The session an action names, with the project and agent the services act through."""
    session = (
        WorkflowSession.objects.select_related("project", "agent")
        .filter(session_id=session_id)
        .first()
    )
    if session is None:
        raise NotFound(f"Session '{session_id}' not found")
    return session


def step_run_latest(*, session: WorkflowSession, step_id: str) -> StepRun:
    """The newest run of ``step_id`` in ``session``: the one a person rules on."""
    run = StepRun.objects.filter(session=session, step_id=step_id).order_by("-id").first()
    if run is None:
        raise NotFound(f"Step '{step_id}' has not run in session '{session.session_id}'")
    return run


def event_page(
    *, after: int, project_id: int | None, session_id: str | None, limit: int
) -> tuple[list[dict], bool]:
    """Events with id > ``after`` in id order, at most ``limit``: one query."""
    events = Event.objects.filter(id__gt=after)
    if project_id is not None:
        events = events.filter(project_id=project_id)
    if session_id is not None:
        # A scalar subquery for the session's key, so the planner walks the (session, id) index.
        events = events.filter(
            session=WorkflowSession.objects.filter(session_id=session_id).values("pk")[:1]
        )
    rows = list(
        events.order_by("id").values_list(
            "id",
            "kind",
            "project_id",
            "session__session_id",
            "agent__agent_id",
            "payload",
            "created_at",
        )[: limit + 1]
    )
    fields = ("id", "kind", "project_id", "session_id", "agent_id", "payload", "created_at")
    return [dict(zip(fields, row, strict=True)) for row in rows[:limit]], len(rows) > limit


def api_token_find(*, ref: str) -> ApiToken:
    """A token by id or by its whole visible prefix, as listed (for the management command).

    Never by a part of a prefix: an empty or short one would pick whatever single token
    happens to match, and revoking is what the command does with it.
    """
    tokens = ApiToken.objects.select_related("user")
    ref = ref.strip()
    if ref.isdigit() and len(ref) < 19:
        matches = list(tokens.filter(pk=int(ref)))
    else:
        prefix = ref.removesuffix("…")
        if not prefix:
            raise InvalidInput("Give the token's id or its whole prefix as listed")
        matches = list(tokens.filter(prefix=prefix)[:2])
    if not matches:
        raise NotFound(
            f"No API token has the id or prefix '{ref}'; give the id or the whole prefix "
            "as `api_token list` shows them"
        )
    if len(matches) > 1:
        # Prefixes carry 48 random bits: a clash is possible, if unlikely.
        raise NotFound(f"Several tokens have the prefix '{ref}'; give the id")
    return matches[0]


def api_token_list(*, username: str | None = None) -> list[ApiToken]:
    tokens = ApiToken.objects.select_related("user").order_by("user__username", "created_at")
    if username is not None:
        tokens = tokens.filter(user__username=username)
    return list(tokens)
