"""The read endpoints: shapes, filters, paging, errors, and a constant number of queries."""

from __future__ import annotations

import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from asgiref.sync import async_to_sync

from reviews.gate import CommandReviewer, GateConfig
from reviews.rulings import review_override
from tests.api.conftest import assert_error
from tests.support.driving import finished_step, step_finish
from tests.support.factories import write_job
from workflows.models import Event, StepRun, WorkflowSession
from workflows.services import sessions
from workflows.services.agents import agent_ensure
from workflows.services.catalog import Catalog
from workflows.services.projects import project_ensure

pytestmark = pytest.mark.django_db

FAKE_REVIEWER = Path(__file__).parent.parent / "reviews" / "fake_reviewer.py"

# Every request authenticates first: the token with its user (1), then the user's own and
# group permissions (2). A token's last use is written at most once a minute, so each test
# makes one request before it counts.
AUTH_QUERIES = 3


def start(project, agent_id="agent-1", job="demo", workflow="quick", goal="g", **kwargs):
    return sessions.session_start(
        project=project,
        agent=agent_ensure(project=project, agent_id=agent_id),
        catalog=Catalog(project).view(),
        job_name=job,
        workflow_name=workflow,
        goal=goal,
        **kwargs,
    ).begun.session.session_id


def set_started(session_id: str, when: datetime) -> None:
    WorkflowSession.objects.filter(session_id=session_id).update(started_at=when)


# Projects


def test_projects_list_and_detail(viewer, project, tmp_path):
    other = project_ensure(root_path=tmp_path / "another")
    page = viewer.get("/api/projects").json()
    assert page["count"] == 2
    assert [item["name"] for item in page["items"]] == ["another", "project"]
    assert page["items"][1] == {
        "id": project.pk,
        "name": "project",
        "root_path": project.root_path,
        "created_at": page["items"][1]["created_at"],
        "hosted": True,
        "removed_at": None,
    }
    assert (page["items"][0]["hosted"], page["items"][0]["removed_at"]) == (False, None)
    assert viewer.get("/api/projects", limit=1, offset=1).json()["items"][0]["id"] == project.pk
    assert viewer.get(f"/api/projects/{other.pk}").json()["root_path"] == other.root_path
    error = assert_error(viewer.get(f"/api/projects/{other.pk + 10}"), 404, "not_found")
    assert error["message"] == f"Project {other.pk + 10} not found"


def test_bad_parameters_are_400_with_details(viewer, project):
    error = assert_error(viewer.get("/api/projects", limit=0), 400, "invalid_request")
    assert error["details"][0]["loc"] == ["query", "limit"]
    error = assert_error(viewer.get("/api/projects/abc"), 400, "invalid_request")
    assert error["details"][0]["loc"] == ["path", "project_id"]
    assert_error(viewer.get("/api/projects/0"), 400, "invalid_request")
    assert_error(viewer.get("/api/projects/99999999999999999999"), 400, "invalid_request")
    assert_error(viewer.get("/api/sessions", status="sleeping"), 400, "invalid_request")
    assert_error(viewer.get("/api/sessions", started_after="yesterday"), 400, "invalid_request")
    assert_error(viewer.get("/api/sessions", job="a\x00b"), 400, "invalid_request")
    assert_error(viewer.get("/api/events", after=-1), 400, "invalid_request")
    assert_error(viewer.get("/api/sessions", cursor="not-a-cursor"), 400, "invalid_request")
    response = viewer.client.post(
        "/api/sessions/x/abort",
        "{not json",
        content_type="application/json",
        headers={"Authorization": "Bearer " + viewer.token},
    )
    assert_error(response, 403, "forbidden")


def test_a_body_that_is_not_json_is_400(operator):
    response = operator.client.post(
        "/api/sessions/x/abort",
        "{not json",
        content_type="application/json",
        headers={"Authorization": "Bearer " + operator.token},
    )
    error = assert_error(response, 400, "bad_request")
    assert error["message"] == "Cannot parse request body"
    response = operator.post("/api/sessions/x/finish", {"outputs": {"a": "\ud800"}})
    assert_error(response, 400, "invalid_request")


def test_unknown_paths_and_methods_answer_in_the_error_shape(viewer):
    assert_error(viewer.get("/api/nothing/here"), 404, "not_found")
    assert_error(viewer.get("/api/"), 404, "not_found")
    response = viewer.client.put("/api/projects")
    assert_error(response, 405, "method_not_allowed")
    assert sorted(response["Allow"].split(", ")) == ["GET", "POST"]


def test_projects_query_count_is_constant(viewer, tmp_path, django_assert_num_queries):
    viewer.get("/api/projects")
    for n in range(3):
        project_ensure(root_path=tmp_path / f"p{n}")
    # Authentication, the page, the count.
    with django_assert_num_queries(AUTH_QUERIES + 2):
        assert len(viewer.get("/api/projects").json()["items"]) == 3
    for n in range(3, 12):
        project_ensure(root_path=tmp_path / f"p{n}")
    with django_assert_num_queries(AUTH_QUERIES + 2):
        assert len(viewer.get("/api/projects").json()["items"]) == 12


# The catalog


def test_jobs_with_workflows_steps_and_load_errors(viewer, project, demo_project):
    write_job(demo_project, "broken", "name: [unclosed\n", [])
    Catalog(project).view()
    catalog = viewer.get(f"/api/projects/{project.pk}/jobs").json()

    jobs = {job["dir_name"]: job for job in catalog["jobs"]}
    assert set(jobs) == {"demo", "nested", "deepwork_jobs"}
    demo = jobs["demo"]
    assert (demo["name"], demo["version"], demo["source"]) == ("demo", "1.0.0", "project")
    assert demo["workflows"] == [
        {
            "name": "main",
            "summary": "Gather, split in two, wrap up",
            "entries": [["gather"], ["part_a", "part_b"], ["wrap_up"]],
        },
        {"name": "quick", "summary": "Only gather", "entries": [["gather"]]},
    ]
    steps = {step["step_id"]: step for step in demo["steps"]}
    assert list(steps) == ["gather", "part_a", "part_b", "wrap_up"]
    assert steps["wrap_up"]["inputs"] == [{"file": "notes.md", "from_step": "gather"}]
    assert steps["wrap_up"]["reviews"] == [
        {
            "run_each": "summary.md",
            "quality_criteria": {"Complete": "The summary covers every note."},
            "additional_review_guidance": None,
        }
    ]
    assert steps["gather"]["outputs"][0] == {
        "name": "notes.md",
        "type": "file",
        "description": "Notes",
        "required": True,
    }
    [error] = catalog["errors"]
    assert error["dir_name"] == "broken"
    assert error["error"]
    assert_error(viewer.get("/api/projects/999/jobs"), 404, "not_found")


def test_jobs_query_count_is_constant(viewer, project, demo_project, django_assert_num_queries):
    Catalog(project).view()
    viewer.get(f"/api/projects/{project.pk}/jobs")
    # Authentication; the project; jobs, their steps, workflows, workflow nodes; load errors.
    expected = AUTH_QUERIES + 6
    with django_assert_num_queries(expected):
        assert len(viewer.get(f"/api/projects/{project.pk}/jobs").json()["jobs"]) == 3
    for n in range(4):
        job = (demo_project / ".deepwork/jobs/demo/job.yml").read_text()
        write_job(
            demo_project,
            f"copy{n}",
            job.replace("name: demo", f"name: copy{n}"),
            ["gather", "part_a", "part_b", "wrap_up"],
        )
        write_job(demo_project, f"broken{n}", "name: [unclosed\n", [])
    Catalog(project).view()
    with django_assert_num_queries(expected):
        catalog = viewer.get(f"/api/projects/{project.pk}/jobs").json()
    assert (len(catalog["jobs"]), len(catalog["errors"])) == (7, 4)


# Sessions


@pytest.fixture
def spread(project, tmp_path):
    """Sessions across two projects, jobs, agents and statuses, one day apart (oldest first)."""
    elsewhere = tmp_path / "other"
    (elsewhere / ".deepwork" / "jobs").mkdir(parents=True)
    other = project_ensure(root_path=elsewhere)
    day0 = datetime(2026, 3, 1, 12, tzinfo=UTC)
    ids = [
        start(project, "a1", goal="first"),
        start(project, "a1", job="nested", workflow="only", goal="nested on first"),
        start(project, "a2", workflow="main", goal="second agent"),
        start(other, "a3", job="deepwork_jobs", workflow="new_job", goal="elsewhere"),
    ]
    for n, session_id in enumerate(ids):
        set_started(session_id, day0 + timedelta(days=n))
    sessions.session_abort(
        project=project,
        agent=agent_ensure(project=project, agent_id="a2"),
        explanation="stop",
        session_id=ids[2],
    )
    return {"project": project, "other": other, "ids": ids, "day0": day0}


def listed(caller, **params) -> list[str]:
    response = caller.get("/api/sessions", **params)
    assert response.status_code == 200, response.content
    return [item["session_id"] for item in response.json()["items"]]


def test_sessions_newest_first_with_filters(viewer, spread):
    ids, day0 = spread["ids"], spread["day0"]
    assert listed(viewer) == ids[::-1]
    assert listed(viewer, project=spread["project"].pk) == ids[2::-1]
    assert listed(viewer, project=spread["other"].pk) == [ids[3]]
    assert listed(viewer, job="nested") == [ids[1]]
    assert listed(viewer, job="demo") == [ids[2], ids[0]]
    assert listed(viewer, status="aborted") == [ids[2]]
    assert listed(viewer, status="active", agent="a1") == [ids[1], ids[0]]
    assert listed(viewer, started_after=(day0 + timedelta(days=1)).isoformat()) == ids[:0:-1]
    assert listed(viewer, started_before=(day0 + timedelta(days=1)).isoformat()) == [ids[0]]
    # A naive date-time is taken as UTC; a date alone means its midnight.
    assert listed(viewer, started_after="2026-03-03T12:00:00") == ids[:1:-1]
    assert listed(viewer, started_before="2026-03-02") == [ids[0]]
    assert listed(viewer, agent="nobody") == []
    # Bounds beyond the dates a database stores select what the nearest storable one would.
    assert listed(viewer, started_after="9999-12-31T23:59:59-12:00") == []
    assert listed(viewer, started_before="0001-01-01T00:00:01+01:00") == []
    assert listed(viewer, started_before="9999-12-31T23:59:59-12:00") == ids[::-1]
    assert listed(viewer, started_after="0001-01-01T00:00:01+01:00") == ids[::-1]

    item = viewer.get("/api/sessions", status="aborted").json()["items"][0]
    assert item["agent_id"] == "a2"
    assert (item["status"], item["abort_reason"], item["aborted_by"]) == ("aborted", "stop", "")
    nested = viewer.get("/api/sessions", job="nested").json()["items"][0]
    assert nested["parent_session_id"] == ids[0]
    assert nested["goal"] == "nested on first"


def test_sessions_pages_follow_the_cursor(viewer, spread):
    ids = spread["ids"]
    # Two sessions started in the same instant are ordered by id, and the cursor keeps both.
    set_started(ids[1], spread["day0"])
    seen, cursor = [], None
    while True:
        params = {"limit": 1} if cursor is None else {"limit": 1, "cursor": cursor}
        page = viewer.get("/api/sessions", **params).json()
        seen += [item["session_id"] for item in page["items"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert seen == [ids[3], ids[2], ids[1], ids[0]]
    page = viewer.get("/api/sessions", limit=4).json()
    assert page["next_cursor"] is None


def test_sessions_query_count_is_constant(viewer, project, django_assert_num_queries):
    viewer.get("/api/sessions")
    start(project, "a1")
    for n in range(2):
        start(project, f"b{n}")
    # Authentication, then one query for the page (agents and parents joined).
    with django_assert_num_queries(AUTH_QUERIES + 1):
        assert len(viewer.get("/api/sessions").json()["items"]) == 3
    for n in range(12):
        start(project, "a1" if n % 2 else f"c{n}", job="nested", workflow="only")
    with django_assert_num_queries(AUTH_QUERIES + 1):
        page = viewer.get("/api/sessions", limit=10).json()
    assert len(page["items"]) == 10
    nested = [item for item in page["items"] if item["agent_id"] == "a1"]
    assert len(nested) == 5
    assert all(item["parent_session_id"] is not None for item in nested)
    with django_assert_num_queries(AUTH_QUERIES + 1):
        viewer.get("/api/sessions", limit=10, cursor=page["next_cursor"], project=project.pk)


def test_one_session_with_its_runs_reviews_and_decisions(viewer, operator, project):
    session_id = start(project, "a1", workflow="main")
    agent = agent_ensure(project=project, agent_id="a1")
    step_finish(project=project, agent=agent, outputs={"notes.md": "notes.md"})
    detail = viewer.get(f"/api/sessions/{session_id}").json()
    assert detail["session_id"] == session_id
    assert (detail["status"], detail["current_step_id"]) == ("active", "part_a")
    assert [(run["step_id"], run["status"]) for run in detail["runs"]] == [
        ("gather", "completed"),
        ("part_a", "active"),
        ("part_b", "active"),
    ]
    assert detail["runs"][0]["outputs"] == {"notes.md": "notes.md"}
    assert detail["runs"][1]["reviews"] == []
    review_override(
        step_run=StepRun.objects.get(step_id="part_a"),
        reason="fine",
        by=operator.user,
        via="dashboard",
    )
    decision = viewer.get(f"/api/sessions/{session_id}").json()["runs"][1]["decisions"][0]
    assert (decision["kind"], decision["decided_by"], decision["reason"]) == (
        "override",
        "alice",
        "fine",
    )
    assert (decision["session_id"], decision["step_id"]) == (session_id, "part_a")
    error = assert_error(viewer.get("/api/sessions/deadbeef"), 404, "not_found")
    assert error["message"] == "Session 'deadbeef' not found"


@pytest.mark.django_db(transaction=True)
def test_external_review_verdicts_are_shown_per_criterion(viewer, project, monkeypatch, tmp_path):
    monkeypatch.setenv("FAKE_REVIEW", "fail")
    monkeypatch.setenv("FAKE_REVIEW_LOG", str(tmp_path / "log"))
    session_id = start(project, "a1", workflow="main")
    agent = agent_ensure(project=project, agent_id="a1")
    step_finish(project=project, agent=agent, outputs={"notes.md": "notes.md"})
    step_finish(project=project, agent=agent, outputs={"a.md": "a.md", "b.md": "b.md"})
    gate = GateConfig(reviewer=CommandReviewer(f"{sys.executable} {FAKE_REVIEWER}"))
    answer = async_to_sync(finished_step)(
        project=project, agent=agent, gate=gate, outputs={"summary.md": "summary.md"}
    )
    assert answer.status == "needs_work"

    run = viewer.get(f"/api/sessions/{session_id}").json()["runs"][-1]
    assert (run["step_id"], run["quality_attempts"]) == ("wrap_up", 1)
    [review] = run["reviews"]
    assert (review["passed"], review["feedback"], review["target_file"]) == (
        False,
        "Needs improvement",
        "summary.md",
    )
    assert review["criteria_results"] == [
        {"criterion": "Complete", "passed": False, "feedback": "Add more"}
    ]
    assert (review["reviewer_kind"], review["attempt"]) == ("external", 1)


def test_session_detail_query_count_is_constant(
    viewer, operator, project, django_assert_num_queries
):
    session_id = start(project, "a1", workflow="main")
    agent = agent_ensure(project=project, agent_id="a1")
    viewer.get(f"/api/sessions/{session_id}")
    # Authentication; the session; its runs; their reviews; their decisions.
    expected = AUTH_QUERIES + 4
    with django_assert_num_queries(expected):
        assert len(viewer.get(f"/api/sessions/{session_id}").json()["runs"]) == 1
    for _ in range(3):
        step_finish(project=project, agent=agent, outputs={"notes.md": "notes.md"})
        for step in ("part_a", "part_b"):
            review_override(
                step_run=StepRun.objects.get(step_id=step, status="active"),
                reason="ok",
                by=operator.user,
                via="dashboard",
            )
        sessions.session_go_to_step(project=project, agent=agent, step_id="gather")
    with django_assert_num_queries(expected):
        runs = viewer.get(f"/api/sessions/{session_id}").json()["runs"]
    assert len(runs) == 10
    assert sum(len(run["decisions"]) for run in runs) == 6


# Events


def test_events_after_an_id(viewer, spread):
    project, other, ids = spread["project"], spread["other"], spread["ids"]
    everything = viewer.get("/api/events", limit=500).json()
    assert everything["has_more"] is False
    all_ids = [event["id"] for event in everything["items"]]
    assert all_ids == sorted(all_ids)
    assert all_ids == list(Event.objects.order_by("id").values_list("id", flat=True))

    started = Event.objects.get(kind="session_started", session__session_id=ids[0])
    first = next(e for e in everything["items"] if e["id"] == started.id)
    assert first == {
        "id": started.id,
        "kind": "session_started",
        "project_id": project.pk,
        "session_id": ids[0],
        "agent_id": "a1",
        "payload": {"job": "demo", "workflow": "quick", "goal": "first", "parent": None},
        "created_at": first["created_at"],
    }

    page = viewer.get("/api/events", after=all_ids[1], limit=2).json()
    assert [e["id"] for e in page["items"]] == all_ids[2:4]
    assert (page["last_id"], page["has_more"]) == (all_ids[3], True)
    tail = viewer.get("/api/events", after=all_ids[-1]).json()
    assert (tail["items"], tail["last_id"], tail["has_more"]) == ([], all_ids[-1], False)

    mine = viewer.get("/api/events", session=ids[2]).json()["items"]
    assert [e["kind"] for e in mine] == ["session_started", "step_started", "session_aborted"]
    assert {e["project_id"] for e in viewer.get("/api/events", project=other.pk).json()["items"]}
    assert all(
        e["project_id"] == other.pk
        for e in viewer.get("/api/events", project=other.pk).json()["items"]
    )


def test_events_query_count_is_constant(viewer, project, django_assert_num_queries):
    viewer.get("/api/events")
    start(project, "a1")
    # Authentication, then one query (session and agent ids joined).
    with django_assert_num_queries(AUTH_QUERIES + 1):
        few = len(viewer.get("/api/events").json()["items"])
    for n in range(10):
        start(project, f"b{n}")
    with django_assert_num_queries(AUTH_QUERIES + 1):
        many = len(viewer.get("/api/events").json()["items"])
    assert many > few
