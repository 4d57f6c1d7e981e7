"""Every insight against figures worked out by hand from the history in conftest.py."""

from __future__ import annotations

import pytest

from insights import reviews as review_insights
from insights import selectors
from insights import tracker as tracked
from reviews.models import ReviewResult, copied_from
from tests.insights.conftest import D1, D2, D3, NOW, at, in_range

pytestmark = pytest.mark.django_db


def outcomes(filters):
    return [
        (d.day, d.completed, d.aborted, d.active)
        for d in selectors.sessions_per_day(filters=filters)
    ]


def test_sessions_per_day_by_outcome(history):
    # s6 started before the range; s7 is the other project's.
    assert outcomes(in_range()) == [(D1, 1, 1, 0), (D2, 2, 0, 0), (D3, 1, 0, 1)]


@pytest.mark.parametrize(
    ("filters", "expected"),
    [
        ({"project": "p1"}, [(D1, 1, 1, 0), (D2, 1, 0, 0), (D3, 1, 0, 1)]),
        ({"workflow": "quick"}, [(D1, 0, 0, 0), (D2, 0, 0, 0), (D3, 1, 0, 0)]),
        ({"agent_id": "a2"}, [(D1, 0, 0, 0), (D2, 1, 0, 0), (D3, 0, 0, 1)]),
        ({"job": "nope"}, [(D1, 0, 0, 0), (D2, 0, 0, 0), (D3, 0, 0, 0)]),
        ({"dialect": "tracker"}, [(D1, 0, 0, 0), (D2, 0, 0, 0), (D3, 0, 0, 0)]),
    ],
)
def test_sessions_per_day_filters(history, filters, expected):
    if filters.get("project") == "p1":
        filters = {"project_id": history.p1.pk}
    assert outcomes(in_range(**filters)) == expected


def test_the_busiest_workflow_is_chosen_unless_named(history):
    assert selectors.busiest_workflow(filters=in_range()) == selectors.WorkflowChoice(
        "demo", "main"
    )
    named = in_range(job="demo", workflow="quick")
    assert selectors.busiest_workflow(filters=named) == selectors.WorkflowChoice("demo", "quick")


def times(filters, workflow="main"):
    choice = selectors.WorkflowChoice("demo", workflow)
    return [
        (t.step_id, t.runs, t.median_seconds, t.p90_seconds)
        for t in selectors.step_times(filters=filters, choice=choice)
    ]


def test_time_per_step_median_and_p90(history):
    # gather, completed in range: 10, 20, 30 and s3's first try, 500 s, sent back by go_to_step
    # but finished all the same (p1), and 40 (p2); the active run and s6's 1000 s run (D0) are
    # left out. Nearest rank of 5 values: the median is the 3rd (30), p90 the 5th (500).
    # wrap_up: 60, 120: the 1st and the 2nd.
    assert times(in_range()) == [
        ("gather", 5, 30.0, 500.0),
        ("part_a", 1, 5.0, 5.0),
        ("part_b", 1, 7.0, 7.0),
        ("wrap_up", 2, 60.0, 120.0),
    ]
    # p1 alone: 10, 20, 30, 500: the median is the 2nd, p90 the 4th.
    assert times(in_range(project_id=history.p1.pk))[0] == ("gather", 4, 20.0, 500.0)
    assert times(in_range(), workflow="quick") == [("gather", 1, 3.0, 3.0)]


def test_agent_activity(history):
    rows = {
        a.agent_id: (a.steps_per_day, a.steps, a.failed_reviews, a.aborts)
        for a in selectors.agent_activity(filters=in_range())
    }
    # a1: s1's four runs and s2's gather on D1, s5's gather on D3; one failed round (s1; s6's is
    # before the range) and s2 aborted. a2: s3's gather and wrap_up on D2. b1: s7's gather.
    assert rows == {
        "a1": ([5, 0, 1], 6, 1, 1),
        "a2": ([0, 2, 0], 2, 1, 0),
        "b1": ([0, 1, 0], 1, 0, 0),
    }


def test_agent_activity_sums_the_rest_as_other_agents(history, monkeypatch):
    monkeypatch.setattr(selectors, "TOP_AGENTS", 1)
    rows = [
        (a.agent_id, a.steps_per_day, a.others)
        for a in selectors.agent_activity(filters=in_range())
    ]
    assert rows == [("a1", [5, 0, 1], []), ("other agents", [0, 3, 0], ["a2", "b1"])]


def test_review_pass_rates(history):
    rates = review_insights.review_pass_rates(filters=in_range())
    assert [(r.step_id, r.run_each, r.reviews, r.passed) for r in rates] == [
        ("wrap_up", "summary.md", 3, 1)
    ]


def test_criterion_pass_rates_most_failed_first_with_feedback(history):
    found = review_insights.criterion_pass_rates(filters=in_range())
    assert not found.sampled
    assert found.reviews_read == 3
    assert [(c.criterion, c.results, c.passed, c.failed) for c in found.criteria] == [
        ("Complete", 3, 1, 2),
        ("Clear", 3, 3, 0),
    ]
    # Newest failure first.
    assert [(s.session_id, s.step_id, s.feedback) for s in found.criteria[0].samples] == [
        ("s3", "wrap_up", "Too short"),
        ("s1", "wrap_up", "Misses note 3"),
    ]


def test_criteria_skip_what_is_not_a_criterion_and_count_only_true_as_passed(history):
    """Verdicts are stored as reviewers give them: a list that is not one, items that are not
    criteria, a ``passed`` that is not ``true`` (a failure), feedback left empty (the verdict's
    own stands in)."""
    run = history.runs["s3.wrap_up"]
    odd = [
        {"criterion": "Complete", "passed": True},
        {"criterion": "Complete"},
        {"criterion": 7, "passed": False},
        "Clear",
        {"criterion": "Cited", "passed": "yes", "feedback": ""},
    ]
    for n, criteria in enumerate(({"criterion": "Clear", "passed": False}, odd)):
        ReviewResult.objects.create(
            step_run=run,
            session=run.session,
            **copied_from(run.session),
            step_id=run.step_id,
            attempt=3 + n,
            run_each="summary.md",
            passed=False,
            feedback=f"verdict {n}",
            criteria_results=criteria,
            reviewer_kind=ReviewResult.Reviewer.EXTERNAL,
            created_at=at(D3, 12, n),
        )
    found = review_insights.criterion_pass_rates(filters=in_range())
    assert found.reviews_read == 5
    rows = [
        (c.criterion, c.results, c.passed, [s.feedback for s in c.samples]) for c in found.criteria
    ]
    assert rows == [
        ("Complete", 5, 2, ["verdict 1", "Too short", "Misses note 3"]),
        ("Cited", 1, 0, ["verdict 1"]),
        ("Clear", 3, 3, []),
    ]


def test_criteria_are_sampled_beyond_the_limit(history, monkeypatch):
    monkeypatch.setattr(review_insights, "JSON_SAMPLE_LIMIT", 2)
    found = review_insights.criterion_pass_rates(filters=in_range())
    assert found.sampled
    assert found.reviews_read == 2
    assert [(c.criterion, c.results, c.passed) for c in found.criteria] == [
        ("Complete", 2, 1),
        ("Clear", 2, 2),
    ]


def test_attempts_per_step(history):
    # wrap_up: s1 reached attempt 2, s3 attempt 1 only.
    found = review_insights.attempts_per_step(filters=in_range())
    assert [(a.step_id, a.runs_by_rounds) for a in found] == [("wrap_up", [1, 1])]


def test_rulings_by_person(history):
    found = review_insights.rulings_by_person(filters=in_range())
    assert [(p.person, p.overrides, p.changes_requested) for p in found] == [
        ("dana", 1, 0),
        ("eve", 0, 1),
    ]
    assert review_insights.rulings_by_person(filters=in_range(agent_id="a1")) == []


def test_waits_on_reviewers_and_people(history):
    found = review_insights.waits(filters=in_range())
    # Reviews in range took 4 s, 6 s, 2 s: median the 2nd of 2,4,6; p90 the 3rd.
    assert (found.reviewer.count, found.reviewer.median, found.reviewer.p90) == (3, 4.0, 6.0)
    # dana ruled 20 min after s3's failed review; eve 5 min after s4's gather began (no review).
    assert (found.person.count, found.person.median, found.person.p90) == (2, 300.0, 1200.0)


def test_tracker_insights(history):
    found = tracked.tracker_insights(filters=in_range(), now=NOW)
    assert [(d.day, d.tasks, d.added, d.modified, d.deleted) for d in found.days] == [
        (D1, 1, 2, 1, 0),
        (D2, 1, 0, 1, 1),
        (D3, 0, 0, 0, 0),
    ]
    assert found.decisions == [("ARCHITECTURE", 2), ("TRADE_OFF", 1)]
    assert found.open_blocker_count == 1
    assert [(b.description, b.age_seconds) for b in found.open_blockers] == [
        ("Which API?", 86400.0)
    ]
    # One blocker answered in the range, two hours after it was raised.
    assert (found.resolved_wait.count, found.resolved_wait.median) == (1, 7200.0)
    assert tracked.tracker_insights(filters=in_range(dialect="deepwork"), now=NOW).decisions == []
    assert tracked.tracker_insights(filters=in_range(agent_id="a2"), now=NOW).decisions == []
