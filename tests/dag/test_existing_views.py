"""A DAG execution is a session like any other: the existing session pages, the overview and
the REST API show it (running, failed, its step runs) without special cases or errors."""

from __future__ import annotations

import pytest
from django.test import Client

from accounts.services import api_token_create
from dag import services as dag
from tests.api.conftest import VIEW, Caller
from tests.dashboard.conftest import client_for
from tests.support.factories import make_user
from workflows.models import Project

pytestmark = pytest.mark.django_db


@pytest.fixture
def runs(tmp_path) -> tuple[str, str]:
    project = Project.objects.create(root_path=str(tmp_path), name="p")
    dag.dag_agent_register(project=project, agent_id="w", roles=["swe"])
    steps = [
        {"step_id": "a", "description": "x", "assigned_role": "swe"},
        {"step_id": "b", "description": "y", "depends_on": ["a"]},
    ]
    running = dag.dag_define(project=project, creator_id="c", name="R", description="", steps=steps)
    failed = dag.dag_define(project=project, creator_id="c", name="F", description="", steps=steps)
    for defined in (running, failed):
        dag.dag_execute(project=project, workflow_id=defined.job.dir_name, triggering_agent_id="c")
    dag.dag_report_failure(
        project=project,
        workflow_id=failed.job.dir_name,
        step_id="a",
        agent_id="w",
        error_message="boom",
    )
    return running.job.dir_name, failed.job.dir_name


def test_session_pages_and_overview_show_dag_runs(runs):
    watching = client_for(make_user(username="wanda", groups=("Watchers",)))
    listing = watching.get("/sessions/")
    assert listing.status_code == 200
    for wid in runs:
        assert wid in listing.content.decode()
        assert watching.get(f"/sessions/{wid}/").status_code == 200
    assert watching.get("/sessions/?status=running").status_code == 200
    assert watching.get("/").status_code == 200


def test_rest_sessions_show_dag_runs(runs):
    user = make_user(username="viewer", perms=(VIEW,))
    _, secret = api_token_create(user=user, name="test")
    caller = Caller(Client(), secret, user)
    by_id = {item["session_id"]: item for item in caller.get("/api/sessions").json()["items"]}
    running, failed = runs
    assert by_id[running]["status"] == "running"
    assert by_id[failed]["status"] == "failed"
    detail = caller.get(f"/api/sessions/{failed}").json()
    assert [run["status"] for run in detail["runs"]] == ["failed", "pending"]
