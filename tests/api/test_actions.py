"""Driving the demo workflow over REST: the same services, validation and answers as the MCP
tools, plus who did what.

``finish`` runs the quality gate through ``step_finish_gated``, whose database calls go through
Channels' ``database_sync_to_async``; that closes a connection left inside a transaction, so
tests that finish a step use real transactions (``@finishes``).
"""

from __future__ import annotations

import pytest
from django.test import AsyncClient

from accounts.services import api_token_create
from reviews.models import HumanDecision, ReviewResult
from tests.api.conftest import ABORT, DECIDE, DRIVE, VIEW, assert_error
from tests.support.factories import write_job
from workflows.dialects import deepwork
from workflows.generations import v0_9 as first_generation
from workflows.models import Agent, Event, StepRun, WorkflowSession
from workflows.services import sessions as session_services
from workflows.services.projects import project_add

pytestmark = pytest.mark.django_db
finishes = pytest.mark.django_db(transaction=True)


@pytest.fixture
def demo(demo_project):
    return project_add(root_path=str(demo_project)).project


def start(caller, project, workflow="main", **extra):
    body = {
        "project": project.pk,
        "job_name": "demo",
        "workflow_name": workflow,
        "goal": "write it up",
        **extra,
    }
    return caller.post("/api/sessions", body)


def finish(caller, session_id, outputs, **extra):
    return caller.post(f"/api/sessions/{session_id}/finish", {"outputs": outputs, **extra})


@finishes
def test_drives_the_demo_workflow_to_completion(operator, demo, demo_project):
    started = start(operator, demo, instance_id="acme")
    assert started.status_code == 201, started.content
    begin = started.json()["begin_step"]
    session_id = begin["session_id"]
    assert begin["step_id"] == "gather"
    assert begin["step_instructions"] == "# gather\n\nDo the gather work.\n"
    assert started.json()["stack"] == [{"workflow": "demo/main", "step": "gather"}]
    session = WorkflowSession.objects.select_related("agent").get(session_id=session_id)
    assert session.agent.agent_id == "api:alice"
    assert session.instance_id == "acme"

    answer = finish(operator, session_id, {"notes.md": "notes.md"}, notes="gathered")
    assert answer.status_code == 200, answer.content
    assert answer.json()["status"] == "next_step"
    assert answer.json()["begin_step"]["step_id"] == "part_a"

    answer = finish(operator, session_id, {"a.md": "a.md", "b.md": "b.md"})
    assert answer.json()["begin_step"]["step_id"] == "wrap_up"

    # wrap_up has a review: without an external reviewer the gate asks for a self-review,
    # exactly as finished_step answers an agent.
    answer = finish(operator, session_id, {"summary.md": "summary.md"})
    assert answer.status_code == 200
    body = answer.json()
    assert body["status"] == "needs_work"
    instructions = f".deepwork/tmp/quality_review_{session_id}_wrap_up.md"
    assert instructions in body["feedback"]
    assert (demo_project / instructions).is_file()

    answer = finish(
        operator, session_id, {"summary.md": "summary.md"}, override_reason="Self-review passed"
    )
    body = answer.json()
    assert body["status"] == "workflow_complete"
    assert body["all_outputs"] == {
        "notes.md": "notes.md",
        "a.md": "a.md",
        "b.md": "b.md",
        "summary.md": "summary.md",
    }
    assert body["stack"] == []
    assert WorkflowSession.objects.get(session_id=session_id).status == "completed"
    review = ReviewResult.objects.get()
    assert (review.passed, review.override_reason) == (True, "Self-review passed")
    # A person handed in the override: the verdict is recorded as theirs.
    assert (review.reviewer_kind, review.reviewer) == ("human", "alice")
    passed = Event.objects.get(session__session_id=session_id, kind="review_passed")
    assert passed.payload == {
        "step_ids": ["wrap_up"],
        "attempt": 1,
        "reviews": 0,
        "failed": 0,
        "override_reason": "Self-review passed",
        "by": "alice",
    }

    detail = operator.get(f"/api/sessions/{session_id}").json()
    assert [run["step_id"] for run in detail["runs"]] == ["gather", "part_a", "part_b", "wrap_up"]
    assert detail["runs"][3]["reviews"][0]["override_reason"] == "Self-review passed"
    assert detail["runs"][0]["notes"] == "gathered"


@finishes
def test_rest_answers_equal_the_engines_answers(operator, demo):
    """The REST body is the wire model the services (and so the MCP tools) return."""
    session_id = start(operator, demo).json()["begin_step"]["session_id"]
    rest = finish(operator, session_id, {"notes.md": "notes.md"}).json()
    session = WorkflowSession.objects.select_related("agent", "project").get(session_id=session_id)
    again = deepwork.go_to_step(
        project=session.project, agent=session.agent, step_id="part_a", session_id=session_id
    )
    assert rest["begin_step"] == again.begin_step.model_dump(mode="json")
    assert rest["stack"] == [entry.model_dump() for entry in again.stack]


def test_start_on_a_named_agent_nests_on_its_stack(operator, demo):
    first = start(operator, demo, agent_id="builder").json()
    second = operator.post(
        "/api/sessions",
        {
            "project": demo.pk,
            "job_name": "nested",
            "workflow_name": "only",
            "goal": "inner",
            "agent_id": "builder",
        },
    ).json()
    assert second["stack"] == [
        {"workflow": "demo/main", "step": "gather"},
        {"workflow": "nested/only", "step": "first"},
    ]
    inner = WorkflowSession.objects.get(session_id=second["begin_step"]["session_id"])
    assert inner.parent.session_id == first["begin_step"]["session_id"]
    assert Agent.objects.get(agent_id="builder").explicit


def test_start_refuses_what_start_workflow_refuses(operator, demo):
    error = assert_error(start(operator, demo, workflow="nope"), 404, "not_found")
    assert error["message"] == (
        "Workflow 'nope' not found in job 'demo'. Available workflows: main, quick"
    )
    body = {"project": demo.pk, "job_name": "ghost", "workflow_name": "x", "goal": "g"}
    error = assert_error(operator.post("/api/sessions", body), 404, "not_found")
    assert error["message"] == "Job not found: ghost"
    error = assert_error(
        operator.post("/api/sessions", {**body, "project": demo.pk + 1}), 404, "not_found"
    )
    assert error["message"] == f"Project {demo.pk + 1} not found"
    error = assert_error(
        operator.post("/api/sessions", {**body, "agent_id": "\x1c"}), 400, "invalid_input"
    )
    assert error["message"] == "agent_id must be 1 to 128 characters"
    for agent_id in (" ", "x" * 129):
        assert_error(
            operator.post("/api/sessions", {**body, "agent_id": agent_id}), 400, "invalid_request"
        )
    assert not WorkflowSession.objects.exists()


def test_a_broken_job_is_a_409_with_the_parse_error(operator, demo, demo_project):
    write_job(demo_project, "broken", "name: [unclosed\n", [])
    body = {"project": demo.pk, "job_name": "broken", "workflow_name": "x", "goal": "g"}
    error = assert_error(operator.post("/api/sessions", body), 409, "job_broken")
    assert error["message"].startswith("Failed to parse job 'broken': ")


def test_a_project_whose_folder_is_elsewhere_cannot_start(operator, demo, tmp_path):
    gone = project_add(root_path=str(tmp_path / "elsewhere")).project
    body = {"project": gone.pk, "job_name": "demo", "workflow_name": "main", "goal": "g"}
    error = assert_error(operator.post("/api/sessions", body), 409, "project_unavailable")
    assert "is not on this server" in error["message"]


@finishes
def test_finish_validates_outputs_like_finished_step(operator, demo):
    session_id = start(operator, demo).json()["begin_step"]["session_id"]
    error = assert_error(finish(operator, session_id, {}), 400, "invalid_input")
    assert "notes.md" in error["message"]
    error = assert_error(finish(operator, session_id, {"notes.md": "../x"}), 400, "invalid_input")
    assert WorkflowSession.objects.get(session_id=session_id).current_step_id == "gather"
    assert_error(finish(operator, "deadbeef", {"notes.md": "notes.md"}), 404, "not_found")


@finishes
def test_finish_of_a_completed_session_is_refused(operator, demo):
    session_id = start(operator, demo, workflow="quick").json()["begin_step"]["session_id"]
    assert finish(operator, session_id, {"notes.md": "notes.md"}).json()["status"] == (
        "workflow_complete"
    )
    error = assert_error(finish(operator, session_id, {"notes.md": "notes.md"}), 404, "not_found")
    assert error["message"] == (
        f"Session '{session_id}' is completed; it is no longer in the active stack and "
        "cannot change"
    )


@finishes
def test_a_finish_that_loses_the_race_is_a_409_and_changes_nothing(operator, demo, monkeypatch):
    """Another client finishes the step while this finish validates: exactly one applies."""
    session_id = start(operator, demo).json()["begin_step"]["session_id"]
    validate = first_generation.validate_outputs
    rival: list = []

    def validate_then_let_the_rival_in(**kwargs):
        validate(**kwargs)
        if not rival:
            rival.append(None)  # the rival's own validation must not start a third call
            rival[0] = finish(operator, session_id, {"notes.md": "notes.md"})

    monkeypatch.setattr(first_generation, "validate_outputs", validate_then_let_the_rival_in)
    late = finish(operator, session_id, {"notes.md": "notes.md"})

    assert rival[0].status_code == 200
    assert rival[0].json()["begin_step"]["step_id"] == "part_a"
    error = assert_error(late, 409, "conflict")
    assert error["message"] == (
        f"Session '{session_id}' moved on while this call ran: its current step is now "
        "'part_a'; nothing was changed"
    )
    session = WorkflowSession.objects.get(session_id=session_id)
    assert (session.current_step_id, session.revision) == ("part_a", 1)
    assert StepRun.objects.filter(session=session, step_id="gather").count() == 1
    assert Event.objects.filter(session=session, kind=Event.Kind.STEP_FINISHED).count() == 1


def test_abort_records_the_person_and_the_reason(operator, demo):
    session_id = start(operator, demo).json()["begin_step"]["session_id"]
    error = assert_error(
        operator.post(f"/api/sessions/{session_id}/abort", {"reason": "  "}),
        400,
        "invalid_input",
    )
    assert error["message"] == "A reason is required so the agent and the team know why"

    answer = operator.post(f"/api/sessions/{session_id}/abort", {"reason": "wrong goal"})
    assert answer.status_code == 200, answer.content
    assert answer.json() == {
        "aborted_workflow": "demo/main",
        "aborted_step": "gather",
        "explanation": "wrong goal",
        "stack": [],
        "resumed_workflow": None,
        "resumed_step": None,
    }
    session = WorkflowSession.objects.get(session_id=session_id)
    assert (session.status, session.aborted_by, session.abort_reason) == (
        "aborted",
        "alice",
        "wrong goal",
    )
    event = Event.objects.get(kind=Event.Kind.SESSION_ABORTED)
    assert event.payload["by"] == "alice"
    assert_error(
        operator.post(f"/api/sessions/{session_id}/abort", {"reason": "again"}), 404, "not_found"
    )


@finishes
def test_go_to_step(operator, demo):
    session_id = start(operator, demo).json()["begin_step"]["session_id"]
    finish(operator, session_id, {"notes.md": "notes.md"})
    error = assert_error(
        operator.post(f"/api/sessions/{session_id}/go-to-step", {"step_id": "wrap_up"}),
        400,
        "invalid_input",
    )
    assert error["message"].startswith("Cannot go forward to step 'wrap_up'")
    assert_error(
        operator.post(f"/api/sessions/{session_id}/go-to-step", {"step_id": "nope"}),
        404,
        "not_found",
    )
    answer = operator.post(f"/api/sessions/{session_id}/go-to-step", {"step_id": "gather"})
    assert answer.status_code == 200
    assert answer.json()["invalidated_steps"] == ["gather", "part_a", "part_b"]
    assert answer.json()["begin_step"]["step_id"] == "gather"


def to_wrap_up(caller, project) -> str:
    session_id = start(caller, project).json()["begin_step"]["session_id"]
    finish(caller, session_id, {"notes.md": "notes.md"})
    finish(caller, session_id, {"a.md": "a.md", "b.md": "b.md"})
    return session_id


@finishes
def test_a_person_overrides_a_review_and_the_next_finish_passes(operator, demo):
    session_id = to_wrap_up(operator, demo)
    url = f"/api/sessions/{session_id}/steps/wrap_up/override"
    assert_error(operator.post(url, {"reason": ""}), 400, "invalid_input")

    answer = operator.post(url, {"reason": "Checked it myself"})
    assert answer.status_code == 201, answer.content
    decision = answer.json()
    assert decision["kind"] == "override"
    assert (decision["session_id"], decision["step_id"]) == (session_id, "wrap_up")
    assert (decision["decided_by"], decision["reason"]) == ("alice", "Checked it myself")
    assert decision["consumed_at"] is None
    stored = HumanDecision.objects.get()
    assert stored.decided_by.username == "alice"

    answer = finish(operator, session_id, {"summary.md": "summary.md"})
    assert answer.json()["status"] == "workflow_complete"
    detail = operator.get(f"/api/sessions/{session_id}").json()
    assert detail["runs"][-1]["decisions"][0]["consumed_at"] is not None

    # The step is over: a ruling on it now is a conflict with its state.
    error = assert_error(operator.post(url, {"reason": "late"}), 409, "conflict")
    assert "only the current step" in error["message"]


@finishes
def test_a_person_requests_changes_and_the_agent_reads_them(operator, demo):
    session_id = to_wrap_up(operator, demo)
    url = f"/api/sessions/{session_id}/steps/wrap_up/request-changes"
    answer = operator.post(url, {"feedback": "Cover the B half too"})
    assert answer.status_code == 201
    assert answer.json()["kind"] == "request_changes"

    answer = finish(operator, session_id, {"summary.md": "summary.md"})
    body = answer.json()
    assert body["status"] == "needs_work"
    assert body["feedback"] == "Changes requested by alice: Cover the B half too"
    detail = operator.get(f"/api/sessions/{session_id}").json()
    human = detail["runs"][-1]["reviews"][0]
    assert (human["reviewer_kind"], human["reviewer"], human["passed"]) == (
        "human",
        "alice",
        False,
    )
    assert_error(
        operator.post(f"/api/sessions/{session_id}/steps/ghost/override", {"reason": "r"}),
        404,
        "not_found",
    )


@finishes
def test_skipping_a_review_with_override_reason_needs_decide_review(make_caller, operator, demo):
    """Without ``reviews.decide_review`` a hand-in with ``override_reason`` changes nothing;
    with it the review is skipped, and the event names the person who skipped it."""
    driver = make_caller(VIEW, DRIVE, username="driver")
    session_id = to_wrap_up(driver, demo)
    session = WorkflowSession.objects.get(session_id=session_id)
    events_before = Event.objects.count()

    error = assert_error(
        finish(driver, session_id, {"summary.md": "summary.md"}, override_reason="looks fine"),
        403,
        "forbidden",
    )
    assert error["message"] == (
        f"Skipping the review with 'override_reason' needs the permission '{DECIDE}'"
    )
    session.refresh_from_db()
    assert (session.status, session.current_step_id) == ("active", "wrap_up")
    assert StepRun.objects.get(session=session, step_id="wrap_up").quality_attempts == 0
    assert not ReviewResult.objects.exists()
    assert Event.objects.count() == events_before

    # The same caller may still hand in for review.
    answer = finish(driver, session_id, {"summary.md": "summary.md"})
    assert answer.json()["status"] == "needs_work"

    answer = finish(
        operator, session_id, {"summary.md": "summary.md"}, override_reason="Reviewed by hand"
    )
    assert answer.json()["status"] == "workflow_complete", answer.content
    finished = Event.objects.filter(session=session, kind=Event.Kind.STEP_FINISHED)
    assert finished.order_by("-id").first().payload["by"] == "alice"


def test_override_reason_is_refused_before_the_session_is_looked_up(make_caller, demo):
    driver = make_caller(VIEW, DRIVE, username="driver")
    response = finish(driver, "deadbeef", {"notes.md": "notes.md"}, override_reason="r")
    assert_error(response, 403, "forbidden")
    # An explicit null is no override.
    response = finish(driver, "deadbeef", {"notes.md": "notes.md"}, override_reason=None)
    assert_error(response, 404, "not_found")


def test_tokens_of_two_users_record_two_people(make_caller, demo):
    bob = make_caller(VIEW, DRIVE, ABORT, username="bob")
    session_id = start(bob, demo).json()["begin_step"]["session_id"]
    _, carol_secret = api_token_create(user=make_caller(ABORT, username="carol").user, name="x")
    bob.token = carol_secret
    bob.post(f"/api/sessions/{session_id}/abort", {"reason": "carol stops it"})
    session = WorkflowSession.objects.select_related("agent").get(session_id=session_id)
    assert (session.agent.agent_id, session.aborted_by) == ("api:bob", "carol")


@finishes
async def test_finish_works_under_asgi(operator, demo):
    """Under ASGI the sync endpoint runs in a worker thread and hands the gate to the loop."""
    client = AsyncClient()
    auth = {"Authorization": f"Bearer {operator.token}"}
    body = {"project": demo.pk, "job_name": "demo", "workflow_name": "quick", "goal": "g"}
    started = await client.post(
        "/api/sessions", body, content_type="application/json", headers=auth
    )
    assert started.status_code == 201, started.content
    session_id = started.json()["begin_step"]["session_id"]
    answer = await client.post(
        f"/api/sessions/{session_id}/finish",
        {"outputs": {"notes.md": "notes.md"}},
        content_type="application/json",
        headers=auth,
    )
    assert answer.status_code == 200, answer.content
    assert answer.json()["status"] == "workflow_complete"


@finishes
def test_starts_hand_ins_and_returns_record_the_person(operator, demo):
    """The agent acts for the person driving it over REST; each event names that person."""
    session_id = start(operator, demo).json()["begin_step"]["session_id"]
    finish(operator, session_id, {"notes.md": "notes.md"})
    operator.post(f"/api/sessions/{session_id}/go-to-step", {"step_id": "gather"})

    events = Event.objects.filter(session__session_id=session_id)
    by_kind = {event.kind: event.payload.get("by") for event in events.order_by("id")}
    assert by_kind["session_started"] == "alice"
    assert by_kind["step_finished"] == "alice"
    assert by_kind["step_reopened"] == "alice"


def test_an_agents_own_actions_name_no_person(project, catalog, agent):
    answer = session_services.session_start(
        project=project,
        agent=agent,
        catalog=catalog.view(),
        job_name="demo",
        workflow_name="main",
        goal="g",
    )
    event = Event.objects.get(
        session__session_id=answer.begun.session.session_id, kind="session_started"
    )
    assert "by" not in event.payload
