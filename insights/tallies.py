"""Keeping the insight tallies (``insights.models``): a projection of the event log, counted by
the engine's event writer in the transaction that writes the event (``InsightsConfig.ready``
subscribes it), and rebuilt from the rows on demand.

Counted from events, so each count moves exactly when its event is written, never twice:

- ``session_started``: a session started on its start day; ``session_completed`` and
  ``session_aborted``: one of that day's sessions completed or aborted.
- ``step_finished``: the agent's steps finished in the session's workflow that day (and that
  month), and each finished run's time in its step's histogram (the day's and the month's).
- ``review_failed``: the agent's failed review rounds likewise; ``session_aborted`` also counts
  an abort for the session's agent on the day (and in the month) it ended.

A run sent back by ``go_to_step`` keeps its place in the histogram: its time was spent. Each
count is one ``INSERT … ON CONFLICT DO UPDATE`` adding to the row, so concurrent writers add up
instead of overwriting each other (SQLite and PostgreSQL both have it).
"""

from __future__ import annotations

import datetime as dt
import functools
import logging
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from django.apps import apps as global_apps
from django.db import DEFAULT_DB_ALIAS, connections, router, transaction
from django.db.models import Count, Q, Sum
from django.db.models.functions import TruncDate

from insights import histograms
from insights.models import AgentTally, SessionTally, StepTimeTally
from workflows.models import Event, StepRun, WorkflowSession

logger = logging.getLogger(__name__)

SESSION_TALLY_KEY = ("day", "project_id", "generation", "job_id", "job_name", "workflow_name")
AGENT_TALLY_KEY = (
    "period",
    "period_start",
    "project_id",
    "agent_id",
    "generation",
    "job_id",
    "job_name",
    "workflow_name",
)
STEP_TIME_TALLY_KEY = (
    "period",
    "period_start",
    "project_id",
    "generation",
    "job_id",
    "job_name",
    "workflow_name",
    "step_id",
    "entry_index",
    "bucket",
)
TALLIED_KINDS = frozenset(
    {
        Event.Kind.SESSION_STARTED,
        Event.Kind.SESSION_COMPLETED,
        Event.Kind.SESSION_ABORTED,
        Event.Kind.STEP_FINISHED,
        Event.Kind.REVIEW_FAILED,
    }
)
# Runs whose time counts: finished, whether or not go_to_step later sent them back.
FINISHED_RUN_STATUSES = (StepRun.Status.COMPLETED, StepRun.Status.INVALIDATED)


def utc_day(moment: dt.datetime) -> dt.date:
    return moment.astimezone(dt.UTC).date()


def month_of(day: dt.date) -> dt.date:
    return day.replace(day=1)


@functools.cache
def _add_sql(
    vendor: str, table: str, key: tuple[str, ...], counted: tuple[str, ...], rows: int
) -> str:
    """The statement adding ``rows`` rows of counts (the same few shapes, made once each)."""
    quote = connections[DEFAULT_DB_ALIAS].ops.quote_name
    columns = [*key, *counted]
    tuple_sql = "(" + ", ".join(["%s"] * len(columns)) + ")"
    return (
        f"INSERT INTO {quote(table)} ({', '.join(quote(c) for c in columns)}) "
        f"VALUES {', '.join([tuple_sql] * rows)} "
        f"ON CONFLICT ({', '.join(quote(c) for c in key)}) DO UPDATE SET "
        + ", ".join(
            f"{quote(c)} = {quote(table)}.{quote(c)} + excluded.{quote(c)}" for c in counted
        )
    )


def _add(
    using: str,
    table: str,
    key: Sequence[str],
    rows: Mapping[tuple[Any, ...], Mapping[str, int]],
) -> None:
    """Add each row's counts to the tally row with its key, creating it when missing."""
    if not rows:
        return
    connection = connections[using]
    counted = tuple(sorted({name for counts in rows.values() for name in counts}))
    params: list[Any] = []
    # Rows in one order everywhere, and tables in one order (agents, step times, sessions):
    # two transactions adding to the same rows on PostgreSQL then wait for each other in turn
    # instead of deadlocking.
    ordered = (
        sorted(rows.items(), key=lambda item: repr(item[0])) if len(rows) > 1 else rows.items()
    )
    for values, counts in ordered:
        for value in values:
            params.append(
                connection.ops.adapt_datefield_value(value) if isinstance(value, dt.date) else value
            )
        params.extend(counts.get(name, 0) for name in counted)
    sql = _add_sql(connection.vendor, table, tuple(key), counted, len(rows))
    with connection.cursor() as cursor:
        cursor.execute(sql, params)


def _session_key(session: WorkflowSession) -> tuple[Any, ...]:
    return (
        utc_day(session.started_at),
        session.project_id,
        session.generation,
        session.job_id,
        session.job_name,
        session.workflow_name,
    )


def _agent_keys(
    day: dt.date, agent_id: int | None, session: WorkflowSession
) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
    """The day's and the month's ``AgentTally`` keys of something an agent did in a session."""
    rest = (
        session.project_id,
        agent_id,
        session.generation,
        session.job_id,
        session.job_name,
        session.workflow_name,
    )
    return ("day", day, *rest), ("month", month_of(day), *rest)


def _step_rows(
    session: WorkflowSession, runs: Iterable[tuple[str, int, dt.datetime, dt.datetime]]
) -> dict[tuple[Any, ...], dict[str, int]]:
    counts: Counter[tuple[Any, ...]] = Counter()
    for step_id, entry_index, started_at, completed_at in runs:
        bucket = histograms.bucket_of((completed_at - started_at).total_seconds())
        day = utc_day(completed_at)
        rest = (
            session.project_id,
            session.generation,
            session.job_id,
            session.job_name,
            session.workflow_name,
            step_id,
            entry_index,
            bucket,
        )
        counts[("day", day, *rest)] += 1
        counts[("month", month_of(day), *rest)] += 1
    return {key: {"runs": n} for key, n in counts.items()}


def insight_tally_events(*, events: Sequence[Event], session: WorkflowSession | None) -> None:
    """Count freshly written events of one kind into the tallies (part of the event writer:
    called in the transaction that wrote them)."""
    if not events or events[0].kind not in TALLIED_KINDS:
        return
    if session is None:
        return
    kind = events[0].kind
    using = router.db_for_write(Event)
    session_table, agent_table = SessionTally._meta.db_table, AgentTally._meta.db_table
    if kind in (Event.Kind.STEP_FINISHED, Event.Kind.REVIEW_FAILED):
        field = "steps_finished" if kind == Event.Kind.STEP_FINISHED else "reviews_failed"
        by_agent: Counter[tuple[Any, ...]] = Counter()
        for e in events:
            for key in _agent_keys(utc_day(e.created_at), e.agent_id, session):
                by_agent[key] += 1
        _add(using, agent_table, AGENT_TALLY_KEY, {k: {field: n} for k, n in by_agent.items()})
    if kind == Event.Kind.SESSION_STARTED:
        _add(using, session_table, SESSION_TALLY_KEY, {_session_key(session): {"started": 1}})
    elif kind == Event.Kind.SESSION_COMPLETED:
        _add(using, session_table, SESSION_TALLY_KEY, {_session_key(session): {"completed": 1}})
    elif kind == Event.Kind.SESSION_ABORTED:
        ended = session.completed_at or events[0].created_at
        keys = _agent_keys(utc_day(ended), session.agent_id, session)
        _add(using, agent_table, AGENT_TALLY_KEY, {key: {"sessions_aborted": 1} for key in keys})
        _add(using, session_table, SESSION_TALLY_KEY, {_session_key(session): {"aborted": 1}})
    elif kind == Event.Kind.STEP_FINISHED:
        # Each event names the run it finished (its entry, start and end): counted from there,
        # so this context never reads the workflow engine's runs.
        finished = [_finished_run(e) for e in events]
        _add(
            using,
            StepTimeTally._meta.db_table,
            STEP_TIME_TALLY_KEY,
            _step_rows(session, [run for run in finished if run is not None]),
        )


def _finished_run(event: Event) -> tuple[str, int, dt.datetime, dt.datetime] | None:
    payload = event.payload
    entry_index, started_at, completed_at = (
        payload.get("entry_index"),
        payload.get("started_at"),
        payload.get("completed_at"),
    )
    if entry_index is None or started_at is None or completed_at is None:
        # Only an event from before runs were named in it; the one writer always names them.
        logger.warning(
            "step_finished event %s names no run: its step time is not counted", event.pk
        )
        return None
    return (str(payload["step_id"]), int(entry_index), _moment(started_at), _moment(completed_at))


def _moment(value: dt.datetime | str) -> dt.datetime:
    # A payload holds its times as ISO text (with their offset), or a datetime once parsed.
    if isinstance(value, str):
        moment = dt.datetime.fromisoformat(value)
        return moment if moment.tzinfo is not None else moment.replace(tzinfo=dt.UTC)
    return value


@dataclass(frozen=True)
class TalliesRebuilt:
    session_rows: int
    agent_rows: int
    step_time_rows: int


def insight_tallies_rebuild(
    *, project_id: int | None = None, apps: Any = global_apps, using: str = "default"
) -> TalliesRebuilt:
    """Recount every tally (of one project, or all) from the sessions, runs and events, in one
    transaction: after a restore, an import, or rows deleted by hand. ``apps`` lets a data
    migration pass its historical models."""
    session_model = apps.get_model("workflows", "WorkflowSession")
    run_model = apps.get_model("workflows", "StepRun")
    event_model = apps.get_model("workflows", "Event")
    session_tally = apps.get_model("insights", "SessionTally")
    agent_tally = apps.get_model("insights", "AgentTally")
    step_tally = apps.get_model("insights", "StepTimeTally")
    scope = Q() if project_id is None else Q(project_id=project_id)
    with transaction.atomic(using=using):
        for model in (session_tally, agent_tally, step_tally):
            model.objects.using(using).filter(scope).delete()

        status = WorkflowSession.Status
        sessions = (
            session_model.objects.using(using)
            .filter(scope)
            .annotate(day=TruncDate("started_at", tzinfo=dt.UTC))
            .values(*SESSION_TALLY_KEY)
            .annotate(
                n=Count("pk"),
                done=Count("pk", filter=Q(status=status.COMPLETED)),
                gone=Count("pk", filter=Q(status=status.ABORTED)),
            )
            .order_by()
        )
        session_rows = [
            session_tally(
                **{k: row[k] for k in SESSION_TALLY_KEY},
                started=row["n"],
                completed=row["done"],
                aborted=row["gone"],
            )
            for row in sessions
        ]
        session_tally.objects.using(using).bulk_create(session_rows, batch_size=2000)

        agents: dict[tuple[Any, ...], Counter[str]] = {}
        owner = (
            "session__generation",
            "session__job_id",
            "session__job_name",
            "session__workflow_name",
        )
        counted = (
            event_model.objects.using(using)
            .filter(
                scope,
                kind__in=[Event.Kind.STEP_FINISHED, Event.Kind.REVIEW_FAILED],
                session__isnull=False,
            )
            .annotate(day=TruncDate("created_at", tzinfo=dt.UTC))
            .values_list("day", "project_id", "agent_id", "kind", *owner)
            .annotate(n=Count("*"))
            .order_by()
        )
        for day, project, agent, kind, *catalog, n in counted:
            field = "steps_finished" if kind == Event.Kind.STEP_FINISHED else "reviews_failed"
            for period, start in (("day", day), ("month", month_of(day))):
                key = (period, start, project, agent, *catalog)
                agents.setdefault(key, Counter())[field] += n
        aborted = (
            session_model.objects.using(using)
            .filter(scope, status=status.ABORTED, completed_at__isnull=False)
            .annotate(day=TruncDate("completed_at", tzinfo=dt.UTC))
            .values_list(
                "day", "project_id", "agent_id", "generation", "job_id", "job_name", "workflow_name"
            )
            .annotate(n=Count("pk"))
            .order_by()
        )
        for day, project, agent, *catalog, n in aborted:
            for period, start in (("day", day), ("month", month_of(day))):
                key = (period, start, project, agent, *catalog)
                agents.setdefault(key, Counter())["sessions_aborted"] += n
        agent_rows = [
            agent_tally(**dict(zip(AGENT_TALLY_KEY, key, strict=True)), **counts)
            for key, counts in agents.items()
        ]
        agent_tally.objects.using(using).bulk_create(agent_rows, batch_size=2000)

        steps: Counter[tuple[Any, ...]] = Counter()
        runs = (
            run_model.objects.using(using)
            .filter(
                Q() if project_id is None else Q(session__project_id=project_id),
                status__in=FINISHED_RUN_STATUSES,
                completed_at__isnull=False,
            )
            .exclude(session__job__source="defined")
            .values_list(
                "step_id",
                "entry_index",
                "started_at",
                "completed_at",
                "session__project_id",
                "session__generation",
                "session__job_id",
                "session__job_name",
                "session__workflow_name",
            )
            .order_by()
        )
        for step_id, entry, started_at, completed_at, *owner in runs.iterator(chunk_size=5000):
            bucket = histograms.bucket_of((completed_at - started_at).total_seconds())
            day = utc_day(completed_at)
            rest = (*owner, step_id, entry, bucket)
            steps[("day", day, *rest)] += 1
            steps[("month", month_of(day), *rest)] += 1
        step_rows = [
            step_tally(**dict(zip(STEP_TIME_TALLY_KEY, key, strict=True)), runs=n)
            for key, n in steps.items()
        ]
        step_tally.objects.using(using).bulk_create(step_rows, batch_size=2000)
    return TalliesRebuilt(len(session_rows), len(agent_rows), len(step_rows))


def insight_tallies_summed(*, project_id: int | None = None) -> dict[str, list[tuple[Any, ...]]]:
    """Every tally's counts summed per key (rows with equal keys add up when read), sorted: what
    a recount must reproduce. For checks (the tests, the soak), not for pages."""
    scope = Q() if project_id is None else Q(project_id=project_id)
    sessions = SessionTally.objects.filter(scope)
    agents = AgentTally.objects.filter(scope)
    steps = StepTimeTally.objects.filter(scope)
    return {
        "sessions": sorted(
            sessions.values_list(*SESSION_TALLY_KEY)
            .annotate(a=Sum("started"), b=Sum("completed"), c=Sum("aborted"))
            .order_by()
        ),
        "agents": sorted(
            agents.values_list(*AGENT_TALLY_KEY)
            .annotate(a=Sum("steps_finished"), b=Sum("reviews_failed"), c=Sum("sessions_aborted"))
            .order_by(),
            key=repr,
        ),
        "steps": sorted(steps.values_list(*STEP_TIME_TALLY_KEY).annotate(n=Sum("runs")).order_by()),
    }


def insight_tallies_differences(*, project_id: int) -> list[str]:
    """How a project's tallies differ from a recount of its rows (the recount is rolled back):
    none, when every count was written with the event it counts."""
    kept = insight_tallies_summed(project_id=project_id)
    with transaction.atomic():
        insight_tallies_rebuild(project_id=project_id)
        recounted = insight_tallies_summed(project_id=project_id)
        transaction.set_rollback(True)
    problems = []
    for table, rows in kept.items():
        extra = sorted(set(rows) - set(recounted[table]), key=repr)
        missing = sorted(set(recounted[table]) - set(rows), key=repr)
        if extra or missing:
            problems.append(
                f"{table} tallies differ from a recount: kept {extra[:3]}, recounted {missing[:3]}"
            )
    return problems
