"""Migration reviews 0004 copies each existing review's step id from its step run."""

from __future__ import annotations

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from reviews.models import ReviewResult

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [("reviews", "0003_insights14")]
AFTER = [("reviews", "0004_revins")]


def migrate(targets) -> None:
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)


def test_the_migration_fills_each_reviews_step_id(history):
    expected = sorted(ReviewResult.objects.values_list("pk", "step_run__step_id"))
    assert {step_id for _, step_id in expected} >= {"wrap_up", "gather"}
    migrate(BEFORE)
    try:
        with connection.cursor() as cursor:
            columns = [
                c.name
                for c in connection.introspection.get_table_description(
                    cursor, ReviewResult._meta.db_table
                )
            ]
        assert "step_id" not in columns  # the reviews as they were before the copy
    finally:
        migrate(AFTER)
    assert sorted(ReviewResult.objects.values_list("pk", "step_id")) == expected
