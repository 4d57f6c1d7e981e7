"""DAG workflows are bounded: steps, edges, each payload and a whole definition are refused over
their limits (naming the limit and the size) before any work; reads of big results stay small
and point at a per-step read that pages. SQLite, and PostgreSQL with DATABASE_URL."""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.db import connection
from django.test import Client as HttpClient
from fastmcp import Client

from accounts.services import api_token_create
from dag import selectors
from dag import services as dag
from mcp_bridge.server import create_server
from tests.support.factories import make_user
from workflow_tools.dag_source import DagSource
from workflows import limits
from workflows.errors import InvalidInput
from workflows.models import Event, Job, Project, StepRun, WorkflowSession
from workflows.services.projects import project_add, project_ensure

pytestmark = pytest.mark.django_db(transaction=True)

# Generous: refusing by counting takes milliseconds; the defect took 84 s.
HANG_BOUND = 60.0


@pytest.fixture
def proj(tmp_path) -> Project:
    return Project.objects.create(root_path=str(tmp_path), name="p")


def in_thread(fn: Any) -> Any:
    """``fn()`` in a thread that must finish within ``HANG_BOUND``; its answer or error."""
    out: dict[str, Any] = {}

    def run() -> None:
        try:
            out["value"] = fn()
        except BaseException as exc:  # noqa: BLE001  # handed back to the test
            out["error"] = exc
        finally:
            connection.close()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(HANG_BOUND)
    assert not thread.is_alive(), f"still running after {HANG_BOUND} s"
    if "error" in out:
        raise out["error"]
    return out.get("value")


def nothing_defined() -> None:
    assert not Job.objects.filter(source=Job.Source.DEFINED).exists()
    assert not Event.objects.filter(kind=Event.Kind.DAG_DEFINED).exists()


def test_two_thousand_steps_with_two_million_edges_are_refused_at_once(proj):
    # Each step depends on up to 1,000 steps before it: 1,999,500 edges in all.
    ids = [f"s{n}" for n in range(2_000)]
    steps = [
        {"step_id": ids[n], "description": "x", "depends_on": ids[max(0, n - 1_000) : n]}
        for n in range(2_000)
    ]

    def define() -> Any:
        return dag.dag_define(
            project=proj, creator_id="boss", name="mesh", description="", steps=steps
        )

    with pytest.raises(InvalidInput) as caught:
        in_thread(define)
    assert caught.value.message == "steps holds 2,000 steps; the limit is 1,000 per workflow"
    # Within the step limit, the edges alone are refused, again before anything else.
    with pytest.raises(InvalidInput) as caught:
        in_thread(
            lambda: dag.dag_define(
                project=proj, creator_id="boss", name="mesh", description="", steps=steps[:1_000]
            )
        )
    assert caught.value.message == (
        "The steps' depends_on lists hold 499,500 dependencies together; the limit is 10,000 "
        "per workflow"
    )
    nothing_defined()


def test_a_definition_over_a_megabyte_is_refused(proj):
    steps = [{"step_id": f"s{n}", "description": "d" * 19_000} for n in range(60)]
    with pytest.raises(InvalidInput) as caught:
        dag.dag_define(project=proj, creator_id="boss", name="big", description="", steps=steps)
    message = caught.value.message
    assert message.startswith("The workflow definition (name, description and steps) is ")
    assert message.endswith(" bytes of JSON; the limit is 1,048,576")
    nothing_defined()


def test_a_definition_at_every_limit_is_accepted(proj):
    # 1,000 steps and 10,000 edges in the shapes that cost most: a long chain given backwards
    # (the deepest dependency walk), every step past the 10th depending on ten before it.
    n = limits.DAG_MAX_STEPS
    ids = [f"s{i:04}" for i in range(n)]
    steps = [
        {
            "step_id": ids[i],
            "description": "x",
            "depends_on": ids[max(0, i - 10) : i] if i >= 10 else [],
            "tool_arguments": {"pad": "a" * 700},
        }
        for i in range(n)
    ][::-1]
    edges = sum(len(step["depends_on"]) for step in steps)
    # Top up to exactly the edge limit.
    steps[0]["depends_on"] = steps[0]["depends_on"] + ids[: limits.DAG_MAX_EDGES - edges]
    steps[0]["depends_on"] = list(dict.fromkeys(steps[0]["depends_on"]))
    edges = sum(len(step["depends_on"]) for step in steps)
    assert edges <= limits.DAG_MAX_EDGES
    size = limits.json_size("x", {"name": "max", "description": "", "steps": steps})
    assert size <= limits.DAG_MAX_DEFINITION_BYTES
    defined = in_thread(
        lambda: dag.dag_define(
            project=proj, creator_id="boss", name="max", description="", steps=steps
        )
    )
    assert selectors.dag_details(job=defined.job)["step_count"] == n


def _token(perms: tuple[str, ...]) -> str:
    user = make_user(username="rita", perms=perms)
    return api_token_create(user=user, name="limits")[1]


async def test_tool_arguments_of_65_kb_are_refused_over_mcp_and_rest(project_dir):
    big = [{"step_id": "a", "description": "x", "tool_arguments": {"text": "t" * 65 * 1024}}]
    refused = "Step 'a': tool_arguments is 66,571 bytes of JSON; the limit is 65,536"
    async with Client(create_server(project_dir, toolsets=["agents"])) as client:
        result = await client.call_tool(
            "define_workflow",
            {"creator_id": "boss", "name": "w", "steps": big},
            raise_on_error=False,
        )
    assert result.is_error
    assert result.content[0].text.endswith(refused), result.content[0].text

    def over_rest() -> None:
        # Added as a person adds it: REST acts only on hosted projects.
        project = project_add(root_path=str(project_dir)).project
        token = _token(("workflows.view_workflowsession", "workflows.drive_session"))
        body = {"project": project.pk, "creator_id": "boss", "name": "w", "steps": big}
        response = HttpClient().post(
            "/api/dag/workflows",
            json.dumps(body),
            content_type="application/json",
            headers={"Authorization": f"Bearer {token}"},
        )
        assert response.status_code == 400
        assert response.json()["error"]["code"] == "invalid_input"
        assert response.json()["error"]["message"] == refused
        nothing_defined()

    await sync_to_async(over_rest)()


def _running(proj: Project, steps: list[dict[str, Any]]) -> str:
    dag.dag_agent_register(project=proj, agent_id="worker", roles=["swe"])
    job = dag.dag_define(project=proj, creator_id="boss", name="w", description="", steps=steps).job
    dag.dag_execute(project=proj, workflow_id=job.dir_name, triggering_agent_id="boss")
    return job.dir_name


async def test_a_huge_result_is_refused_and_changes_nothing(project_dir):
    project = await sync_to_async(project_ensure)(root_path=project_dir)
    workflow_id = await sync_to_async(_running)(
        project, [{"step_id": "a", "description": "x", "assigned_role": "swe"}]
    )
    async with Client(create_server(project_dir, toolsets=["agents"])) as client:
        result = await client.call_tool(
            "report_step_completion",
            {
                "workflow_id": workflow_id,
                "step_id": "a",
                "agent_id": "worker",
                "result": {"log": "L" * (5 * 1024 * 1024)},
            },
            raise_on_error=False,
        )
    assert result.is_error
    assert result.content[0].text.endswith("result is 5,242,890 bytes of JSON; the limit is 65,536")
    run = await StepRun.objects.aget(step_id="a")
    assert (run.status, run.result) == (StepRun.Status.ASSIGNED, None)


def test_an_error_message_over_its_limit_is_refused_not_cut(proj):
    workflow_id = _running(proj, [{"step_id": "a", "description": "x", "assigned_role": "swe"}])
    with pytest.raises(InvalidInput) as caught:
        dag.dag_report_failure(
            project=proj,
            workflow_id=workflow_id,
            step_id="a",
            agent_id="worker",
            error_message="e" * 30_000,
        )
    assert caught.value.message == "error_message is 30,000 characters; the limit is 20,000"
    assert WorkflowSession.objects.get().status == WorkflowSession.Status.RUNNING


# A result of just under the limit: the biggest an agent may report.
BIG_RESULT = {"data": "r" * (limits.DAG_MAX_PAYLOAD_BYTES - 20)}
STEPS_WIDE = 300


def _completed_wide(proj: Project) -> tuple[str, Job]:
    """A workflow of 300 steps, each with a result at the payload limit, and a join step
    depending on all of them, held by ``worker``."""
    fan = [
        {"step_id": f"f{n:03}", "description": "x", "assigned_role": "swe"}
        for n in range(STEPS_WIDE)
    ]
    join = {
        "step_id": "join",
        "description": "merge",
        "assigned_role": "swe",
        "depends_on": [step["step_id"] for step in fan],
    }
    workflow_id = _running(proj, [*fan, join])
    assert limits.json_size("result", BIG_RESULT) <= limits.DAG_MAX_PAYLOAD_BYTES
    for step in fan:
        dag.dag_report_completion(
            project=proj,
            workflow_id=workflow_id,
            step_id=step["step_id"],
            agent_id="worker",
            result=BIG_RESULT,
        )
        dag.dag_dispatch(project=proj)
    return workflow_id, Job.objects.get(dir_name=workflow_id)


def test_reads_of_a_workflow_with_maximal_payloads_stay_bounded(proj):
    workflow_id, job = _completed_wide(proj)
    stored = STEPS_WIDE * limits.DAG_MAX_PAYLOAD_BYTES  # about 19 MB of results
    token = _token(("workflows.view_workflowsession",))
    http = HttpClient()
    headers = {"Authorization": f"Bearer {token}"}

    response = http.get(f"/api/dag/workflows/{workflow_id}", headers=headers)
    assert response.status_code == 200
    assert len(response.content) < 512 * 1024 < stored
    first = response.json()["steps"][0]
    assert first["result"] is None
    assert first["result_truncated"] is True
    assert "get_step_result(workflow_id=" in first["note"]
    assert f"/api/dag/workflows/{workflow_id}/steps/f000/result" in first["note"]

    # The step that depends on all 300 gets what fits, and names the rest.
    worker = dag.dag_agent(project=proj, agent_id="worker")
    (assignment,) = selectors.dag_assignments(agent=worker)
    assert assignment["step_id"] == "join"
    assert len(json.dumps(assignment)) < 2 * limits.DAG_INLINE_BUDGET_CHARS
    given = [dep for dep, value in assignment["dependency_results"].items() if value is not None]
    assert given
    assert all(assignment["dependency_results"][d] == BIG_RESULT for d in given)
    assert len(given) + len(assignment["dependency_results_left_out"]) == STEPS_WIDE
    assert "get_step_result" in assignment["note"]

    # The per-step read gives a result back whole, a page at a time from any offset.
    url = f"/api/dag/workflows/{workflow_id}/steps/f007/result"
    page = http.get(url, headers=headers).json()
    assert page["next_offset"] is None  # a result within its limit is one page
    assert len(page["result_json"]) == page["result_size"] <= limits.DAG_PAGE_CHARS
    assert json.loads(page["result_json"]) == BIG_RESULT
    tail = http.get(url, {"offset": 60_000}, headers=headers).json()
    assert tail["offset"] == 60_000
    assert tail["result_json"] == page["result_json"][60_000:]

    # One stored before the limits (written here directly) comes in pages.
    legacy = {"data": "x" * 200_000}
    StepRun.objects.filter(step_id="f001").update(result=legacy)
    pages, offset = [], 0
    while offset is not None:
        page = http.get(
            f"/api/dag/workflows/{workflow_id}/steps/f001/result",
            {"offset": offset},
            headers=headers,
        ).json()
        assert len(page["result_json"]) <= limits.DAG_PAGE_CHARS
        pages.append(page["result_json"])
        offset = page["next_offset"]
    assert len(pages) == 4
    assert json.loads("".join(pages)) == legacy

    # The run's status (a workflow tool's answer) is bounded too once it completes.
    dag.dag_report_completion(
        project=proj, workflow_id=workflow_id, step_id="join", agent_id="worker", result="ok"
    )
    status = DagSource(project=lambda: proj).status(run_id=workflow_id).wire()
    assert status["status"] == "COMPLETED"
    assert len(json.dumps(status)) < 2 * limits.DAG_INLINE_BUDGET_CHARS
    assert status["result"]["join"] == "ok"
    assert "get_step_result" in status["result"]["f299"]["result_left_out"]
