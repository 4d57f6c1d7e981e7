"""Migrations reviews 0004 and 0005 copy onto each existing review its step run's step id and
its session's project, generation, job and workflow."""

from __future__ import annotations

import pytest
from django.db import connection

from reviews.models import ReviewResult
from tests.support.model_moves import migrate

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [("reviews", "0003_insights14")]
COPIED = ("project_id", "generation", "job_id", "job_name", "workflow_name")


def test_the_migrations_copy_each_reviews_step_and_session(history):
    expected_steps = sorted(ReviewResult.objects.values_list("pk", "step_run__step_id"))
    assert {step_id for _, step_id in expected_steps} >= {"wrap_up", "gather"}
    expected_sessions = sorted(
        ReviewResult.objects.values_list("pk", *(f"session__{field}" for field in COPIED))
    )
    assert {row[2] for row in expected_sessions} == {"0.9"}
    migrate(BEFORE)
    try:
        with connection.cursor() as cursor:
            columns = [
                c.name
                for c in connection.introspection.get_table_description(
                    cursor, ReviewResult._meta.db_table
                )
            ]
        # The reviews as they were before the copies.
        assert not {"step_id", *COPIED} & set(columns)
    finally:
        migrate()
    assert sorted(ReviewResult.objects.values_list("pk", "step_id")) == expected_steps
    assert sorted(ReviewResult.objects.values_list("pk", *COPIED)) == expected_sessions
