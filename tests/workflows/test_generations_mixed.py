"""The generations never mix: a 0.9.1 call cannot drive a 0.14 session, nor start a 0.14 job."""

from __future__ import annotations

import pytest

from tests.support.demo14 import write_demo14
from workflows.errors import Conflict, InvalidInput
from workflows.generations import Conversation
from workflows.models import StepRun, WorkflowSession
from workflows.services import sessions

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def project014(project, demo_project):
    write_demo14(demo_project)
    return project


def start014(project, catalog, conversation: str = "S"):
    return sessions.session_start(
        project=project,
        catalog=catalog.view(),
        conversation=Conversation(conversation, None),
        job_name="demo14",
        workflow_name="plain",
        goal="mixed",
    )


def test_a_091_start_of_a_014_format_job_is_refused(project014, agent, catalog):
    with pytest.raises(InvalidInput, match="written in DeepWork 0.14's job format"):
        sessions.session_start(
            project=project014,
            agent=agent,
            catalog=catalog.view(),
            job_name="demo14",
            workflow_name="plain",
            goal="g",
        )
    assert not WorkflowSession.objects.exists()


def test_a_091_hand_in_naming_a_014_session_is_refused(project014, agent, catalog):
    session = start014(project014, catalog).begun.session
    for call in (
        lambda: sessions.step_checkpoint(
            project=project014, agent=agent, outputs={}, session_id=session.session_id
        ),
        lambda: sessions.session_go_to_step(
            project=project014, agent=agent, step_id="one", session_id=session.session_id
        ),
    ):
        with pytest.raises(Conflict, match="was started by a DeepWork 0.14 client"):
            call()
    session.refresh_from_db()
    assert (session.status, session.revision) == ("active", 0)
    assert StepRun.objects.get().status == "active"


def test_bad_stack_ids_are_refused_and_change_nothing(project014, catalog):
    for bad in ("../x", "a/b", "", "x" * 101, "a..b", "\x00"):
        with pytest.raises(InvalidInput, match="session_id must be 1 to 100 characters"):
            start014(project014, catalog, bad)
    assert not WorkflowSession.objects.exists()
