"""A step run's quality-attempt count: the number DeepWork's review cap compares against.

The count is the engine's column, written here for the finish pipeline (``reviews.services``),
which decides when a hand-in uses up an attempt, gives one back or starts again.
"""

from __future__ import annotations

from collections.abc import Iterable

from django.db.models import F

from workflows.models import StepRun


def step_runs_count_quality_attempt(*, run_ids: Iterable[int]) -> int:
    """Use up one attempt on each run; the first run's count afterwards (an entry's runs are
    judged together, so they count alike)."""
    ids = list(run_ids)
    StepRun.objects.filter(pk__in=ids).update(quality_attempts=F("quality_attempts") + 1)
    return StepRun.objects.values_list("quality_attempts", flat=True).get(pk=ids[0])


def step_runs_return_quality_attempt(*, run_ids: Iterable[int]) -> None:
    """Give back the attempt a hand-in used when nothing judged it (the reviewer never ran)."""
    StepRun.objects.filter(pk__in=list(run_ids), quality_attempts__gt=0).update(
        quality_attempts=F("quality_attempts") - 1
    )


def step_runs_reset_quality_attempts(*, run_ids: Iterable[int]) -> None:
    """Start counting again: the runs passed their reviews."""
    StepRun.objects.filter(pk__in=list(run_ids)).update(quality_attempts=0)
