"""The insight tallies moved from ``workflows`` to ``insights`` with no SQL: a database holding
session, agent (day and month, one with no agent) and step-time tallies, taken back to before
the move and forward again, keeps every row, read through ``insights.models``; the content
types keep their rows, so permissions, group grants and the admin's history stay attached,
and the event writer still counts into the same tables."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User

from insights.models import AgentTally, SessionTally, StepTimeTally
from insights.tallies import insight_tallies_summed
from tests.insights.test_tallies import start
from tests.support.model_moves import (
    assert_the_move_round_trips,
    every_row,
    grants_before_the_move,
)

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [("workflows", "0016_hand_over_tracker"), ("insights", None)]
MODELS = [SessionTally, AgentTally, StepTimeTally]


def test_tally_rows_and_grants_survive_the_move(history, project, agent, catalog):
    person = User.objects.create_user("ann")
    # A count with no agent (events a person wrote, not an agent), which the key allows.
    agentless = AgentTally.objects.order_by("pk").first()
    agentless.pk, agentless.agent = None, None
    agentless.save()
    expected = {model: every_row(model) for model in MODELS}
    assert all(len(rows) >= 2 for rows in expected.values())
    assert {row["period"] for row in expected[AgentTally]} == {"day", "month"}
    assert any(row["agent_id"] is None for row in expected[AgentTally])
    summed = insight_tallies_summed()

    tally = SessionTally.objects.order_by("pk").first()
    grants = grants_before_the_move(app="insights", models=MODELS, edited=tally, person=person)
    assert_the_move_round_trips(before=BEFORE, expected=expected, grants=grants, person=person)
    assert insight_tallies_summed() == summed

    # The event writer still counts into the same tables: a new session is one more start.
    started = sum(row["started"] for row in expected[SessionTally])
    start(project, agent, catalog)
    assert sum(SessionTally.objects.values_list("started", flat=True)) == started + 1
