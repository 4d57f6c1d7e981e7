"""Insights into DeepWork sessions: what happened over time, aggregated in the database.

Each read here costs a fixed number of queries whatever the number of rows (most one, each
saying how many), filtered by an ``InsightFilter`` (``insights.filters``) and bounded by its
date range: the database counts and ranks, Python only zero-fills days and shapes the answer.
Sessions per day, the busiest workflow and the agents' activity read the tallies
(``insights.models``); step times read them too, or the runs when there are few. The other
contexts' figures sit beside this module: ``insights.reviews``, ``insights.tracker`` and
``insights.dag``.
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from dataclasses import dataclass, field

from django.db.models import (
    Case,
    CharField,
    Count,
    F,
    Min,
    Q,
    Sum,
    Value,
    When,
)
from django.db.models.functions import TruncDate

from insights import histograms
from insights.filters import Dialect, InsightFilter
from insights.models import AgentTally, SessionTally, StepTimeTally
from insights.percentiles import duration, percentiles_by, seconds
from insights.tallies import FINISHED_RUN_STATUSES, month_of
from workflows.models import StepRun, WorkflowSession

# Agents drawn one by one in the per-agent charts; the rest are summed as "other agents".
TOP_AGENTS = 8
# Up to this many runs per chosen workflow, step times are worked out exactly from the runs;
# beyond it from the duration histograms (``insights.histograms``), within 1%.
EXACT_STEP_TIMES_LIMIT = 2000


def _day(field_name: str) -> TruncDate:
    return TruncDate(field_name, tzinfo=dt.UTC)


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
