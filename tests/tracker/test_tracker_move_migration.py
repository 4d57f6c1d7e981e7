"""The tracker's six models moved from ``workflows`` to ``tracker`` with no SQL: a database
holding tracked workflows, phases, tasks (with a sub-task), decisions, issues (a blocker a
person answered) and milestones, taken back to before the move and forward again, keeps every
row, read through ``tracker.models``; the content types keep their rows, so permissions, group
grants and the admin's history stay attached."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User

from tests.support.model_moves import (
    assert_the_move_round_trips,
    every_row,
    grants_before_the_move,
)
from tests.tracker.test_admin import track
from tracker import services as tracker
from tracker.models import Decision, Issue, Milestone, Phase, Task, TrackedWorkflow

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [("workflows", "0015_agent_lease"), ("tracker", None)]
MODELS = [TrackedWorkflow, Phase, Task, Decision, Issue, Milestone]


def test_tracker_rows_and_grants_survive_the_move(project, agent):
    person = User.objects.create_user("ann")
    done = track(project, agent, "alpha", complete=True)
    track(project, agent, "beta")
    tracker.blocker_resolve(
        issue_id=done.blocker.pk, by=person, resolution="It is public", via="dashboard"
    )
    expected = {model: every_row(model) for model in MODELS}
    assert all(len(rows) >= 2 for rows in expected.values())
    assert any(task.parent_id for task in Task.objects.all())
    assert Issue.objects.filter(resolved_by=person).exists()

    grants = grants_before_the_move(app="tracker", models=MODELS, edited=done.task, person=person)
    assert_the_move_round_trips(before=BEFORE, expected=expected, grants=grants, person=person)
    # The services still write to the tables they read.
    tracker.milestone_log(project=project, agent=agent, task_id=str(done.task.pk), message="on")
    assert Milestone.objects.count() == len(expected[Milestone]) + 1
