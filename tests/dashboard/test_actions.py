"""The decision forms: override, request changes, abort. Permissions, CSRF, service errors."""

from __future__ import annotations

import html as htmllib
import re

import pytest

from reviews.models import HumanDecision
from tests.dashboard.conftest import client_for
from tests.support.factories import make_user
from workflows.models import Event, StepRun, WorkflowSession

pytestmark = pytest.mark.django_db


def flashes(client, url: str) -> list[tuple[str, str]]:
    page = client.get(url).content.decode()
    found = re.findall(r'data-testid="flash" data-level="(\w+)"[^>]*>([^<]*)<', page)
    return [(level, htmllib.unescape(text)) for level, text in found]


def test_override_records_the_decision_and_the_agent_gets_it(deciding, decider, driver):
    session = driver.to_wrap_up()
    url = f"/sessions/{session.session_id}/"

    response = deciding.post(
        url + "override/", {"step_id": "wrap_up", "reason": "The summary is fine"}
    )

    assert response.status_code == 302
    assert response["Location"] == url
    decision = HumanDecision.objects.get()
    assert (decision.kind, decision.reason, decision.decided_by, decision.step_run.step_id) == (
        "override",
        "The summary is fine",
        decider,
        "wrap_up",
    )
    assert decision.via == "dashboard"
    overridden = Event.objects.get(kind="review_overridden")
    assert (overridden.payload["by"], overridden.payload["via"]) == ("dana", "dashboard")
    assert flashes(deciding, url) == [
        (
            "success",
            "Review of step 'wrap_up' overridden: the agent's next finished_step passes it",
        )
    ]
    # The session page says who ruled and through what.
    page = deciding.get(url).content.decode()
    assert '<span class="muted" data-testid="decision-via">via dashboard</span>' in page
    # The agent's next hand-in passes without a review.
    answer = driver.finish({"summary.md": "summary.md"})
    assert answer.status == "workflow_complete"


def test_request_changes_sends_the_feedback_to_the_agent(deciding, driver):
    from reviews.services import review_plan
    from tests.dashboard.conftest import GATE
    from workflows.dialects import deepwork
    from workflows.services import sessions

    session = driver.to_wrap_up()
    url = f"/sessions/{session.session_id}/"

    response = deciding.post(
        url + "request-changes/", {"step_id": "wrap_up", "feedback": "Name every note"}
    )

    assert response.status_code == 302
    decision = HumanDecision.objects.get()
    assert (decision.kind, decision.reason) == ("request_changes", "Name every note")
    [(level, _)] = flashes(deciding, url)
    assert level == "success"
    checkpoint = sessions.step_checkpoint(
        project=driver.project, agent=driver.agent, outputs={"summary.md": "summary.md"}
    )
    plan = review_plan(checkpoint=checkpoint, gate=GATE, override_reason=None)
    assert deepwork.finished_step(plan.answer).feedback == (
        "Changes requested by dana: Name every note"
    )


def test_abort_records_who_and_why(deciding, driver):
    session = driver.to_wrap_up()
    url = f"/sessions/{session.session_id}/"

    response = deciding.post(url + "abort/", {"reason": "Wrong goal", "confirm": "on"})

    assert response.status_code == 302
    session.refresh_from_db()
    assert (session.status, session.abort_reason, session.aborted_by) == (
        "aborted",
        "Wrong goal",
        "dana",
    )
    assert flashes(deciding, url) == [("success", f"Session '{session.session_id}' aborted")]
    html = deciding.get(url).content.decode()
    assert 'data-testid="abort-form"' not in html
    assert "Wrong goal" in html


@pytest.mark.parametrize(
    ("action", "data", "message"),
    [
        ("override/", {"step_id": "wrap_up", "reason": "  "}, "A reason is required"),
        ("request-changes/", {"step_id": "wrap_up", "feedback": ""}, "Feedback is required"),
        ("abort/", {"reason": "", "confirm": "on"}, "A reason is required"),
        # Aborting cannot be undone: without the confirmation box ticked, nothing happens.
        ("abort/", {"reason": "Wrong goal"}, "Tick the box to confirm"),
        ("override/", {"step_id": "gather", "reason": "ok"}, "Step 'gather' is not"),
        ("override/", {"reason": "ok"}, "step_id: This field is required."),
        (
            "abort/",
            {"reason": "x" * 10_001, "confirm": "on"},
            "reason: Ensure this value has at most 10000",
        ),
        (
            "request-changes/",
            {"step_id": "wrap_up", "feedback": "y" * 10_001},
            "feedback: Ensure this value has at most 10000",
        ),
    ],
)
def test_bad_input_and_service_errors_become_messages(deciding, driver, action, data, message):
    session = driver.to_wrap_up()
    url = f"/sessions/{session.session_id}/"

    response = deciding.post(url + action, data)

    assert response.status_code == 302
    [(level, text)] = flashes(deciding, url)
    assert level == "error"
    assert text.startswith(message), text
    assert not HumanDecision.objects.exists()
    assert WorkflowSession.objects.get().status == "active"


def test_deciding_on_a_finished_session_is_a_message_not_a_500(deciding, driver):
    session = driver.start(workflow="quick")
    driver.finish({"notes.md": "notes.md"})
    url = f"/sessions/{session.session_id}/"
    deciding.post(url + "override/", {"step_id": "gather", "reason": "late"})
    deciding.post(url + "abort/", {"reason": "late", "confirm": "on"})
    messages = [text for _, text in flashes(deciding, url)]
    assert messages == [
        f"Session '{session.session_id}' is completed; only the current step of an active "
        "session can be overridden or sent back",
        f"Session '{session.session_id}' is completed; it is no longer in the "
        "active stack and cannot change",
    ]


@pytest.mark.parametrize(
    ("action", "data"),
    [
        ("override/", {"step_id": "wrap_up", "reason": "r"}),
        ("request-changes/", {"step_id": "wrap_up", "feedback": "f"}),
        ("abort/", {"reason": "r", "confirm": "on"}),
    ],
)
def test_watchers_may_not_decide(watching, driver, action, data):
    session = driver.to_wrap_up()
    response = watching.post(f"/sessions/{session.session_id}/{action}", data)
    assert response.status_code == 403
    assert not HumanDecision.objects.exists()
    assert WorkflowSession.objects.get().status == "active"


def test_each_action_checks_its_own_permission(driver):
    session = driver.to_wrap_up()
    url = f"/sessions/{session.session_id}/"
    decide_only = client_for(
        make_user(username="d", perms=("workflows.view_workflowsession", "reviews.decide_review"))
    )
    abort_only = client_for(
        make_user(username="a", perms=("workflows.view_workflowsession", "workflows.abort_session"))
    )

    assert decide_only.post(url + "abort/", {"reason": "r", "confirm": "on"}).status_code == 403
    assert (
        abort_only.post(url + "override/", {"step_id": "wrap_up", "reason": "r"}).status_code == 403
    )
    html = decide_only.get(url).content.decode()
    assert 'data-testid="override-form"' in html
    assert 'data-testid="abort-form"' not in html
    html = abort_only.get(url).content.decode()
    assert 'data-testid="override-form"' not in html
    assert 'data-testid="abort-form"' in html

    assert (
        decide_only.post(url + "override/", {"step_id": "wrap_up", "reason": "r"}).status_code
        == 302
    )
    assert abort_only.post(url + "abort/", {"reason": "r", "confirm": "on"}).status_code == 302
    assert WorkflowSession.objects.get().status == "aborted"


def test_actions_take_only_posts(deciding, driver):
    session = driver.to_wrap_up()
    for action in ("override/", "request-changes/", "abort/"):
        assert deciding.get(f"/sessions/{session.session_id}/{action}").status_code == 405


def test_unknown_session_is_a_404(deciding):
    assert (
        deciding.post("/sessions/nope/abort/", {"reason": "r", "confirm": "on"}).status_code == 404
    )


@pytest.mark.parametrize(
    ("action", "data"),
    [
        ("override/", {"step_id": "wrap_up", "reason": "r"}),
        ("request-changes/", {"step_id": "wrap_up", "feedback": "f"}),
        ("abort/", {"reason": "r", "confirm": "on"}),
    ],
)
def test_csrf_is_enforced(decider, driver, action, data):
    session = driver.to_wrap_up()
    url = f"/sessions/{session.session_id}/"
    client = client_for(decider, enforce_csrf=True)

    refused = client.post(url + action, data)

    assert refused.status_code == 403
    assert not HumanDecision.objects.exists()
    assert WorkflowSession.objects.get().status == "active"

    # With the token the page's form carries, the same post goes through.
    html = client.get(url).content.decode()
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', html).group(1)
    accepted = client.post(url + action, {**data, "csrfmiddlewaretoken": token})
    assert accepted.status_code == 302
    changed = HumanDecision.objects.exists() or WorkflowSession.objects.get().status == "aborted"
    assert changed


def test_concurrent_members_are_decided_one_by_one(deciding, driver):
    session = driver.start()
    driver.finish({"notes.md": "notes.md"})
    deciding.post(
        f"/sessions/{session.session_id}/override/", {"step_id": "part_b", "reason": "fine"}
    )
    decision = HumanDecision.objects.get()
    assert decision.step_run == StepRun.objects.get(step_id="part_b")


def test_superuser_can_decide(driver):
    admin = make_user(username="root", superuser=True)
    session = driver.to_wrap_up()
    response = client_for(admin).post(
        f"/sessions/{session.session_id}/abort/", {"reason": "stop", "confirm": "on"}
    )
    assert response.status_code == 302
    assert WorkflowSession.objects.get().aborted_by == "root"
