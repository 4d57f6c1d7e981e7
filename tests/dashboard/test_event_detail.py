"""The events table's one-line detail of a review round, in today's shape and in the two shapes
rows written before it may still have."""

from __future__ import annotations

import pytest

from dashboard.templatetags.dashboard_extras import event_detail
from workflows.models import Event


@pytest.mark.parametrize(
    ("kind", "payload", "detail"),
    [
        (
            "review_failed",
            {
                "step_ids": ["part_a", "part_b"],
                "attempt": 2,
                "reviews": 3,
                "failed": 1,
                "override_reason": None,
            },
            "attempt 2 · 1 of 3 failed · steps part_a, part_b",
        ),
        (
            "review_passed",
            {
                "step_ids": ["wrap_up"],
                "attempt": 0,
                "reviews": 0,
                "failed": 0,
                "override_reason": "Checked by hand",
                "by": "olga",
            },
            "step wrap_up · Checked by hand",
        ),
        (
            "review_passed",
            {
                "step_ids": ["part_a", "part_b"],
                "attempt": 1,
                "reviews": 0,
                "failed": 0,
                "override_reason": "Fixed after the first round",
            },
            "attempt 1 · steps part_a, part_b · Fixed after the first round",
        ),
        # Old rows: external reviews without their steps, a reason for one step.
        ("review_passed", {"attempt": 2, "reviews": 3, "failed": 0}, "attempt 2 · 0 of 3 failed"),
        ("review_passed", {"step_id": "wrap_up", "override_reason": "fine"}, "step wrap_up · fine"),
        ("review_failed", {"step_ids": "not a list", "attempt": 1}, "attempt 1"),
        ("review_failed", None, ""),
    ],
)
def test_a_review_round_reads_in_one_line(kind, payload, detail):
    assert event_detail(Event(kind=kind, payload=payload)) == detail
