"""finished_step races on one 0.14 session, with real threads on the real database.

Every contender reads and validates the same state (a barrier after the checkpoint) before any
of them writes; exactly one advances, the others get Conflict and change nothing. Run on SQLite
by default and on PostgreSQL with DATABASE_URL.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
from django.db import connections

from tests.support.demo14 import write_demo14
from workflows.errors import Conflict, WorkflowError
from workflows.generations import Conversation, v0_14
from workflows.models import Event, StepRun, WorkflowSession
from workflows.services import sessions

pytestmark = pytest.mark.django_db(transaction=True)

CONTENDERS = 8


@pytest.fixture
def project014(project, demo_project):
    write_demo14(demo_project)
    return project


def test_concurrent_finished_step_on_one_014_session_advances_once(project014, catalog):
    sessions.session_start(
        project=project014,
        catalog=catalog.view(),
        conversation=Conversation("race", None),
        job_name="demo14",
        workflow_name="plain",
        goal="race",
    )
    everyone_has_read = threading.Barrier(CONTENDERS)

    def contender(_):
        try:
            checkpoint = sessions.step_checkpoint(
                project=project014, conversation=Conversation("race", None), outputs={}
            )
            everyone_has_read.wait(timeout=30)
            return sessions.step_advance(checkpoint=checkpoint)
        except WorkflowError as exc:
            return exc
        finally:
            connections.close_all()

    with ThreadPoolExecutor(CONTENDERS) as pool:
        results = list(pool.map(contender, range(CONTENDERS)))

    winners = [r for r in results if isinstance(r, v0_14.Advanced)]
    losers = [r for r in results if isinstance(r, Conflict)]
    assert len(winners) == 1, results
    assert len(losers) == CONTENDERS - 1
    session = WorkflowSession.objects.get()
    assert session.current_step_id == "two"
    assert session.revision == 1
    assert list(StepRun.objects.order_by("id").values_list("step_id", "status")) == [
        ("one", "completed"),
        ("two", "active"),
    ]
    assert Event.objects.filter(kind=Event.Kind.STEP_FINISHED).count() == 1
