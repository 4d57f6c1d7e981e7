"""The tracker's work over time: tasks completed and the files they changed per day, decisions
per category, blockers open now, and how long answered blockers waited for a person. A fixed
number of queries, bounded by the filter's date range.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from django.db.models import Count, Q
from django.utils import timezone

from insights.filters import JSON_SAMPLE_LIMIT, Dialect, InsightFilter
from insights.percentiles import Percentiles, duration, in_seconds, percentiles_by
from tracker.models import Decision, Issue, Task


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
