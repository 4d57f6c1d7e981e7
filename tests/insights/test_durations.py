"""``exact_duration`` gives the microseconds Python's own subtraction gives, on SQLite (where it
reads the stored text with SQLite's date functions) as on PostgreSQL."""

from __future__ import annotations

import datetime as dt

import pytest
from django.db.models import F, Max
from django.db.models.functions import Now

from insights.durations import exact_duration, percentiles_once
from insights.percentiles import duration, percentiles_by, seconds
from tests.insights.conftest import D1, at
from workflows.models import StepRun

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


@pytest.mark.parametrize("group", [None, "step_id"])
def test_percentiles_once_ranks_as_percentiles_by(history, group):
    """Both nearest ranks, with one value, two, an odd and an even number of them."""
    for n, run in enumerate(StepRun.objects.order_by("pk")):
        # Distinct durations out of their rows' order: 7, 4, 1, 8, 5, 2 ... seconds.
        StepRun.objects.filter(pk=run.pk).update(
            completed_at=F("started_at") + dt.timedelta(seconds=(n * 7) % 10 + n)
        )
    runs = StepRun.objects.filter(completed_at__isnull=False)
    value = exact_duration("completed_at", "started_at")
    for subset in (runs.exclude(pk=runs.order_by("pk")[0].pk), runs.filter(pk__lt=0)):
        # An odd count (11 values), and nothing at all.
        assert percentiles_once(subset, value=value, group=group, largest=True) == (
            percentiles_by(subset, value=value, group=group, extra={"max": Max(value)})
        )
    once = percentiles_once(runs, value=value, group=group, largest=True)
    assert once == percentiles_by(runs, value=value, group=group, extra={"max": Max(value)})
    counts = sorted(p.count for p in once.values())
    assert counts == ([12] if group is None else [1, 1, 2, 8])
    everything = sorted(seconds(d) for d in runs.annotate(d=value).values_list("d", flat=True))
    if group is None:
        # The 6th and the 11th of 12 values (ceil(12/2), ceil(9*12/10)).
        assert (seconds(once[None].median), seconds(once[None].p90)) == (
            everything[5],
            everything[10],
        )
        assert seconds(once[None].extra["max"]) == everything[-1]
