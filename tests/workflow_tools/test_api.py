"""The published-workflows endpoints: the published list schema, runs started, followed and
cancelled over REST, with token auth."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from tests.api.conftest import assert_error
from tests.conftest import NESTED_JOB
from tests.support.factories import write_job
from workflows.models import WorkflowSession

pytestmark = pytest.mark.django_db


def url(project, tail: str = "") -> str:
    return f"/api/projects/{project.pk}/published-workflows{tail}"


def test_the_list_is_in_the_seeds_schema(project, viewer):
    response = viewer.get(url(project))
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["count"] == len(body["results"]) == 5
    main = next(item for item in body["results"] if item["id"] == "demo/main")
    assert main == {
        "id": "demo/main",
        "name": "demo_main",
        "description": "Gather, split in two, wrap up (job demo: A demo job)",
        "category": "deepwork/project",
        "version": "1.0.0",
        "inputSchema": main["inputSchema"],
        "executionType": "async",
        "metadata": {"kind": "deepwork", "job": "demo", "job_name": "demo", "workflow": "main"},
    }
    assert main["inputSchema"]["required"] == ["goal", "topic"]


def test_listing_costs_the_same_queries_for_2_or_20_jobs(project, viewer, demo_project):
    def count() -> int:
        viewer.get(url(project))  # syncs the catalog on change
        with CaptureQueriesContext(connection) as queries:
            assert viewer.get(url(project)).status_code == 200
        return len(queries)

    few = count()
    for index in range(18):
        name = f"extra{index}"
        write_job(
            demo_project,
            name,
            NESTED_JOB.replace("name: nested", f"name: {name}"),
            ["first", "second"],
        )
    many = count()
    assert viewer.get(url(project)).json()["count"] == 23
    assert few == many


def test_a_run_is_started_followed_and_cancelled(project, operator):
    refused = operator.post(url(project, "/runs"), {"workflow_id": "demo/main", "input": {}})
    error = assert_error(refused, 400, "invalid_input")
    assert error["message"] == (
        "Invalid arguments for demo/main: at $: 'goal' is a required property (rule "
        "'required'); at $: 'topic' is a required property (rule 'required')"
    )
    assert not WorkflowSession.objects.exists()

    started = operator.post(
        url(project, "/runs"),
        {"workflow_id": "demo/main", "input": {"goal": "Report", "topic": "owls"}},
    )
    assert started.status_code == 201, started.content
    run = started.json()
    assert run["status"] == "RUNNING"
    assert run["result"]["begin_step"]["step_id"] == "gather"
    assert run["result"]["begin_step"]["session_id"] == run["run_id"]
    session = WorkflowSession.objects.get(session_id=run["run_id"])
    assert session.agent.agent_id == "api:alice"

    status = operator.get(url(project, f"/runs/{run['run_id']}")).json()
    assert status["status"] == "RUNNING"
    assert status["progress"]["total_steps"] == 4

    cancelled = operator.post(url(project, f"/runs/{run['run_id']}/cancel"), {"reason": "stop"})
    assert cancelled.status_code == 200, cancelled.content
    assert cancelled.json()["status"] == "CANCELLED"
    session.refresh_from_db()
    assert session.aborted_by == "alice"


def test_unknown_workflows_and_runs_are_404(project, operator):
    assert_error(
        operator.post(url(project, "/runs"), {"workflow_id": "nope/x", "input": {}}),
        404,
        "not_found",
    )
    error = assert_error(operator.get(url(project, "/runs/deadbeef")), 404, "not_found")
    assert error["message"] == ("Unknown run id 'deadbeef': no workflow run of this project has it")


def test_dag_workflows_are_published_run_and_cancelled(project, operator):
    defined = operator.post(
        "/api/dag/workflows",
        {
            "project": project.pk,
            "creator_id": "lead",
            "name": "Plan",
            "steps": [{"step_id": "a", "description": "A"}, {"step_id": "b", "description": "B"}],
            "execution_type": "sync",
        },
    )
    assert defined.status_code == 201, defined.content
    assert defined.json()["workflow"]["execution_type"] == "sync"
    wid = defined.json()["workflow"]["workflow_id"]
    listed = {item["id"]: item for item in operator.get(url(project)).json()["results"]}
    assert listed[wid]["executionType"] == "sync"
    assert listed[wid]["category"] == "dag"

    refused = operator.post(url(project, "/runs"), {"workflow_id": wid, "input": {"x": 1}})
    assert_error(refused, 400, "invalid_input")
    assert not WorkflowSession.objects.exists()
    started = operator.post(url(project, "/runs"), {"workflow_id": wid, "input": {}})
    assert started.status_code == 201, started.content
    run = started.json()
    assert (run["run_id"], run["status"]) == (f"dag:{wid}", "RUNNING")
    assert WorkflowSession.objects.get(session_id=wid).agent.agent_id == "api:alice"
    assert wid not in {item["id"] for item in operator.get(url(project)).json()["results"]}

    status = operator.get(url(project, f"/runs/dag:{wid}")).json()
    assert (status["run_id"], status["status"]) == (f"dag:{wid}", "RUNNING")
    assert status["progress"]["total_steps"] == 2
    cancelled = operator.post(url(project, f"/runs/dag:{wid}/cancel"), {"reason": "stop"})
    assert cancelled.status_code == 200, cancelled.content
    assert (cancelled.json()["status"], cancelled.json()["error"]) == (
        "CANCELLED",
        "Cancelled by user:alice: stop",
    )
    error = assert_error(operator.get(url(project, "/runs/dag:dag-none")), 404, "not_found")
    assert error["message"] == (
        "Unknown run id 'dag:dag-none': no DAG workflow of this project has it"
    )
