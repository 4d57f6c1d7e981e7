"""The dashboard and REST read through the same selectors: the same filter selects the same
sessions, and a ruling on a step targets the same run and is refused with the same words."""

from __future__ import annotations

import html as htmllib
import re

import pytest
from django.test import Client

from reviews.models import HumanDecision
from tests.api.conftest import assert_error
from tests.dashboard.test_pages import attr, tagged
from tests.dashboard.test_queries import JOB
from tests.support.driving import step_finish
from tests.support.factories import write_job
from workflows.services import sessions as session_services
from workflows.services.agents import agent_ensure
from workflows.services.catalog import Catalog
from workflows.services.projects import project_ensure

pytestmark = pytest.mark.django_db


def dashboard_for(caller) -> Client:
    client = Client()
    client.force_login(caller.user)
    return client


def flash_messages(client: Client, url: str) -> list[str]:
    page = client.get(url).content.decode()
    return [
        htmllib.unescape(text) for text in re.findall(r'data-testid="flash"[^>]*>([^<]*)<', page)
    ]


@pytest.fixture
def renamed(demo_project):
    """A session of the demo job, and on top of it one of a job whose name ("renamed") differs
    from its folder ("renamed_dir"), started by the folder name, its first step finished."""
    write_job(demo_project, "renamed_dir", JOB.format(name="renamed"), ["s1", "s2", "s3"])
    project = project_ensure(root_path=demo_project)
    catalog = Catalog(project).view()
    agent = agent_ensure(project=project, agent_id="a1")
    started = [
        session_services.session_start(
            project=project,
            agent=agent,
            catalog=catalog,
            job_name=job,
            workflow_name=workflow,
            goal="g",
        ).begun.session.session_id
        for job, workflow in (("demo", "quick"), ("renamed_dir", "one"))
    ]
    step_finish(project=project, agent=agent, outputs={})
    return project, started


@pytest.mark.parametrize("job", ["renamed", "renamed_dir", "demo", "nobody"])
def test_the_job_filter_means_the_same_on_the_dashboard_and_over_rest(viewer, renamed, job):
    _, (demo, other) = renamed
    expected = {"renamed": [other], "renamed_dir": [other], "demo": [demo], "nobody": []}[job]
    over_rest = [
        item["session_id"] for item in viewer.get("/api/sessions", job=job).json()["items"]
    ]
    page = dashboard_for(viewer).get("/sessions/", {"job": job}).content.decode()
    on_dashboard = [attr(tag, "data-session-id") for tag in tagged(page, "session-row")]
    assert over_rest == on_dashboard == expected


@pytest.mark.parametrize(
    ("step_id", "status", "code"),
    # s1 ran and is over; ghost never ran.
    [("s1", 409, "conflict"), ("ghost", 404, "not_found")],
)
def test_a_ruling_is_refused_alike_on_the_dashboard_and_over_rest(
    operator, renamed, step_id, status, code
):
    _, (_, session_id) = renamed
    url = f"/sessions/{session_id}/"
    error = assert_error(
        operator.post(f"/api/sessions/{session_id}/steps/{step_id}/override", {"reason": "r"}),
        status,
        code,
    )
    dashboard = dashboard_for(operator)
    dashboard.post(url + "override/", {"step_id": step_id, "reason": "r"})
    assert flash_messages(dashboard, url) == [error["message"]]
    assert not HumanDecision.objects.exists()


def test_both_rule_on_the_live_run_of_the_step(operator, renamed):
    _, (_, session_id) = renamed
    rest = operator.post(f"/api/sessions/{session_id}/steps/s2/override", {"reason": "r"})
    assert rest.status_code == 201, rest.content
    dashboard_for(operator).post(
        f"/sessions/{session_id}/request-changes/", {"step_id": "s2", "feedback": "f"}
    )
    runs = {decision.step_run for decision in HumanDecision.objects.select_related("step_run")}
    [run] = runs
    assert (run.step_id, run.status) == ("s2", "active")


def test_a_ruling_on_a_finished_session_is_refused_alike(operator, renamed):
    project, (_, session_id) = renamed
    agent = agent_ensure(project=project, agent_id="a1")
    session_services.session_abort(
        project=project, agent=agent, explanation="stop", session_id=session_id
    )
    error = assert_error(
        operator.post(f"/api/sessions/{session_id}/steps/s2/override", {"reason": "r"}),
        409,
        "conflict",
    )
    assert error["message"] == (
        f"Session '{session_id}' is aborted; only the current step of an active session can be "
        "overridden or sent back"
    )
    dashboard = dashboard_for(operator)
    url = f"/sessions/{session_id}/"
    dashboard.post(url + "request-changes/", {"step_id": "s2", "feedback": "f"})
    assert flash_messages(dashboard, url) == [error["message"]]
