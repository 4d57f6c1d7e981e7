"""Insights into reviews and the people who rule on them, aggregated in the database.

Beside the sessions' figures (``insights.selectors``): pass rates per review and per
criterion, review rounds per step run, rulings by people, and how long work waited on
reviewers and on people. One query each, bounded by the filter's date range.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

from django.db.models import (
    Count,
    DateTimeField,
    ExpressionWrapper,
    F,
    Max,
    OuterRef,
    Q,
    Subquery,
    TextField,
)
from django.db.models.functions import Cast, Coalesce

from insights.durations import exact_duration, percentiles_once
from insights.filters import JSON_SAMPLE_LIMIT, Dialect, InsightFilter
from insights.percentiles import Percentiles, in_seconds, percentiles_by
from reviews.models import HumanDecision, ReviewResult
from workflows.models import WorkflowSession

# Failing criteria listed with their feedback, and feedback samples kept per criterion.
TOP_FAILED_CRITERIA = 10
FEEDBACK_SAMPLES = 3
# Reviewers that judge work; a person's verdict (an override reason, requested changes) is a
# ruling, counted with the rulings.
JUDGES = (ReviewResult.Reviewer.SELF, ReviewResult.Reviewer.EXTERNAL)


def _reviews(filters: InsightFilter) -> Any:
    # Verdicts carry their session's project, generation, job and workflow: only an agent
    # filter joins the sessions.
    return ReviewResult.objects.filter(
        filters.copied_q(agent="session__agent__agent_id"),
        created_at__gte=filters.start,
        created_at__lt=filters.end,
    )


@dataclass(frozen=True)
class ReviewPassRate:
    step_id: str
    run_each: str
    reviews: int
    passed: int

    @property
    def rate(self) -> float:
        return self.passed / self.reviews if self.reviews else 0.0


def review_pass_rates(*, filters: InsightFilter) -> list[ReviewPassRate]:
    """Per review (a step's ``run_each``): verdicts given by reviewers in the range and how
    many passed, most reviewed first: one query."""
    if not filters.wants(Dialect.DEEPWORK):
        return []
    rows = (
        _reviews(filters)
        .filter(reviewer_kind__in=JUDGES)
        .values("step_id", "run_each")
        # ``passed`` (never null) rather than the primary key: the count reads the index alone.
        .annotate(n=Count("passed"), ok=Count("passed", filter=Q(passed=True)))
        .order_by("-n", "step_id", "run_each")
    )
    return [ReviewPassRate(row["step_id"], row["run_each"], row["n"], row["ok"]) for row in rows]


@dataclass(frozen=True)
class FeedbackSample:
    session_id: str
    step_id: str
    feedback: str


@dataclass
class CriterionRate:
    criterion: str
    results: int = 0
    passed: int = 0
    samples: list[FeedbackSample] = field(default_factory=list)

    @property
    def failed(self) -> int:
        return self.results - self.passed

    @property
    def rate(self) -> float:
        return self.passed / self.results if self.results else 0.0


@dataclass(frozen=True)
class CriteriaInsights:
    criteria: list[CriterionRate]  # most failed first
    reviews_read: int
    sampled: bool  # True when only the newest JSON_SAMPLE_LIMIT reviews were read


def criterion_pass_rates(*, filters: InsightFilter) -> CriteriaInsights:
    """Per quality criterion: results and passes, most failed first, each with up to
    ``FEEDBACK_SAMPLES`` pieces of feedback from its newest failures.

    Criteria sit in each verdict's JSON list, which SQLite and PostgreSQL unnest with
    different functions, so the lists are read back, newest first, at most
    ``JSON_SAMPLE_LIMIT`` of them (``sampled`` says when the range held more): two queries.
    """
    if not filters.wants(Dialect.DEEPWORK):
        return CriteriaInsights([], 0, False)
    # The session's foreign key only: naming the session of every row would join a large
    # table; only the few samples kept are named, by a small read below. The lists come as
    # text, decoded here once each (the JSON field's converter costs as much again).
    rows = list(
        _reviews(filters)
        .filter(reviewer_kind__in=JUDGES)
        .exclude(criteria_results=[])
        .order_by("-created_at", "-pk")
        .values_list(Cast("criteria_results", TextField()), "feedback", "session_id", "step_id")[
            : JSON_SAMPLE_LIMIT + 1
        ]
    )
    sampled = len(rows) > JSON_SAMPLE_LIMIT
    rows = rows[:JSON_SAMPLE_LIMIT]
    # Plain counters in the loop (it sees every criterion of thousands of verdicts).
    results_by: Counter[str] = Counter()
    passed_by: Counter[str] = Counter()
    pending: dict[str, list[tuple[int, str, str]]] = defaultdict(list)
    for text, feedback, session_pk, step_id in rows:
        results = json.loads(text)
        for item in results if isinstance(results, list) else []:
            if not isinstance(item, dict):
                continue
            criterion = item.get("criterion")
            if not isinstance(criterion, str):
                continue
            results_by[criterion] += 1
            if item.get("passed") is True:
                passed_by[criterion] += 1
            elif len(kept_for := pending[criterion]) < FEEDBACK_SAMPLES:
                said = item.get("feedback") or feedback or ""
                kept_for.append((session_pk, step_id, str(said)))
    rates = {
        criterion: CriterionRate(criterion, n, passed_by[criterion])
        for criterion, n in results_by.items()
    }
    kept = [sample for samples in pending.values() for sample in samples]
    session_ids = dict(
        WorkflowSession.objects.filter(pk__in={s for s, _, _ in kept}).values_list(
            "pk", "session_id"
        )
    )
    for criterion, samples in pending.items():
        rates[criterion].samples = [
            FeedbackSample(session_ids[s], step_id, text) for s, step_id, text in samples
        ]
    ordered = sorted(rates.values(), key=lambda r: (-r.failed, r.rate, r.criterion))
    return CriteriaInsights(ordered, len(rows), sampled)


@dataclass(frozen=True)
class StepAttempts:
    """How many of a step's runs took 1, 2, 3 … review rounds (index 0 is one round)."""

    step_id: str
    runs_by_rounds: list[int]

    @property
    def runs(self) -> int:
        return sum(self.runs_by_rounds)


def attempts_per_step(*, filters: InsightFilter) -> list[StepAttempts]:
    """Per step: how many runs were reviewed in 1, 2, 3 … rounds (the highest attempt
    reviewed), from how many runs reached each attempt: one query over (step, attempt)."""
    if not filters.wants(Dialect.DEEPWORK):
        return []
    rows = (
        _reviews(filters)
        .filter(reviewer_kind__in=JUDGES, attempt__gte=1)
        .values("step_id", "attempt")
        .annotate(runs=Count("step_run", distinct=True))
        .order_by()
    )
    reached: dict[str, dict[int, int]] = defaultdict(dict)
    for row in rows:
        reached[row["step_id"]][row["attempt"]] = row["runs"]
    result = []
    for step_id in sorted(reached):
        counts = reached[step_id]
        top = max(counts)
        result.append(
            StepAttempts(
                step_id,
                [counts.get(k, 0) - counts.get(k + 1, 0) for k in range(1, top + 1)],
            )
        )
    return result


@dataclass(frozen=True)
class PersonRulings:
    person: str
    overrides: int
    changes_requested: int

    @property
    def total(self) -> int:
        return self.overrides + self.changes_requested


def rulings_by_person(*, filters: InsightFilter) -> list[PersonRulings]:
    """Per person: reviews overridden and changes requested in the range, most first: one
    query."""
    if not filters.wants(Dialect.DEEPWORK):
        return []
    kind = HumanDecision.Kind
    rows = (
        HumanDecision.objects.filter(
            filters.session_q("step_run__session__"),
            created_at__gte=filters.start,
            created_at__lt=filters.end,
        )
        .values("decided_by_name")
        .annotate(
            overrides=Count("pk", filter=Q(kind=kind.OVERRIDE)),
            changes=Count("pk", filter=Q(kind=kind.REQUEST_CHANGES)),
        )
        .order_by("decided_by_name")
    )
    people = [
        PersonRulings(row["decided_by_name"], row["overrides"], row["changes"]) for row in rows
    ]
    return sorted(people, key=lambda p: (-p.total, p.person))


@dataclass(frozen=True)
class Waits:
    """Median and p90 seconds of each kind of wait; ``None`` when nothing waited."""

    reviewer: Percentiles | None  # one reviewer's verdict (external reviews)
    person: Percentiles | None  # from the request (a failed review) to a person's ruling


def waits(*, filters: InsightFilter) -> Waits:
    """How long work waited: on a reviewer (each external review's own time), and on a person
    (from the step's latest failed review before the ruling, or from the step becoming current
    when none failed, to the ruling). Two queries."""
    if not filters.wants(Dialect.DEEPWORK):
        return Waits(None, None)
    reviewer = percentiles_by(
        _reviews(filters).filter(duration_ms__isnull=False), value=F("duration_ms")
    ).get(None)
    # The newest failure as an aggregate, not the first row of a sorted subquery: it is looked
    # up for every ruling, and a MAX needs no sort.
    latest_failure = (
        ReviewResult.objects.filter(
            step_run=OuterRef("step_run"), passed=False, created_at__lte=OuterRef("created_at")
        )
        .order_by()
        .values("step_run")
        .annotate(latest=Max("created_at"))
        .values("latest")
    )
    rulings = HumanDecision.objects.filter(
        filters.session_q("step_run__session__"),
        created_at__gte=filters.start,
        created_at__lt=filters.end,
    ).annotate(
        requested_at=ExpressionWrapper(
            Coalesce(Subquery(latest_failure), F("step_run__started_at")),
            output_field=DateTimeField(),
        )
    )
    # Ranked once per ruling: the request time is a subquery, costly to compute again in every
    # window on SQLite.
    person = percentiles_once(rulings, value=exact_duration("created_at", "requested_at")).get(None)
    return Waits(in_seconds(reviewer, scale=0.001), in_seconds(person))
