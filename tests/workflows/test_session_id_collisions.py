"""A session id collision draws another id; any other broken constraint is reported as it is."""

from __future__ import annotations

import pytest
from django.db import IntegrityError

from workflows.generations import v0_9 as first_generation
from workflows.models import WorkflowSession
from workflows.services import sessions

pytestmark = pytest.mark.django_db


def start(project, agent, catalog):
    return sessions.session_start(
        project=project,
        agent=agent,
        catalog=catalog.view(),
        job_name="demo",
        workflow_name="main",
        goal="ids",
    ).begun.session


def test_a_colliding_id_is_drawn_again(project, agent, catalog, monkeypatch):
    taken = start(project, agent, catalog).session_id
    drawn = iter([taken, taken, "0000abcd"])
    monkeypatch.setattr(first_generation, "new_session_id", lambda: next(drawn))
    assert start(project, agent, catalog).session_id == "0000abcd"
    assert WorkflowSession.objects.count() == 2


def test_another_broken_constraint_is_not_taken_for_a_collision(
    project, agent, catalog, monkeypatch
):
    view = catalog.view()

    def broken(*args, **kwargs):
        raise IntegrityError("NOT NULL constraint failed: somewhere")

    monkeypatch.setattr(sessions, "_start_runs", broken)
    with pytest.raises(IntegrityError, match="somewhere"):
        sessions.session_start(
            project=project,
            agent=agent,
            catalog=view,
            job_name="demo",
            workflow_name="main",
            goal="ids",
        )
    assert not WorkflowSession.objects.exists()
