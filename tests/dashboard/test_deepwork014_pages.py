"""0.14 sessions on the dashboard and the REST API: the same pages, nothing breaks."""

from __future__ import annotations

import pytest

from reviews.services import step_finish_by_tasks
from tests.support.demo14 import write_demo14
from workflows.generations import Conversation
from workflows.services import sessions

pytestmark = pytest.mark.django_db


def reviewed_014(project, demo_project, catalog):
    """A 0.14 session at its first step, whose hand-in was asked for reviews."""
    write_demo14(demo_project)
    started = sessions.session_start(
        project=project,
        catalog=catalog.view(),
        conversation=Conversation("conv-1", None),
        job_name="demo14",
        workflow_name="main",
        goal="A 0.14 goal",
        inputs={"topic": "cats"},
    )
    checkpoint = sessions.step_checkpoint(
        project=project,
        conversation=Conversation("conv-1", None),
        outputs={"notes.md": "notes.md", "data.json": "data.json"},
        notes="cited",
    )
    step_finish_by_tasks(checkpoint=checkpoint, override_reason=None)
    return started.begun.session


@pytest.fixture
def session014(project, demo_project, catalog):
    return reviewed_014(project, demo_project, catalog)


def test_overview_list_and_session_page_show_a_014_session(watching, session014):
    overview = watching.get("/").content.decode()
    assert "dw14:conv-1" in overview
    assert "A 0.14 goal" in overview
    listing = watching.get("/sessions/").content.decode()
    assert session014.session_id in listing
    page = watching.get(f"/sessions/{session014.session_id}/")
    assert page.status_code == 200
    html = page.content.decode()
    assert "gather" in html
    assert "step_gather_output_notes.md" in html  # the review tasks asked for
    assert 'data-testid="generation">DeepWork 0.14 · session_id <code>conv-1</code>' in html
    assert "cats" in html  # the start inputs
    assert '<span class="muted">input topic:</span> cats' in html  # the step's input values


def test_a_string_output_is_shown_as_a_value_never_as_a_file(watching, session014, demo_project):
    (demo_project / "secret.txt").write_text("not an output\n")
    project = session014.project
    for outputs in ({"notes.md": "notes.md", "data.json": "data.json"}, {"verdict": "secret.txt"}):
        checkpoint = sessions.step_checkpoint(
            project=project, conversation=Conversation("conv-1", None), outputs=outputs
        )
        step_finish_by_tasks(checkpoint=checkpoint, override_reason="checked")
    html = watching.get(f"/sessions/{session014.session_id}/").content.decode()
    assert 'data-testid="output-value">secret.txt</span>' in html
    assert 'data-path="notes.md"' in html  # a file_path output stays a link
    url = f"/sessions/{session014.session_id}/files/"
    assert watching.get(url, {"path": "secret.txt"}).status_code == 404
    assert watching.get(url, {"path": "notes.md"}).status_code == 200


def test_the_conversations_session_jobs_are_listed_under_its_session(watching, project, catalog):
    from tests.support.demo14 import DEMO14_JOB
    from workflows.services.session_jobs import session_job_register

    session_job_register(
        project=project,
        platform="claude",
        conversation_id="conv-2",
        job_name="tmpjob",
        yaml_text=DEMO14_JOB.replace("name: demo14", "name: tmpjob"),
    )
    started = sessions.session_start(
        project=project,
        catalog=catalog.view(),
        conversation=Conversation("conv-2", None),
        job_name="tmpjob",
        workflow_name="plain",
        goal="from a session job",
    )
    html = watching.get(f"/sessions/{started.begun.session.session_id}/").content.decode()
    assert 'data-testid="session-jobs"><li><code>tmpjob</code> <span class="muted">' in html
