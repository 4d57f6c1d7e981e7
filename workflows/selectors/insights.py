"""Insights: what happened over time, aggregated in the database.

Each read here costs a fixed number of queries whatever the number of rows (most one, each
saying how many), filtered by an ``InsightFilter`` and bounded by its date range (at most
``MAX_RANGE_DAYS``): the database counts and ranks, Python only zero-fills days and shapes
the answer.

Median and p90 use the nearest-rank definition (the smallest value with at least that share
of the values at or below it), computed with window functions that SQLite and PostgreSQL
both have (``ROW_NUMBER`` and ``COUNT`` over a partition): only the one or two rows per group
that hold a percentile leave the database. Reads of the review tables live in
``reviews.insights`` (``workflows`` never imports ``reviews``).

Why long, and temporary: filters, the percentile machinery and the figures are still
together; they become the ``insights`` app's ``filters``, ``percentiles`` and ``selectors``.
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from django.db import connections
from django.db.models import (
    Aggregate,
    Case,
    CharField,
    Count,
    DurationField,
    Expression,
    ExpressionWrapper,
    F,
    Min,
    Q,
    QuerySet,
    Sum,
    Value,
    When,
    Window,
)
from django.db.models.functions import RowNumber, TruncDate
from django.utils import timezone

from tracker.models import Decision, Issue, Task
from workflows import histograms
from workflows.errors import InvalidInput
from workflows.models import (
    AgentTally,
    Job,
    SessionTally,
    StepRun,
    StepTimeTally,
    WorkflowSession,
)
from workflows.tallies import FINISHED_RUN_STATUSES, month_of

# The widest date range one page aggregates (a year, and a leap day).
MAX_RANGE_DAYS = 366
DEFAULT_RANGE_DAYS = 30
# Agents drawn one by one in the per-agent charts; the rest are summed as "other agents".
TOP_AGENTS = 8
# Rows read back to count JSON lists in Python (tasks' changed files): the newest ones.
JSON_SAMPLE_LIMIT = 5000
# Up to this many runs per chosen workflow, step times are worked out exactly from the runs;
# beyond it from the duration histograms (``workflows.histograms``), within 1%.
EXACT_STEP_TIMES_LIMIT = 2000


class Dialect:
    """Which runs an insight reads: DeepWork sessions (both generations, or one of them),
    tracked workflows, or multi-agent DAG workflows."""

    DEEPWORK = "deepwork"
    DEEPWORK_09 = "deepwork-0.9"
    DEEPWORK_014 = "deepwork-0.14"
    TRACKER = "tracker"
    DAG = "dag"
    CHOICES = (
        (DEEPWORK, "DeepWork sessions (0.9 and 0.14)"),
        (DEEPWORK_09, "DeepWork 0.9 sessions"),
        (DEEPWORK_014, "DeepWork 0.14 sessions"),
        (TRACKER, "Tracker workflows"),
        (DAG, "DAG workflows"),
    )
    # The session generation each DeepWork dialect keeps (``WorkflowSession.generation``).
    GENERATIONS = {DEEPWORK_09: "0.9", DEEPWORK_014: "0.14"}


@dataclass(frozen=True)
class InsightFilter:
    """What an insight covers. Days are whole UTC days, ``until`` included; ``None`` leaves a
    filter out. ``job`` matches the job's name, its folder name or the name it was started
    with; ``workflow`` a workflow's name; ``agent_id`` an agent's id."""

    since: dt.date
    until: dt.date
    project_id: int | None = None
    job: str | None = None
    workflow: str | None = None
    agent_id: str | None = None
    dialect: str | None = None
    # What was made of the range asked for (see ``insight_filter(clamp=True)``).
    notes: tuple[str, ...] = ()

    @classmethod
    def last_days(cls, days: int = DEFAULT_RANGE_DAYS, **kwargs: Any) -> InsightFilter:
        today = timezone.now().date()
        return cls(since=today - dt.timedelta(days=days - 1), until=today, **kwargs)

    @property
    def start(self) -> dt.datetime:
        return dt.datetime.combine(self.since, dt.time.min, tzinfo=dt.UTC)

    @property
    def end(self) -> dt.datetime:
        """The first moment after the range (exclusive); the last one there is for the last
        day there is."""
        if self.until == dt.date.max:
            return dt.datetime.max.replace(tzinfo=dt.UTC)
        return dt.datetime.combine(self.until, dt.time.min, tzinfo=dt.UTC) + dt.timedelta(days=1)

    @property
    def days(self) -> list[dt.date]:
        count = (self.until - self.since).days + 1
        return [self.since + dt.timedelta(days=n) for n in range(count)]

    def wants(self, dialect: str) -> bool:
        if dialect == Dialect.DEEPWORK:
            return self.dialect in (None, Dialect.DEEPWORK, *Dialect.GENERATIONS)
        return self.dialect in (None, dialect)

    @property
    def generation(self) -> str | None:
        """The session generation the dialect keeps, if it keeps only one."""
        return Dialect.GENERATIONS.get(self.dialect or "")

    def session_q(self, prefix: str = "") -> Q:
        """The filter on sessions (``prefix`` reaches them from another model, e.g.
        ``session__``), without the date range: each insight bounds its own timestamp."""
        q = self._catalog_q(prefix)
        if self.project_id is not None:
            q &= Q(**{f"{prefix}project_id": self.project_id})
        if self.agent_id is not None:
            q &= Q(**{f"{prefix}agent__agent_id": self.agent_id})
        return q

    def deepwork_q(self, prefix: str = "") -> Q:
        """``session_q`` less the DAG executions, which are sessions too but have their own
        tab (the reads of reviews, rulings and events need not say so: a DAG writes none)."""
        return self.session_q(prefix) & ~Q(**{f"{prefix}job_id__in": _dag_jobs()})

    def copied_q(self, *, agent: str | None = None) -> Q:
        """The filter on rows that carry their session's project, generation, job and
        workflow (the tallies, review verdicts); ``agent`` is the path to an agent id, for the
        rows that have one."""
        q = self._catalog_q("")
        if self.project_id is not None:
            q &= Q(project_id=self.project_id)
        if self.agent_id is not None and agent is not None:
            q &= Q(**{agent: self.agent_id})
        return q

    def tally_q(self) -> Q:
        """The filter on ``SessionTally`` and ``StepTimeTally`` rows, which carry the session's
        project, generation, job and workflow but no agent (see ``uses_tallies``)."""
        return self.copied_q() & ~Q(job_id__in=_dag_jobs())

    @property
    def uses_tallies(self) -> bool:
        """Whether the session tallies can answer: they have no agent. With an agent the
        agent's own sessions and runs are few enough to read one by one."""
        return self.agent_id is None

    def _catalog_q(self, prefix: str) -> Q:
        q = Q()
        if self.generation is not None:
            q &= Q(**{f"{prefix}generation": self.generation})
        if self.job is not None:
            jobs = Job.objects.filter(Q(name=self.job) | Q(dir_name=self.job)).values("pk")
            q &= Q(**{f"{prefix}job_name": self.job}) | Q(**{f"{prefix}job_id__in": jobs})
        if self.workflow is not None:
            q &= Q(**{f"{prefix}workflow_name": self.workflow})
        return q


def seconds(value: dt.timedelta | float | int | None) -> float | None:
    """A duration as seconds: PostgreSQL gives a timedelta, SQLite microseconds."""
    if value is None:
        return None
    if isinstance(value, dt.timedelta):
        return value.total_seconds()
    return float(value) / 1_000_000


def in_seconds(p: Percentiles | None, *, scale: float | None = None) -> Percentiles | None:
    """Durations as seconds: timedeltas or SQLite's microseconds, or numbers times ``scale``."""
    if p is None:
        return None
    if scale is not None:
        return Percentiles(p.count, p.median * scale, p.p90 * scale, p.extra)
    return Percentiles(p.count, seconds(p.median), seconds(p.p90), p.extra)


def duration(end: str, begin: str) -> ExpressionWrapper:
    return ExpressionWrapper(F(end) - F(begin), output_field=DurationField())


@dataclass(frozen=True)
class Percentiles:
    """Nearest-rank median and p90 of one group's values, how many values there were, and
    any ``extra`` fields the group's rows carry."""

    count: int
    median: Any
    p90: Any
    extra: dict[str, Any] = field(default_factory=dict)


class PercentileDisc(Aggregate):
    """PostgreSQL's ordered-set ``percentile_disc(p)``: the first value whose rank r has
    r >= p*n (PostgreSQL takes ``ceil(p*n)``), the nearest rank exactly as below. Two of them
    over the same ordering share one sort."""

    function = "percentile_disc"
    template = "%(function)s(%(fraction)s) WITHIN GROUP (ORDER BY %(expressions)s)"

    def __init__(self, expression: Expression | F, *, fraction: float, **extra: Any) -> None:
        super().__init__(expression, fraction=fraction, **extra)


def percentiles_by(
    queryset: QuerySet[Any],
    *,
    value: Expression | F,
    group: str | None = None,
    extra: Mapping[str, Aggregate] | None = None,
) -> dict[Any, Percentiles]:
    """Median and p90 of ``value`` per ``group`` (one group, ``None``, when not given), and
    each ``extra`` aggregate per group, in one query.

    PostgreSQL computes them with ``percentile_disc`` in one pass over the sorted values.
    Elsewhere (SQLite has no percentile aggregate) the rows are ranked with window functions
    and only the ranks that hold a percentile come back. Both take the nearest rank r of p in
    n values: the smallest r with r >= p*n; in integers, 2r >= n > 2(r-1) for the median and
    10r >= 9n > 10(r-1) for p90."""
    extra = dict(extra or {})
    if connections[queryset.db].vendor == "postgresql":
        output = value.output_field if hasattr(value, "output_field") else None
        grouped = queryset.values(*([group] if group else [])).order_by() if group else queryset
        aggregates = {
            "pct_count": Count("pk"),
            "pct_median": PercentileDisc(value, fraction=0.5, output_field=output),
            "pct_p90": PercentileDisc(value, fraction=0.9, output_field=output),
            **extra,
        }
        rows = list(grouped.annotate(**aggregates)) if group else [queryset.aggregate(**aggregates)]
        return {
            (row[group] if group else None): Percentiles(
                count=row["pct_count"],
                median=row["pct_median"],
                p90=row["pct_p90"],
                extra={name: row[name] for name in extra},
            )
            for row in rows
            if row["pct_count"]
        }
    partition = [F(group)] if group else []
    ranked = queryset.annotate(
        pct_value=value,
        pct_rank=Window(RowNumber(), partition_by=partition, order_by=value.asc()),
        pct_count=Window(Count("pk"), partition_by=partition),
        **{name: Window(aggregate, partition_by=partition) for name, aggregate in extra.items()},
    ).alias(
        pct_r2=F("pct_rank") * 2,
        pct_r10=F("pct_rank") * 10,
        pct_n=F("pct_count"),
        pct_n9=F("pct_count") * 9,
    )
    wanted = ranked.filter(
        Q(pct_r2__gte=F("pct_n"), pct_r2__lt=F("pct_n") + 2)
        | Q(pct_r10__gte=F("pct_n9"), pct_r10__lt=F("pct_n9") + 10)
    )
    fields = ["pct_value", "pct_rank", "pct_count", *([group] if group else []), *extra]
    found: dict[Any, dict[str, Any]] = defaultdict(dict)
    for row in wanted.values(*fields):
        key = row[group] if group else None
        n, rank = row["pct_count"], row["pct_rank"]
        slot = found[key]
        slot["count"] = n
        slot["extra"] = {name: row[name] for name in extra}
        if 2 * rank >= n > 2 * (rank - 1):
            slot["median"] = row["pct_value"]
        if 10 * rank >= 9 * n > 10 * (rank - 1):
            slot["p90"] = row["pct_value"]
    return {
        key: Percentiles(
            count=v["count"], median=v.get("median"), p90=v.get("p90"), extra=v["extra"]
        )
        for key, v in found.items()
    }


def _day(field_name: str) -> TruncDate:
    return TruncDate(field_name, tzinfo=dt.UTC)


def _dag_jobs() -> QuerySet[Job, Any]:
    """The jobs of DAG executions (few: one per defined DAG workflow)."""
    return Job.objects.filter(source=Job.Source.DEFINED).values("pk")


def _periods_q(since: dt.date, until: dt.date) -> Q:
    """The rows of a day-and-month tally (``PeriodTally``: agents, step times) that cover
    ``since``..``until`` exactly: the month rows of the whole months in it, the day rows of
    the days left at either edge."""
    months: list[dt.date] = []
    month = month_of(since) if since.day == 1 else _next_month(since)
    while month <= until and month != dt.date.max:
        following = _next_month(month)
        if following == dt.date.max or following - dt.timedelta(days=1) > until:
            break
        months.append(month)
        month = following
    day_rows = Q(period=StepTimeTally.Period.DAY)
    if not months:
        return day_rows & Q(period_start__gte=since, period_start__lte=until)
    first, after = months[0], _next_month(months[-1])
    edges = Q(period_start__gte=since, period_start__lt=first) | Q(
        period_start__gte=after, period_start__lte=until
    )
    return (day_rows & edges) | Q(period=StepTimeTally.Period.MONTH, period_start__in=months)


def _next_month(day: dt.date) -> dt.date:
    try:
        return (day.replace(day=28) + dt.timedelta(days=4)).replace(day=1)
    except OverflowError:
        return dt.date.max


# --- Sessions per day ------------------------------------------------------------------------


@dataclass(frozen=True)
class DayOutcomes:
    """Sessions started on one day, by where they stand now."""

    day: dt.date
    completed: int
    aborted: int
    active: int

    @property
    def started(self) -> int:
        return self.completed + self.aborted + self.active


def sessions_per_day(*, filters: InsightFilter) -> list[DayOutcomes]:
    """Every day of the range with the sessions started that day, split by outcome (completed,
    aborted, still active): one query, of the day's tallies (or, for one agent, of its
    sessions; wf_session_recent_idx bounds the range)."""
    counts: dict[tuple[dt.date, str], int] = {}
    status = WorkflowSession.Status
    if filters.wants(Dialect.DEEPWORK) and filters.uses_tallies:
        tallied = (
            SessionTally.objects.filter(
                filters.tally_q(), day__gte=filters.since, day__lte=filters.until
            )
            .values("day")
            .annotate(n=Sum("started"), done=Sum("completed"), gone=Sum("aborted"))
            .order_by()
        )
        for row in tallied:
            counts[(row["day"], status.COMPLETED)] = row["done"]
            counts[(row["day"], status.ABORTED)] = row["gone"]
            counts[(row["day"], status.ACTIVE)] = row["n"] - row["done"] - row["gone"]
    elif filters.wants(Dialect.DEEPWORK):
        rows = (
            WorkflowSession.objects.filter(
                filters.deepwork_q(), started_at__gte=filters.start, started_at__lt=filters.end
            )
            .annotate(day=_day("started_at"))
            .values("day", "status")
            .annotate(n=Count("pk"))
            .order_by()
        )
        counts = {(row["day"], row["status"]): row["n"] for row in rows}
    return [
        DayOutcomes(
            day=day,
            completed=counts.get((day, status.COMPLETED), 0),
            aborted=counts.get((day, status.ABORTED), 0),
            active=counts.get((day, status.ACTIVE), 0),
        )
        for day in filters.days
    ]


# --- Time per step -----------------------------------------------------------------------------


@dataclass(frozen=True)
class WorkflowChoice:
    job: str
    workflow: str


def busiest_workflow(*, filters: InsightFilter) -> WorkflowChoice | None:
    """The filter's job and workflow when both are given, else the (job, workflow) with the
    most sessions started in the range among those the filter allows: one query."""
    if filters.job is not None and filters.workflow is not None:
        return WorkflowChoice(filters.job, filters.workflow)
    if not filters.wants(Dialect.DEEPWORK):
        return None
    if filters.uses_tallies:
        row = (
            SessionTally.objects.filter(
                filters.tally_q(), day__gte=filters.since, day__lte=filters.until
            )
            .values("job_name", "workflow_name")
            .annotate(n=Sum("started"))
            .filter(n__gt=0)
            .order_by("-n", "job_name", "workflow_name")
            .first()
        )
        return None if row is None else WorkflowChoice(row["job_name"], row["workflow_name"])
    row = (
        WorkflowSession.objects.filter(
            filters.deepwork_q(), started_at__gte=filters.start, started_at__lt=filters.end
        )
        .values("job_name", "workflow_name")
        .annotate(n=Count("pk"))
        .order_by("-n", "job_name", "workflow_name")
        .first()
    )
    return None if row is None else WorkflowChoice(row["job_name"], row["workflow_name"])


# Slack for the rule below: a session ends in the transaction that finishes its last step,
# so only clocks could put a run's completion after its session's end.
SESSION_END_SLACK = dt.timedelta(days=1)


def _open_during(prefix: str, filters: InsightFilter) -> Q:
    """Sessions that may hold a run completed in the range: still open, or ended no earlier
    than the range's start (less ``SESSION_END_SLACK``). Redundant for the answer, since runs
    finish before their session does, but it lets the database join only the sessions of the
    range (wf_session_done_at_idx) instead of every session of the workflow, ever."""
    try:
        since = filters.start - SESSION_END_SLACK
    except OverflowError:
        return Q()
    return Q(**{f"{prefix}completed_at__isnull": True}) | Q(**{f"{prefix}completed_at__gte": since})


@dataclass(frozen=True)
class StepTime:
    step_id: str
    entry_index: int
    runs: int
    median_seconds: float
    p90_seconds: float
    # Worked out from the duration histograms: within 1% of the exact figures.
    approximate: bool = False


def _step_times_from_tallies(chosen: InsightFilter) -> list[StepTime] | None:
    """The chosen workflow's step times from the histograms, or ``None`` when the range holds
    few enough runs to work them out exactly: one query."""
    rows = list(
        StepTimeTally.objects.filter(chosen.tally_q(), _periods_q(chosen.since, chosen.until))
        .values("step_id", "bucket")
        .annotate(n=Sum("runs"), entry=Min("entry_index"))
        .order_by()
    )
    if sum(row["n"] for row in rows) <= EXACT_STEP_TIMES_LIMIT:
        return None
    buckets: dict[str, list[tuple[int, int]]] = defaultdict(list)
    entries: dict[str, int] = {}
    for row in rows:
        buckets[row["step_id"]].append((row["bucket"], row["n"]))
        entries[row["step_id"]] = min(entries.get(row["step_id"], row["entry"]), row["entry"])
    return [
        StepTime(
            step_id=step_id,
            entry_index=entries[step_id],
            runs=sum(n for _, n in counts),
            median_seconds=histograms.percentile(counts, fraction=0.5) or 0.0,
            p90_seconds=histograms.percentile(counts, fraction=0.9) or 0.0,
            approximate=True,
        )
        for step_id, counts in buckets.items()
    ]


def step_times(*, filters: InsightFilter, choice: WorkflowChoice) -> list[StepTime]:
    """Median and p90 of the time from a step becoming current to its completion, per step of
    the chosen workflow, over the runs completed in the range (each completion counts, also
    one ``go_to_step`` later sent back), in workflow order. One or two queries: the
    histograms, unless the filter names an agent; then, when the range holds at most
    ``EXACT_STEP_TIMES_LIMIT`` runs (or for one agent's runs), the runs themselves
    (wf_steprun_done_idx bounds the range)."""
    chosen = InsightFilter(
        since=filters.since,
        until=filters.until,
        project_id=filters.project_id,
        job=choice.job,
        workflow=choice.workflow,
        agent_id=filters.agent_id,
        dialect=filters.dialect,
    )
    if chosen.uses_tallies and (estimated := _step_times_from_tallies(chosen)) is not None:
        return sorted(estimated, key=lambda t: (t.entry_index, t.step_id))
    runs = StepRun.objects.filter(
        chosen.deepwork_q("session__"),
        _open_during("session__", filters),
        status__in=FINISHED_RUN_STATUSES,
        completed_at__gte=filters.start,
        completed_at__lt=filters.end,
    )
    ranked = percentiles_by(
        runs,
        value=duration("completed_at", "started_at"),
        group="step_id",
        extra={"entry": Min("entry_index")},
    )
    times = [
        StepTime(
            step_id=step_id,
            entry_index=p.extra["entry"],
            runs=p.count,
            median_seconds=seconds(p.median) or 0.0,
            p90_seconds=seconds(p.p90) or 0.0,
        )
        for step_id, p in ranked.items()
    ]
    return sorted(times, key=lambda t: (t.entry_index, t.step_id))


# --- Per agent ---------------------------------------------------------------------------------


@dataclass
class AgentActivity:
    """One agent's (or the other agents' summed) steps finished per day, failed review rounds
    and aborted sessions in the range."""

    agent_id: str
    steps_per_day: list[int]
    steps: int = 0
    failed_reviews: int = 0
    aborts: int = 0
    others: list[str] = field(default_factory=list)


def agent_activity(*, filters: InsightFilter) -> list[AgentActivity]:
    """Per agent: steps finished per day, failed review rounds and aborted sessions: the
    ``TOP_AGENTS`` busiest drawn one by one, the rest summed as "other agents". Two queries
    of the agents' tallies: each agent's totals (the range's month rows and its edge days),
    to rank them; then steps per day of the ones drawn and of the rest together, so a year of
    100 agents returns about 3k rows."""
    if not filters.wants(Dialect.DEEPWORK):
        return []
    tallied = AgentTally.objects.filter(filters.copied_q(agent="agent__agent_id"))
    days = filters.days
    agents = {
        agent_id: AgentActivity(
            agent_id=agent_id,
            steps_per_day=[0] * len(days),
            steps=steps,
            failed_reviews=failed,
            aborts=aborts,
        )
        for agent_id, steps, failed, aborts in tallied.filter(
            _periods_q(filters.since, filters.until)
        )
        .values("agent__agent_id")
        .annotate(
            steps=Sum("steps_finished"),
            failed=Sum("reviews_failed"),
            aborts=Sum("sessions_aborted"),
        )
        .values_list("agent__agent_id", "steps", "failed", "aborts")
        .order_by()
    }
    shown = _top_agents(agents, len(days))
    drawn = [a.agent_id for a in shown if a.agent_id in agents and not a.others]
    who = Case(
        When(agent__isnull=True, then=Value(_NO_AGENT if None in drawn else _OTHER_AGENTS)),
        When(agent__agent_id__in=[a for a in drawn if a is not None], then=F("agent__agent_id")),
        default=Value(_OTHER_AGENTS),
        output_field=CharField(),
    )
    series = {a.agent_id if a.agent_id is not None else _NO_AGENT: a for a in shown}
    if shown and shown[-1].others:
        series[_OTHER_AGENTS] = shown[-1]
    index = {day: n for n, day in enumerate(days)}
    for key, day, steps in (
        tallied.filter(
            period=AgentTally.Period.DAY,
            period_start__gte=filters.since,
            period_start__lte=filters.until,
        )
        .annotate(who=who)
        .values("who", "period_start")
        .annotate(steps=Sum("steps_finished"))
        .values_list("who", "period_start", "steps")
        .order_by()
    ):
        if steps and key in series:
            series[key].steps_per_day[index[day]] += steps
    return shown


# Stand for every agent not drawn one by one, and for "no agent", in the per-day query below:
# longer than any agent id may be (128), so no agent is mistaken for them.
_OTHER_AGENTS, _NO_AGENT = "other agents ".ljust(130, "."), "no agent ".ljust(130, ".")


def _top_agents(agents: dict[str, AgentActivity], days: int) -> list[AgentActivity]:
    ranked = sorted(
        agents.values(), key=lambda a: (-a.steps, -a.failed_reviews, -a.aborts, a.agent_id)
    )
    shown, rest = ranked[:TOP_AGENTS], ranked[TOP_AGENTS:]
    if rest:
        other = AgentActivity(agent_id="other agents", steps_per_day=[0] * days)
        for activity in rest:
            other.steps_per_day = [
                a + b for a, b in zip(other.steps_per_day, activity.steps_per_day, strict=True)
            ]
            other.steps += activity.steps
            other.failed_reviews += activity.failed_reviews
            other.aborts += activity.aborts
            other.others.append(activity.agent_id)
        shown.append(other)
    return shown


# --- Tracker -----------------------------------------------------------------------------------


def _tracker_q(filters: InsightFilter) -> Q:
    q = Q()
    if filters.project_id is not None:
        q &= Q(project_id=filters.project_id)
    if filters.agent_id is not None:
        q &= Q(agent__agent_id=filters.agent_id)
    return q


@dataclass(frozen=True)
class TrackerDay:
    day: dt.date
    tasks: int
    added: int
    modified: int
    deleted: int


@dataclass(frozen=True)
class OpenBlocker:
    issue_id: int
    workflow_id: int
    workflow_name: str
    type: str
    description: str
    created_at: dt.datetime
    age_seconds: float


@dataclass(frozen=True)
class TrackerInsights:
    days: list[TrackerDay]
    files_sampled: bool
    decisions: list[tuple[str, int]]  # (category, count)
    open_blockers: list[OpenBlocker]
    open_blocker_count: int
    resolved_wait: Percentiles | None  # seconds from a blocker being raised to its answer


OPEN_BLOCKERS_SHOWN = 50


def blocker_waits(*, filters: InsightFilter) -> Percentiles | None:
    """Median and p90 seconds from a blocker being raised to a person's answer, over the
    blockers answered in the range: one query."""
    if not filters.wants(Dialect.TRACKER):
        return None
    answered = Issue.objects.filter(
        _tracker_q(filters),
        requires_human_review=True,
        resolved_at__isnull=False,
        resolved_at__gte=filters.start,
        resolved_at__lt=filters.end,
    )
    return in_seconds(
        percentiles_by(answered, value=duration("resolved_at", "created_at")).get(None)
    )


def tracker_insights(*, filters: InsightFilter, now: dt.datetime | None = None) -> TrackerInsights:
    """The tracker's work in the range: tasks completed and files they changed per day,
    decisions per category, blockers open now (oldest first, with their age) and how long
    answered blockers waited for a person. Five queries. Job and workflow filters do not apply
    (tracked workflows have no catalog job)."""
    now = now or timezone.now()
    if not filters.wants(Dialect.TRACKER):
        return TrackerInsights(
            [TrackerDay(d, 0, 0, 0, 0) for d in filters.days], False, [], [], 0, None
        )
    q = _tracker_q(filters)
    tasks = list(
        Task.objects.filter(q, completed_at__gte=filters.start, completed_at__lt=filters.end)
        .order_by("-completed_at")
        .values_list("completed_at", "files_changed")[: JSON_SAMPLE_LIMIT + 1]
    )
    sampled = len(tasks) > JSON_SAMPLE_LIMIT
    per_day: dict[dt.date, list[int]] = {day: [0, 0, 0, 0] for day in filters.days}
    for completed_at, changed in tasks[:JSON_SAMPLE_LIMIT]:
        counts = per_day.get(completed_at.astimezone(dt.UTC).date()) if completed_at else None
        if counts is None:
            continue
        counts[0] += 1
        for n, key in enumerate(("added", "modified", "deleted"), start=1):
            value = (changed or {}).get(key) or []
            counts[n] += len(value) if isinstance(value, list) else 0
    decisions = [
        (row["category"], row["n"])
        for row in Decision.objects.filter(
            q, created_at__gte=filters.start, created_at__lt=filters.end
        )
        .values("category")
        .annotate(n=Count("pk"))
        .order_by("-n", "category")
    ]
    blockers = Issue.objects.filter(q, requires_human_review=True)
    open_rows = list(
        blockers.filter(resolved_at__isnull=True)
        .select_related("workflow")
        .order_by("created_at", "pk")[:OPEN_BLOCKERS_SHOWN]
    )
    open_count = blockers.filter(resolved_at__isnull=True).count()
    return TrackerInsights(
        days=[TrackerDay(day, *per_day[day]) for day in filters.days],
        files_sampled=sampled,
        decisions=decisions,
        open_blockers=[
            OpenBlocker(
                issue_id=issue.pk,
                workflow_id=issue.workflow_id,
                workflow_name=issue.workflow.name,
                type=issue.type,
                description=issue.description,
                created_at=issue.created_at,
                age_seconds=(now - issue.created_at).total_seconds(),
            )
            for issue in open_rows
        ],
        open_blocker_count=open_count,
        resolved_wait=blocker_waits(filters=filters),
    )


def insight_filter(
    *,
    since: dt.date | None = None,
    until: dt.date | None = None,
    project_id: int | None = None,
    job: str | None = None,
    workflow: str | None = None,
    agent_id: str | None = None,
    dialect: str | None = None,
    clamp: bool = False,
) -> InsightFilter:
    """A checked filter: ``until`` defaults to today, ``since`` to ``DEFAULT_RANGE_DAYS``
    before it. A range that runs backwards or is over ``MAX_RANGE_DAYS`` days, or an unknown
    dialect, is ``InvalidInput``; with ``clamp`` the range is instead taken as empty, or cut to
    the ``MAX_RANGE_DAYS`` days ending at ``until``, and a note says so."""
    until = until or timezone.now().date()
    if since is None:
        try:
            since = until - dt.timedelta(days=DEFAULT_RANGE_DAYS - 1)
        except OverflowError:
            since = dt.date.min
    notes: list[str] = []
    if since > until:
        message = f"since ({since}) is after until ({until})"
        if not clamp:
            raise InvalidInput(f"{message}; give since <= until")
        notes.append(f"{message}: the range is empty")
    elif (days := (until - since).days + 1) > MAX_RANGE_DAYS:
        if not clamp:
            raise InvalidInput(
                f"The range {since} to {until} is {days:,} days; the limit is {MAX_RANGE_DAYS}"
            )
        since = until - dt.timedelta(days=MAX_RANGE_DAYS - 1)
        notes.append(f"The range was cut to the {MAX_RANGE_DAYS} days from {since} to {until}")
    valid = [value for value, _ in Dialect.CHOICES]
    if dialect is not None and dialect not in valid:
        raise InvalidInput(f"Unknown dialect '{dialect}'; use one of: {', '.join(valid)}")
    return InsightFilter(
        since=since,
        until=until,
        project_id=project_id,
        job=job or None,
        workflow=workflow or None,
        agent_id=agent_id or None,
        dialect=dialect or None,
        notes=tuple(notes),
    )
