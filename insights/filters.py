"""What an insight covers: the ``InsightFilter`` every insight read takes (a date range of whole
UTC days, at most ``MAX_RANGE_DAYS``, and the project, job, workflow, agent and dialect it is
narrowed to), and ``insight_filter``, which checks one made from a page's or a request's
arguments.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from django.db.models import Q, QuerySet
from django.utils import timezone

from workflows.errors import InvalidInput
from workflows.models import Job

# The widest date range one page aggregates (a year, and a leap day).
MAX_RANGE_DAYS = 366
DEFAULT_RANGE_DAYS = 30
# Rows read back to count JSON lists in Python (tasks' changed files, review criteria): the
# newest ones.
JSON_SAMPLE_LIMIT = 5000


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


def _dag_jobs() -> QuerySet[Job, Any]:
    """The jobs of DAG executions (few: one per defined DAG workflow)."""
    return Job.objects.filter(source=Job.Source.DEFINED).values("pk")


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
