"""The reads each transition makes cost the same however long the history behind them: the
session a hand-in targets (the top of the stack, or a person's abort not yet told) and other
agents' work during a step (the warning with its files changed). Measured on SQLite as the
virtual-machine steps a statement takes, before and after hundreds of old sessions and runs
land in the tables; a read through the project's or the agent's whole history grows with them.
"""

from __future__ import annotations

import pytest
from django.db import connection
from django.utils import timezone

from tests.support.driving import workflow_start
from tests.support.history import add_ended_sessions
from workflows.models import Agent, WorkflowSession
from workflows.selectors import session_top
from workflows.services import step_changes
from workflows.services.agents import agent_ensure

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif(
        connection.vendor != "sqlite", reason="counts SQLite's virtual-machine steps"
    ),
]

OLD_SESSIONS = 300


def start(project, agent: Agent) -> WorkflowSession:
    answer = workflow_start(project, agent)
    return WorkflowSession.objects.get(session_id=answer.begin_step.session_id)


def add_history(template: WorkflowSession, agent: Agent) -> None:
    add_ended_sessions(template=template, agent=agent, count=OLD_SESSIONS)


def steps_of(read) -> int:
    """SQLite virtual-machine steps ``read()`` takes (counted every 10 instructions)."""
    raw = connection.connection
    counted = [0]

    def count() -> int:
        counted[0] += 1
        return 0

    raw.set_progress_handler(count, 10)
    try:
        read()
    finally:
        raw.set_progress_handler(None, 10)
    return counted[0]


def test_the_top_of_the_stack_is_read_without_the_agents_history(project, agent):
    session = start(project, agent)
    connection.ensure_connection()

    def top() -> None:
        found = session_top(agent=agent, untold_aborts=True)
        assert found is not None
        assert found.pk == session.pk

    before = steps_of(top)
    add_history(session, agent)
    after = steps_of(top)
    assert after <= before + 5, (before, after)


def test_other_agents_work_is_read_without_the_projects_history(project, agent):
    helper = agent_ensure(project=project, agent_id="helper")
    theirs = start(project, helper)
    mine = start(project, agent)
    run = mine.runs.get()
    # As the look reads them: the database's own form of each time.
    as_stored = connection.ops.adapt_datetimefield_value
    ended = [
        step_changes._Run(
            run.pk, run.step_id, None, as_stored(run.started_at), as_stored(timezone.now())
        ),
    ]
    connection.ensure_connection()

    def overlap() -> None:
        warnings = step_changes._overlap_warnings(project.pk, agent.pk, ended)
        assert f"helper: {theirs.session_id}/gather" in warnings[run.pk]

    before = steps_of(overlap)
    add_history(theirs, helper)
    add_history(mine, agent)
    after = steps_of(overlap)
    assert after <= before + 5, (before, after)
