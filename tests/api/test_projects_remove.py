"""Which projects the REST API acts on: hosted ones. ``DELETE /api/projects/{id}`` removes one
(served nowhere, its sessions kept and readable); adding its folder again brings it back. A
folder a local stdio server registered is acted on once a person hosts it."""

from __future__ import annotations

from pathlib import Path

import pytest

from accounts.services import api_token_create
from tests.api.conftest import ABORT, DRIVE, VIEW, Caller, assert_error
from workflows.models import Project, WorkflowSession
from workflows.services.projects import project_ensure

pytestmark = pytest.mark.django_db
finishes = pytest.mark.django_db(transaction=True)

ADD = "workflows.add_project"


@pytest.fixture
def ops(make_caller) -> Caller:
    return make_caller(VIEW, DRIVE, ABORT, ADD, username="ops")


def start(caller: Caller, project_id: int):
    body = {"project": project_id, "job_name": "demo", "workflow_name": "main", "goal": "g"}
    return caller.post("/api/sessions", body)


def test_a_stdio_registered_folder_is_acted_on_once_hosted(ops: Caller, demo_project: Path):
    local = project_ensure(root_path=demo_project)
    error = assert_error(start(ops, local.pk), 403, "not_served")
    assert error["message"].startswith(f"Project {local.pk} ({local.root_path}) is not hosted")
    assert not WorkflowSession.objects.exists()
    # Its row is listed, with its state; reading it is not acting on it.
    assert ops.get(f"/api/projects/{local.pk}").json()["hosted"] is False
    dag = {"project": local.pk, "creator_id": "api:ops", "name": "w", "steps": []}
    assert_error(ops.post("/api/dag/workflows", dag), 403, "not_served")
    run = {"workflow_id": "demo/main", "input": {}}
    response = ops.post(f"/api/projects/{local.pk}/published-workflows/runs", run)
    assert_error(response, 403, "not_served")
    hosted = ops.post("/api/projects", {"root_path": local.root_path})
    assert (hosted.status_code, hosted.json()["hosted"]) == (200, True)
    assert start(ops, local.pk).status_code == 201


@finishes
def test_remove_keeps_the_sessions_readable_and_acts_on_nothing_more(ops: Caller, project):
    session_id = start(ops, project.pk).json()["begin_step"]["session_id"]
    response = ops.delete(f"/api/projects/{project.pk}")
    assert response.status_code == 200, response.content
    body = response.json()
    assert (body["id"], body["hosted"]) == (project.pk, False)
    assert body["removed_at"] is not None
    # Removing again changes nothing.
    assert ops.delete(f"/api/projects/{project.pk}").json()["removed_at"] == body["removed_at"]
    # History: readable.
    assert ops.get(f"/api/sessions/{session_id}").status_code == 200
    assert ops.get("/api/sessions", project=project.pk).json()["items"][0]["session_id"] == (
        session_id
    )
    # Work: refused, and nothing changes.
    error = assert_error(start(ops, project.pk), 403, "not_served")
    assert "was removed from this server" in error["message"]
    finish = ops.post(f"/api/sessions/{session_id}/finish", {"outputs": {"notes.md": "notes.md"}})
    assert_error(finish, 403, "not_served")
    go = ops.post(f"/api/sessions/{session_id}/go-to-step", {"step_id": "gather"})
    assert_error(go, 403, "not_served")
    assert WorkflowSession.objects.get(session_id=session_id).current_step_id == "gather"
    # Adding the folder again brings it back, the same project.
    again = ops.post("/api/projects", {"root_path": project.root_path})
    assert (again.status_code, again.json()["id"], again.json()["removed_at"]) == (
        200,
        project.pk,
        None,
    )
    assert start(ops, project.pk).status_code == 201


def test_remove_needs_a_persons_token_and_a_known_project(ops: Caller, project):
    token, secret = api_token_create(user=ops.user, name="agent", mcp=True)
    agent = Caller(ops.client, secret, ops.user)
    error = assert_error(agent.delete(f"/api/projects/{project.pk}"), 403, "forbidden")
    assert "adding or removing a project is a person's decision" in error["message"]
    assert Project.objects.get(pk=project.pk).removed_at is None
    error = assert_error(ops.delete(f"/api/projects/{project.pk + 1}"), 404, "not_found")
    assert error["message"] == f"Project {project.pk + 1} not found"


@pytest.mark.parametrize("ref", ["²", "٣", "9" * 5000, "1e3"])
@pytest.mark.parametrize(
    "url", ["/api/sessions", "/api/events", "/api/dag/agents", "/api/tracker/workflows"]
)
def test_an_odd_project_reference_is_a_400(ops: Caller, project, url: str, ref: str):
    assert_error(ops.get(url, project=ref), 400, "invalid_request")
