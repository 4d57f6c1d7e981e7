"""Under self-review the reviews page counts review rounds per step run: every verdict is
numbered from round 1, whoever gave it, so runs passed by the agent's own review are counted
(they were numbered 0 and left out, and the page said "Nothing in this range")."""

from __future__ import annotations

import datetime as dt
import re

import pytest
from asgiref.sync import sync_to_async
from django.test import Client

from insights import reviews as review_insights
from insights.filters import InsightFilter
from tests.reviews.generations.conftest import DRAFT, driver, generation  # noqa: F401
from tests.support.factories import make_user

pytestmark = pytest.mark.django_db(transaction=True)


def attempts_section(html: str) -> str:
    return re.search(r'<section[^>]*data-insight="attempts">(.*?)</section>', html, re.S).group(1)


async def test_runs_passed_by_self_review_show_their_rounds(driver):  # noqa: F811
    await driver.start()
    asked = await driver.finish_ok(DRAFT)
    await driver.run_asked_reviews(asked)
    assert (await driver.hand_in_reviewed(DRAFT))["status"] == "next_step"

    today = dt.datetime.now(dt.UTC).date()
    found = await sync_to_async(review_insights.attempts_per_step)(
        filters=InsightFilter(since=today, until=today)
    )
    # 0.9 records the agent's reason as its one verdict (round 1); 0.14 records the task it
    # asked for (round 1) and its pass on the next hand-in (round 2).
    rounds = [1] if driver.generation == "0.9" else [0, 1]
    assert [(a.step_id, a.runs_by_rounds) for a in found] == [("draft", rounds)]

    @sync_to_async
    def page() -> str:
        client = Client()
        client.force_login(make_user(username="wanda", groups=("Watchers",)))
        day = today.isoformat()
        return client.get("/insights/reviews/", {"since": day, "until": day}).content.decode()

    section = attempts_section(await page())
    assert 'data-testid="chart"' in section
    assert "Nothing in this range" not in section


def test_the_migration_numbers_existing_verdicts_from_round_one(history):
    """Verdicts stored before the numbering changed: a run with a round-0 verdict has all its
    verdicts moved up by one (their order kept), other runs are left as they were."""
    from django.db import connection
    from django.db.migrations.executor import MigrationExecutor

    from reviews.models import ReviewResult

    run_ids = sorted(set(ReviewResult.objects.values_list("step_run_id", flat=True)))
    from_zero, untouched = run_ids[0], run_ids[1]
    first, *rest = ReviewResult.objects.filter(step_run_id=from_zero).order_by("id")
    ReviewResult.objects.filter(pk=first.pk).update(attempt=0)
    ReviewResult.objects.filter(pk__in=[r.pk for r in rest]).update(attempt=1)
    before = {
        run: list(
            ReviewResult.objects.filter(step_run_id=run)
            .order_by("id")
            .values_list("attempt", flat=True)
        )
        for run in (from_zero, untouched)
    }

    executor = MigrationExecutor(connection)
    executor.migrate([("reviews", "0005_review_catalog")])
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())

    after = {
        run: list(
            ReviewResult.objects.filter(step_run_id=run)
            .order_by("id")
            .values_list("attempt", flat=True)
        )
        for run in (from_zero, untouched)
    }
    assert after[from_zero] == [a + 1 for a in before[from_zero]]
    assert after[from_zero][0] == 1
    assert after[untouched] == before[untouched]
    assert min(before[untouched]) >= 1
