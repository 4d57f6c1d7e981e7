"""``exact_duration`` gives the microseconds Python's own subtraction gives, on SQLite (where it
reads the stored text with SQLite's date functions) as on PostgreSQL."""

from __future__ import annotations

import datetime as dt

import pytest
from django.db.models.functions import Now

from tests.insights.conftest import D1, at
from workflows.models import StepRun
from workflows.selectors.durations import exact_duration
from workflows.selectors.insights import duration, seconds

pytestmark = pytest.mark.django_db

T = at(D1, 10)
US = dt.timedelta(microseconds=1)
PAIRS = [
    (T, T + dt.timedelta(seconds=90)),
    (T, T + 123_456 * US),
    # A fraction SQLite's strftime would round up to the next whole second.
    (T + 999_600 * US, T + dt.timedelta(seconds=2, microseconds=999_999)),
    (T + 999_999 * US, T + dt.timedelta(seconds=1)),
    (T + 500_001 * US, T + 499_999 * US),  # ends before it began: negative
    (T - dt.timedelta(days=400, microseconds=7), T + dt.timedelta(hours=5)),
    (T, None),
]


def test_exact_duration_matches_python(history):
    runs = list(StepRun.objects.order_by("pk")[: len(PAIRS)])
    assert len(runs) == len(PAIRS)
    for run, (begin, end) in zip(runs, PAIRS, strict=True):
        StepRun.objects.filter(pk=run.pk).update(started_at=begin, completed_at=end)
    found = dict(
        StepRun.objects.filter(pk__in=[r.pk for r in runs])
        .annotate(wait=exact_duration("completed_at", "started_at"))
        .values_list("pk", "wait")
    )
    for run, (begin, end) in zip(runs, PAIRS, strict=True):
        expected = None if end is None else (end - begin).total_seconds()
        assert seconds(found[run.pk]) == expected, (begin, end)


def test_exact_duration_reads_times_the_database_wrote(history):
    """``Now()`` on SQLite writes milliseconds (three digits): the same figure as Django's own
    subtraction."""
    run = StepRun.objects.order_by("pk").first()
    StepRun.objects.filter(pk=run.pk).update(
        started_at=T + 250_001 * US, completed_at=Now(), ready_at=Now()
    )
    row = (
        StepRun.objects.filter(pk=run.pk)
        .annotate(
            exact=exact_duration("completed_at", "started_at"),
            django=duration("completed_at", "started_at"),
            zero=exact_duration("completed_at", "ready_at"),
        )
        .values("exact", "django", "zero")
        .get()
    )
    assert seconds(row["exact"]) == seconds(row["django"])
    assert seconds(row["zero"]) == 0
