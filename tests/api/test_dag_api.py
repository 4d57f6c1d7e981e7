"""REST for DAG workflows: the same rules as the MCP tools, the API's permissions
and error shape, people completing human steps, and constant query counts."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from dag import services as dag
from tests.api.conftest import DECIDE_HUMAN_STEP, DRIVE, VIEW, assert_error
from workflows.models import Job, Project, StepRun

pytestmark = pytest.mark.django_db

STEPS = [
    {"step_id": "build", "description": "Build", "assigned_role": "swe"},
    {
        "step_id": "approve",
        "description": "Approve",
        "assigned_role": "human",
        "depends_on": ["build"],
    },
]


@pytest.fixture
def proj(tmp_path) -> Project:
    return Project.objects.create(root_path=str(tmp_path), name="p", hosted=True)


@pytest.fixture
def driver(make_caller):
    return make_caller(VIEW, DRIVE, username="driver")


def define(caller, proj, steps=STEPS):
    return caller.post(
        "/api/dag/workflows",
        {"project": proj.pk, "creator_id": "boss", "name": "Ship", "steps": steps},
    )


def test_define_execute_and_a_person_approves(proj, driver, make_caller):
    dag.dag_agent_register(project=proj, agent_id="w", roles=["swe"])
    response = define(driver, proj)
    assert response.status_code == 201, response.content
    body = response.json()
    wid = body["workflow"]["workflow_id"]
    assert body["workflow"]["status"] == "pending"
    assert body["warnings"] == []
    listed = driver.get("/api/dag/workflows", project=proj.pk).json()
    assert [w["workflow_id"] for w in listed["workflows"]] == [wid]
    started = driver.post(f"/api/dag/workflows/{wid}/execute", {"triggering_agent_id": "boss"})
    assert started.json()["delegated"] == [{"step_id": "build", "agent_id": "w"}]
    dag.dag_report_completion(project=proj, workflow_id=wid, step_id="build", agent_id="w")

    # Approving needs the permission to decide.
    assert_error(
        driver.post(f"/api/dag/workflows/{wid}/steps/approve/complete", {"result": "ok"}),
        403,
        "forbidden",
    )
    dana = make_caller(VIEW, DECIDE_HUMAN_STEP, username="dana")
    done = dana.post(f"/api/dag/workflows/{wid}/steps/approve/complete", {"result": "ok"})
    assert done.status_code == 200, done.content
    assert done.json()["workflow_status"] == "completed"
    details = driver.get(f"/api/dag/workflows/{wid}").json()
    assert details["status"] == "completed"
    assert details["steps"][1]["result"] == "ok"
    agents = {
        a["agent_id"]: a for a in driver.get("/api/dag/agents", project=proj.pk).json()["items"]
    }
    # The triggering agent is recorded too; it never heartbeat, so it gets no work.
    assert agents["boss"]["responsive"] is False
    assert agents["w"]["roles"] == ["swe"]
    assert agents["w"]["responsive"] is True
    assert agents["w"]["load"] == 0


def test_refusals_have_the_error_shape_and_change_nothing(proj, driver, viewer):
    assert_error(define(viewer, proj), 403, "forbidden")
    cycle = [
        {"step_id": "a", "description": "x", "depends_on": ["b"]},
        {"step_id": "b", "description": "y", "depends_on": ["a"]},
    ]
    error = assert_error(define(driver, proj, cycle), 400, "invalid_input")
    assert error["message"] == "The steps' dependencies form a cycle: a -> b -> a"
    assert not Job.objects.exists()
    assert_error(driver.get("/api/dag/workflows/dag-nope"), 404, "not_found")
    wid = define(driver, proj).json()["workflow"]["workflow_id"]
    driver.post(f"/api/dag/workflows/{wid}/execute", {"triggering_agent_id": "boss"})
    again = driver.post(f"/api/dag/workflows/{wid}/execute", {"triggering_agent_id": "boss"})
    assert "is already running" in assert_error(again, 409, "conflict")["message"]
    refused = driver.post(f"/api/dag/workflows/{wid}/delete", {"requesting_agent_id": "eve"})
    assert (
        "Only the workflow's creator ('boss')" in assert_error(refused, 403, "forbidden")["message"]
    )
    running = driver.post(f"/api/dag/workflows/{wid}/delete", {"requesting_agent_id": "boss"})
    assert_error(running, 409, "conflict")
    assert StepRun.objects.count() == 2
    forced = driver.post(
        f"/api/dag/workflows/{wid}/delete", {"requesting_agent_id": "boss", "force": True}
    )
    assert forced.json()["message"] == f"Workflow '{wid}' (running) deleted."


def test_lists_and_details_take_a_constant_number_of_queries(proj, driver):
    def measure(path: str, **params) -> int:
        with CaptureQueriesContext(connection) as queries:
            assert driver.get(path, **params).status_code == 200
        return len(queries)

    for _ in range(2):
        define(driver, proj)
    dag.dag_agent_register(project=proj, agent_id="a0", roles=["swe"])
    dag.dag_agent_register(project=proj, agent_id="a1", roles=["swe"])
    few = (
        measure("/api/dag/workflows", project=proj.pk),
        measure("/api/dag/agents", project=proj.pk),
    )
    for n in range(18):
        define(driver, proj)
        dag.dag_agent_register(project=proj, agent_id=f"b{n}", roles=["swe"])
    many = (
        measure("/api/dag/workflows", project=proj.pk),
        measure("/api/dag/agents", project=proj.pk),
    )
    assert few == many
    small = define(driver, proj, STEPS).json()["workflow"]["workflow_id"]
    wide = [{"step_id": f"s{n}", "description": "x"} for n in range(40)]
    big = define(driver, proj, wide).json()["workflow"]["workflow_id"]
    assert measure(f"/api/dag/workflows/{small}") == measure(f"/api/dag/workflows/{big}")
