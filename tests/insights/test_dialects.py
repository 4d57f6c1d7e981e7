"""The dialect filter splits DeepWork 0.9 sessions from 0.14 ones, in every DeepWork insight,
and keeps DeepWork figures out of the tracker and DAG dialects. Figures worked out by hand
from the history in conftest, with s2 and s3 made 0.14 sessions."""

from __future__ import annotations

import pytest

from insights import reviews, selectors
from insights.filters import insight_filter
from insights.tallies import insight_tallies_rebuild
from reviews.models import ReviewResult
from tests.insights.conftest import D1, D2, D3, in_range
from workflows.errors import InvalidInput
from workflows.models import WorkflowSession

pytestmark = pytest.mark.django_db


@pytest.fixture
def split(history):
    WorkflowSession.objects.filter(session_id__in=["s2", "s3"]).update(generation="0.14")
    # Rows that copy a session's generation (the session never changes it in practice).
    ReviewResult.objects.filter(session__session_id__in=["s2", "s3"]).update(generation="0.14")
    insight_tallies_rebuild()
    return history


def outcomes(filters):
    return [
        (d.day, d.completed, d.aborted, d.active)
        for d in selectors.sessions_per_day(filters=filters)
    ]


def test_sessions_per_day_per_generation(split):
    # s2 (D1, aborted) and s3 (D2, completed) are 0.14; the rest in range are 0.9: s1 (D1),
    # s7 (D2, the other project), s5 and the active s4 (D3).
    assert outcomes(in_range(dialect="deepwork-0.14")) == [
        (D1, 0, 1, 0),
        (D2, 1, 0, 0),
        (D3, 0, 0, 0),
    ]
    assert outcomes(in_range(dialect="deepwork-0.9")) == [
        (D1, 1, 0, 0),
        (D2, 1, 0, 0),
        (D3, 1, 0, 1),
    ]
    both = [(D1, 1, 1, 0), (D2, 2, 0, 0), (D3, 1, 0, 1)]
    assert outcomes(in_range(dialect="deepwork")) == both
    assert outcomes(in_range()) == both
    for other in ("tracker", "dag"):
        assert outcomes(in_range(dialect=other)) == [(D1, 0, 0, 0), (D2, 0, 0, 0), (D3, 0, 0, 0)]


def test_time_per_step_per_generation(split):
    choice = selectors.WorkflowChoice("demo", "main")
    rows = [
        (t.step_id, t.runs, t.median_seconds, t.p90_seconds)
        for t in selectors.step_times(filters=in_range(dialect="deepwork-0.14"), choice=choice)
    ]
    # 0.14 gather runs: s2's 20 s, s3's 30 s and its first try's 500 s (sent back, but
    # finished): the median is the 2nd of 3, p90 the 3rd. wrap_up: s3's 120 s.
    assert rows == [("gather", 3, 30.0, 500.0), ("wrap_up", 1, 120.0, 120.0)]
    rows = [
        (t.step_id, t.runs, t.median_seconds, t.p90_seconds)
        for t in selectors.step_times(filters=in_range(dialect="deepwork-0.9"), choice=choice)
    ]
    # 0.9 gather: s1's 10 s and s7's 40 s; s1's parts and wrap_up.
    assert rows == [
        ("gather", 2, 10.0, 40.0),
        ("part_a", 1, 5.0, 5.0),
        ("part_b", 1, 7.0, 7.0),
        ("wrap_up", 1, 60.0, 60.0),
    ]


def test_agent_activity_per_generation(split):
    rows = {
        a.agent_id: (a.steps_per_day, a.steps, a.failed_reviews, a.aborts)
        for a in selectors.agent_activity(filters=in_range(dialect="deepwork-0.14"))
    }
    # a1: s2's gather on D1 and s2 aborted; a2: s3's gather and wrap_up on D2, its failed round.
    assert rows == {"a1": ([1, 0, 0], 1, 0, 1), "a2": ([0, 2, 0], 2, 1, 0)}


def test_reviews_and_rulings_per_generation(split):
    # In range: s1's two rounds on wrap_up (0.9; failed, then passed) and s3's one (0.14,
    # failed); dana's override is on s3 (0.14), eve's requested changes on s4 (0.9).
    def rates(dialect):
        return [
            (r.step_id, r.reviews, r.passed)
            for r in reviews.review_pass_rates(filters=in_range(dialect=dialect))
        ]

    assert rates("deepwork-0.9") == [("wrap_up", 2, 1)]
    assert rates("deepwork-0.14") == [("wrap_up", 1, 0)]

    def people(dialect):
        return [
            (p.person, p.overrides, p.changes_requested)
            for p in reviews.rulings_by_person(filters=in_range(dialect=dialect))
        ]

    assert people("deepwork-0.14") == [("dana", 1, 0)]
    assert people("deepwork-0.9") == [("eve", 0, 1)]


def test_an_unknown_dialect_is_refused():
    with pytest.raises(InvalidInput, match="deepwork-0.14"):
        insight_filter(dialect="deepwork-1.0")
