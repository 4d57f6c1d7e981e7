"""Reads of sessions and their step runs, for every interface (tools, REST, dashboard, admin)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from django.db import connection
from django.db.models import Count, IntegerField, OuterRef, Prefetch, Q, QuerySet, Subquery
from django.db.models.functions import Coalesce

from workflows import rows
from workflows.errors import Conflict, NotFound
from workflows.models import (
    Agent,
    Job,
    Project,
    StepRun,
    WorkflowSession,
    WorkflowStep,
)
from workflows.results import Stack, StackItem

NO_ACTIVE_SESSION = "No active workflow session. Use start_workflow to begin a workflow."

# Every tool answer carries the stack, and a transition reads its session first: these reads
# are written out (``workflows.rows``). They use wf_session_stack_idx (agent, status, id) or the
# session_id unique index.
_SESSIONS = WorkflowSession._meta.db_table
_ACTIVE = WorkflowSession.Status.ACTIVE.value
_STACK_SQL = (
    f"SELECT job_name, workflow_name, current_step_id FROM {_SESSIONS} "
    "WHERE agent_id = %s AND status = %s ORDER BY id"
)
# What a transition of the session row itself needs (``claim_session``, the answer, the event and
# the insight tallies it counts into); the other columns are deferred.
_HEAD = (
    "id",
    "session_id",
    "project_id",
    "agent_id",
    "job_id",
    "job_name",
    "workflow_name",
    "generation",
    "started_at",
    "status",
    "current_entry_index",
    "current_step_id",
    "revision",
)
# A session's job without its parsed definition, a large JSON document no 0.9 transition reads
# (it loads on first access, as a deferred field does).
JOB_FIELDS = tuple(f.attname for f in Job._meta.concrete_fields if f.name not in ("definition",))
# Named with the table: ``session_resolve`` joins the job's and the workflow's.
_TOP = f"{_SESSIONS}.agent_id = %s AND {_SESSIONS}.status = %s"
# The newer of the two: an OR over both columns would read every session the agent ever had
# (each branch here is one index: wf_session_stack_idx and the partial wf_session_untold_idx,
# whose condition the bare column repeats so the planner can use it).
_TOP_OR_UNTOLD = (
    f"{_SESSIONS}.id = (SELECT MAX(u.id) FROM ("
    f"SELECT id FROM {_SESSIONS} WHERE agent_id = %s AND status = %s "
    f"UNION ALL SELECT id FROM {_SESSIONS} WHERE agent_id = %s AND abort_untold) u)"
)
_BY_ID = f"{_SESSIONS}.project_id = %s AND {_SESSIONS}.session_id = %s"
_NEWEST = f"{_SESSIONS}.id DESC"


def _known(session: WorkflowSession, project: Project, agent: Agent) -> WorkflowSession:
    """``session`` with the caller's project and agent filled in where they are its own, so
    reading them costs no query."""
    if session.project_id == project.pk:
        session.project = project
    if session.agent_id == agent.pk:
        session.agent = agent
    return session


def stack_for_agent(*, agent: Agent) -> Stack:
    """The agent's active sessions, bottom to top."""
    with connection.cursor() as cursor:
        cursor.execute(_STACK_SQL, [agent.pk, _ACTIVE])
        rows = cursor.fetchall()
    return tuple(StackItem(job_name=job, workflow_name=wf, step_id=step) for job, wf, step in rows)


def stack_sessions(*, project: Project, agent: Agent) -> list[WorkflowSession]:
    """The agent's active sessions, bottom to top, each with what a transition of its own row
    needs (the fields ``session_head`` reads): the stack and its top in one read."""
    found = rows.select_models(
        WorkflowSession,
        where=_TOP,
        params=[agent.pk, _ACTIVE],
        fields=_HEAD,
        order_by=f"{_SESSIONS}.id",
    )
    return [_known(session, project, agent) for session in found]


def stack_of(sessions: list[WorkflowSession]) -> Stack:
    """What ``stack_for_agent`` answers, from sessions already read."""
    return tuple(
        StackItem(job_name=s.job_name, workflow_name=s.workflow_name, step_id=s.current_step_id)
        for s in sessions
    )


def _check_targetable(
    session: WorkflowSession | None, session_id: str | None, *, untold_aborts: bool = False
) -> WorkflowSession:
    if untold_aborts and session is not None and session.abort_untold:
        return session
    if session_id is None:
        if session is None:
            raise NotFound(NO_ACTIVE_SESSION)
        return session
    if session is None:
        raise NotFound(f"Session '{session_id}' not found in active stack")

    if session.status != WorkflowSession.Status.ACTIVE:
        raise NotFound(
            f"Session '{session_id}' is {session.status}; it is no longer in the active stack "
            "and cannot change"
        )
    return session


def session_agent_id(*, project: Project, session_id: str) -> str | None:
    """The agent id holding session ``session_id`` of ``project``, if there is such a session."""
    return (
        WorkflowSession.objects.filter(project=project, session_id=session_id)
        .values_list("agent__agent_id", flat=True)
        .first()
    )


def session_head(*, project: Project, agent: Agent, session_id: str | None) -> WorkflowSession:
    """``session_resolve`` for a transition that needs only the session row: its job and
    workflow are not loaded (reading them later costs a query each)."""
    if session_id is None:
        where, params = _TOP, [agent.pk, _ACTIVE]
    else:
        where, params = _BY_ID, [project.pk, session_id]
    session = rows.select_model(
        WorkflowSession, where=where, params=params, fields=_HEAD, order_by=_NEWEST
    )
    return _known(_check_targetable(session, session_id), project, agent)


def session_top(
    *, agent: Agent, untold_aborts: bool = False, job_fields: tuple[str, ...] | None = None
) -> WorkflowSession | None:
    """The top of ``agent``'s stack with its job and workflow, in one query; with
    ``untold_aborts``, a session a person aborted there that the agent has not been told of
    counts as the top. ``job_fields`` limits the job's columns read (the rest load on first
    use); None reads them all."""
    where, params = (
        (_TOP_OR_UNTOLD, [agent.pk, _ACTIVE, agent.pk])
        if untold_aborts
        else (_TOP, [agent.pk, _ACTIVE])
    )
    return _with_job(where, params, job_fields)


def _with_job(
    where: str, params: list[object], job_fields: tuple[str, ...] | None
) -> WorkflowSession | None:
    return rows.select_model(
        WorkflowSession,
        where=where,
        params=params,
        order_by=_NEWEST,
        related={"job": job_fields, "workflow": None},
    )


def session_resolve(
    *, project: Project, agent: Agent, session_id: str | None, untold_aborts: bool = False
) -> WorkflowSession:
    """The session a call targets: ``session_id`` anywhere in the project, else the top of
    the caller's own stack. With ``untold_aborts``, a session a person aborted on top of that
    stack, which its agent has not been told of, is answered as it is (not active)."""
    # The session with its job (without the definition) and workflow: one query.
    if session_id is not None:
        found = _with_job(_BY_ID, [project.pk, session_id], JOB_FIELDS)
    else:
        found = session_top(agent=agent, untold_aborts=untold_aborts, job_fields=JOB_FIELDS)
    session = _check_targetable(found, session_id, untold_aborts=untold_aborts)
    if session.generation == WorkflowSession.Generation.DEEPWORK_014:
        # A 0.14 session walks 0.14's rules (typed outputs, inputs, its reviews): its steps
        # are handed in through a 0.14 call, never through 0.9.1's. (Aborting works for both.)
        raise Conflict(
            f"Session '{session_id}' was started by a DeepWork 0.14 client; hand in and move "
            "its steps with that client's session_id (its conversation id)"
        )
    return _known(session, project, agent)


def session_get(*, session_id: str) -> WorkflowSession:
    """The session ``session_id`` names, with the project and agent the services act through."""
    session = (
        WorkflowSession.objects.select_related("project", "agent")
        .filter(session_id=session_id)
        .first()
    )
    if session is None:
        raise NotFound(f"Session '{session_id}' not found")
    return session


def session_children(*, session: WorkflowSession) -> list[WorkflowSession]:
    """The sessions started inside ``session``, oldest first (the parts a list shows)."""
    return list(
        session.children.only(
            "id", "parent", "session_id", "job_name", "workflow_name", "status"
        ).order_by("id")
    )


def step_run_for_decision(*, session: WorkflowSession, step_id: str) -> StepRun:
    """The run a person's override or request for changes on ``step_id`` applies to: the
    session's live run of that step. The dashboard, REST and the admin all rule through this,
    so they pick the same run and refuse with the same message. One query when there is one.
    """
    runs = StepRun.objects.filter(session=session, step_id=step_id)
    run = runs.filter(status=StepRun.Status.ACTIVE).order_by("-id").first()
    if run is not None:
        return run
    if session.status != WorkflowSession.Status.ACTIVE:
        raise Conflict(
            f"Session '{session.session_id}' is {session.status}; only the current step of an "
            "active session can be overridden or sent back"
        )
    if not runs.exists():
        raise NotFound(f"Step '{step_id}' has not run in session '{session.session_id}'")
    raise Conflict(
        f"Step '{step_id}' is not the current step of session '{session.session_id}' (it is "
        f"now '{session.current_step_id}'); only the current step can be overridden or sent back"
    )


# --- Lists ------------------------------------------------------------------------------------


def _with_progress(sessions: QuerySet[WorkflowSession]) -> QuerySet[WorkflowSession]:
    """Annotate ``steps_done`` (distinct steps with a completed run; invalidated and aborted
    runs do not count) and ``steps_total`` (the workflow's step nodes): correlated subqueries
    in the same SELECT, so a list costs one query whatever its length."""
    total = (
        WorkflowStep.objects.filter(workflow=OuterRef("workflow_id"))
        .order_by()
        .values("workflow")
        .annotate(n=Count("pk"))
        .values("n")
    )
    done = (
        StepRun.objects.filter(session=OuterRef("pk"), status=StepRun.Status.COMPLETED)
        .order_by()
        .values("session")
        .annotate(n=Count("step_id", distinct=True))
        .values("n")
    )
    return sessions.annotate(
        steps_total=Coalesce(Subquery(total, output_field=IntegerField()), 0),
        steps_done=Coalesce(Subquery(done, output_field=IntegerField()), 0),
    )


@dataclass(frozen=True)
class ActiveSession:
    session: WorkflowSession  # annotated with steps_done and steps_total
    active_runs: list[StepRun]  # every member of its current entry still running


def active_sessions(*, limit: int) -> tuple[list[ActiveSession], bool]:
    """Up to ``limit`` active sessions grouped by project and agent, bottom of each stack
    first, with progress and their active runs, and whether more are active. Two queries."""
    active = (
        _with_progress(
            WorkflowSession.objects.filter(status=WorkflowSession.Status.ACTIVE)
            .select_related("project", "agent")
            .only(
                "id",
                "session_id",
                "parent_id",
                "job_name",
                "workflow_name",
                "instance_id",
                "goal",
                "current_step_id",
                "started_at",
                "project__name",
                "project__root_path",
                "agent__agent_id",
                "workflow_id",
            )
        )
        .prefetch_related(
            Prefetch(
                "runs",
                queryset=StepRun.objects.filter(status=StepRun.Status.ACTIVE)
                .only("id", "session", "step_id")
                .order_by("id"),
                to_attr="active_runs",
            )
        )
        .order_by("project_id", "agent_id", "id")
    )
    sessions = [ActiveSession(row, row.active_runs) for row in active[: limit + 1]]
    return sessions[:limit], len(sessions) > limit


@dataclass(frozen=True)
class SessionFilter:
    """Which sessions a list shows; ``None`` leaves a field out."""

    project_id: int | None = None
    # The job's name, its folder name, or the name the caller typed to start it.
    job: str | None = None
    status: str | None = None
    agent_id: str | None = None
    started_after: datetime | None = None  # inclusive
    started_before: datetime | None = None  # exclusive


# A place in a session list: the (started_at, id) of the row a page continues from, written as
# microseconds since 1970, a dot and the id. Interfaces declare this pattern on their input, so
# every cursor they accept decodes.
SESSION_CURSOR_PATTERN = r"^-?[0-9]{1,16}\.[0-9]{1,18}$"
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def session_cursor(session: WorkflowSession) -> str:
    micros = (session.started_at - _EPOCH) // timedelta(microseconds=1)
    return f"{micros}.{session.pk}"


def _cursor_key(cursor: str) -> tuple[datetime, int]:
    micros, pk = cursor.split(".")
    return _EPOCH + timedelta(microseconds=int(micros)), int(pk)


@dataclass(frozen=True)
class SessionPage:
    sessions: list[WorkflowSession]
    newer: str | None  # pass as ``after`` for the page of newer sessions
    older: str | None  # pass as ``before`` for the page of older sessions; None on the last


def _filtered(filters: SessionFilter) -> QuerySet[WorkflowSession]:
    sessions = WorkflowSession.objects.all()
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
    return sessions


def session_page(
    *, filters: SessionFilter, limit: int, before: str | None = None, after: str | None = None
) -> SessionPage:
    """One page of sessions, newest first, with their project, agent, parent and progress:
    one query.

    A keyset on (started_at, id) after the cursor ``before`` (towards older sessions) or
    ``after`` (towards newer ones), rather than an offset and a total count: deep pages cost
    the same as the first, and nothing counts 100k rows on every page.
    """
    sessions = _filtered(filters)
    cursor = before if before is not None else after
    if cursor is not None:
        started_at, pk = _cursor_key(cursor)
        # The redundant bound lets the database start its index scan at the cursor instead of
        # filtering its way there (Django has no row-value comparison to say it directly).
        if before is not None:
            sessions = sessions.filter(
                Q(started_at__lte=started_at), Q(started_at__lt=started_at) | Q(pk__lt=pk)
            )
        else:
            sessions = sessions.filter(
                Q(started_at__gte=started_at), Q(started_at__gt=started_at) | Q(pk__gt=pk)
            )
    towards_newer = before is None and after is not None
    ordering = ("started_at", "id") if towards_newer else ("-started_at", "-id")
    rows = list(
        _with_progress(sessions)
        .select_related("project", "agent", "parent")
        .order_by(*ordering)[: limit + 1]
    )
    more = len(rows) > limit
    rows = rows[:limit]
    if towards_newer:
        rows.reverse()
        newer = rows[0] if more and rows else None
        older = rows[-1] if rows else None
    else:
        newer = rows[0] if cursor is not None and rows else None
        older = rows[-1] if more else None
    return SessionPage(
        sessions=rows,
        newer=None if newer is None else session_cursor(newer),
        older=None if older is None else session_cursor(older),
    )
