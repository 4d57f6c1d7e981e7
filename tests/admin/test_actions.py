"""Admin actions: abort sessions, override a review, request changes; each asks why first."""

from __future__ import annotations

import pytest
from django.contrib import messages
from django.contrib.messages import get_messages
from django.test import Client
from django.urls import reverse

from reviews.models import HumanDecision, ReviewResult
from tests.support.factories import make_user
from workflows.models import Event, StepRun, WorkflowSession
from workflows.services import sessions

pytestmark = pytest.mark.django_db

SESSIONS = reverse("admin:workflows_workflowsession_changelist")
STEP_RUNS = reverse("admin:workflows_steprun_changelist")
REVIEWS = reverse("admin:reviews_reviewresult_changelist")


def choose(client: Client, changelist: str, action: str, pks, *, query: str = "", across=False):
    """The changelist's action form: pick an action for the ticked rows."""
    return client.post(
        changelist + query,
        {
            "action": action,
            "_selected_action": list(pks),
            "select_across": "1" if across else "0",
            "index": 0,
        },
    )


def apply(client: Client, changelist: str, action: str, pks, reason: str, **kwargs):
    """The reason page's form, as the page posts it back."""
    query = kwargs.pop("query", "")
    page = choose(client, changelist, action, pks, query=query, **kwargs)
    assert page.status_code == 200
    assert [t.name for t in page.templates][0] == "admin/deepwork/action_reason.html"
    return client.post(
        changelist + query,
        {
            "action": action,
            "_selected_action": list(pks),
            "select_across": "1" if kwargs.get("across") else "0",
            "apply": "yes",
            "reason": reason,
        },
    )


def sent_messages(response) -> list[tuple[int, str]]:
    return [(m.level, m.message) for m in get_messages(response.wsgi_request)]


def offered_actions(listing) -> set[str]:
    form = listing.context["action_form"]
    return set() if form is None else set(dict(form.fields["action"].choices))


def status(session: WorkflowSession) -> str:
    session.refresh_from_db()
    return session.status


# Abort --------------------------------------------------------------------------------------------


def test_abort_asks_for_a_reason_on_an_intermediate_page(admin_client, driver):
    session = driver.start()

    page = choose(admin_client, SESSIONS, "abort_sessions", [session.pk])

    assert page.status_code == 200
    assert "csrfmiddlewaretoken" in page.text
    assert session.session_id in page.text
    assert 'name="reason"' in page.text
    assert status(session) == "active"


def test_abort_without_a_reason_changes_nothing(admin_client, driver):
    session = driver.start()

    response = apply(admin_client, SESSIONS, "abort_sessions", [session.pk], reason="   ")

    assert response.status_code == 200
    assert response.context["form"].errors == {"reason": ["This field is required."]}
    assert status(session) == "active"


def test_abort_records_who_and_why(admin_client, admin_user, driver):
    first, second = driver.start(), driver.start(job="nested", workflow="only")

    response = apply(
        admin_client, SESSIONS, "abort_sessions", [first.pk, second.pk], reason="wrong goal"
    )

    assert response.status_code == 302
    assert sent_messages(response) == [(messages.SUCCESS, "Aborted 2 sessions.")]
    for session in (first, second):
        session.refresh_from_db()
        assert session.status == "aborted"
        assert session.abort_reason == "wrong goal"
        assert session.aborted_by == admin_user.username
        event = Event.objects.get(session=session, kind=Event.Kind.SESSION_ABORTED)
        assert event.payload["by"] == admin_user.username
    assert not StepRun.objects.filter(session__in=[first, second], status="active").exists()


def test_a_finished_session_is_reported_and_the_others_are_aborted(admin_client, driver):
    completed = driver.start(workflow="quick")
    driver.finish(completed, {"notes.md": "notes.md"})
    active = driver.start()

    response = apply(
        admin_client, SESSIONS, "abort_sessions", [completed.pk, active.pk], reason="stop"
    )

    assert response.status_code == 302
    assert sent_messages(response) == [
        (
            messages.ERROR,
            f"Session {completed.session_id}: Session '{completed.session_id}' is completed; "
            "it is no longer in the active stack and cannot change",
        ),
        (messages.SUCCESS, "Aborted 1 session."),
    ]
    assert status(completed) == "completed"
    assert status(active) == "aborted"


def test_an_abort_that_loses_to_the_agent_is_an_error_message(admin_client, driver):
    session = driver.start()
    page = choose(admin_client, SESSIONS, "abort_sessions", [session.pk])
    assert page.status_code == 200
    # While the person types the reason, the agent aborts the session itself.
    sessions.session_abort(
        project=driver.project,
        agent=driver.agent,
        session_id=session.session_id,
        explanation="agent gave up",
    )

    response = admin_client.post(
        SESSIONS,
        {
            "action": "abort_sessions",
            "_selected_action": [session.pk],
            "select_across": "0",
            "apply": "yes",
            "reason": "too late",
        },
    )

    assert response.status_code == 302
    ((level, text),) = sent_messages(response)
    assert level == messages.ERROR
    assert f"Session '{session.session_id}' is aborted" in text
    session.refresh_from_db()
    assert (session.abort_reason, session.aborted_by) == ("agent gave up", "")


def test_select_all_aborts_every_session_matching_the_filter(admin_client, driver):
    active = [driver.start() for _ in range(3)]
    completed = driver.start(workflow="quick")
    driver.finish(completed, {"notes.md": "notes.md"})

    response = apply(
        admin_client,
        SESSIONS,
        "abort_sessions",
        [active[0].pk],
        reason="clean up",
        query="?status__exact=active",
        across=True,
    )

    assert response.status_code == 302
    assert sent_messages(response) == [(messages.SUCCESS, "Aborted 3 sessions.")]
    assert [status(s) for s in active] == ["aborted"] * 3
    assert status(completed) == "completed"


def test_staff_without_the_permission_cannot_abort(client, driver):
    session = driver.start()
    client.force_login(
        make_user(username="watcher", perms=("workflows.view_workflowsession",), staff=True)
    )

    listing = client.get(SESSIONS)
    assert listing.status_code == 200
    assert "abort_sessions" not in offered_actions(listing)

    response = apply_without_page(client, SESSIONS, "abort_sessions", [session.pk], "because")
    assert response.status_code == 200
    assert not any(level == messages.SUCCESS for level, _ in sent_messages(response))
    assert status(session) == "active"


def test_staff_with_the_permission_aborts(client, driver):
    session = driver.start()
    user = make_user(
        username="operator",
        perms=("workflows.view_workflowsession", "workflows.abort_session"),
        staff=True,
    )
    client.force_login(user)

    response = apply(client, SESSIONS, "abort_sessions", [session.pk], reason="stuck")

    assert response.status_code == 302
    session.refresh_from_db()
    assert (session.status, session.aborted_by) == ("aborted", "operator")


def apply_without_page(client: Client, changelist: str, action: str, pks, reason: str):
    """Post the reason page's form directly, as someone who never got the page would."""
    return client.post(
        changelist,
        {
            "action": action,
            "_selected_action": list(pks),
            "select_across": "0",
            "apply": "yes",
            "reason": reason,
        },
    )


# Review rulings -----------------------------------------------------------------------------------


def test_override_from_the_step_runs_records_a_decision(admin_client, admin_user, failed_run):
    response = apply(
        admin_client, STEP_RUNS, "override_reviews", [failed_run.pk], reason="good enough"
    )

    assert response.status_code == 302
    assert sent_messages(response) == [(messages.SUCCESS, "Overrode the review of 1 step run.")]
    decision = HumanDecision.objects.get(step_run=failed_run)
    assert decision.kind == HumanDecision.Kind.OVERRIDE
    assert decision.decided_by == admin_user
    assert decision.decided_by_name == admin_user.username
    assert decision.reason == "good enough"
    assert decision.consumed_at is None
    event = Event.objects.filter(session=failed_run.session).latest("id")
    assert event.kind == Event.Kind.REVIEW_OVERRIDDEN
    assert event.payload == {
        "step_id": "wrap_up",
        "by": "admin",
        "via": "admin",
        "reason": "good enough",
    }


def test_request_changes_from_the_failed_reviews(admin_client, admin_user, driver, failed_run):
    driver.hand_in_failing(failed_run.session)
    failed = ReviewResult.objects.filter(step_run=failed_run, passed=False)
    assert failed.count() == 2

    response = apply(
        admin_client, REVIEWS, "request_changes", failed.values_list("pk", flat=True), "Cite"
    )

    # Two failed reviews of one step run make one ruling on that run.
    assert response.status_code == 302
    assert sent_messages(response) == [(messages.SUCCESS, "Requested changes on 1 step run.")]
    decision = HumanDecision.objects.get(step_run=failed_run)
    assert decision.kind == HumanDecision.Kind.REQUEST_CHANGES
    assert (decision.decided_by, decision.reason) == (admin_user, "Cite")
    event = Event.objects.filter(session=failed_run.session).latest("id")
    assert event.kind == Event.Kind.CHANGES_REQUESTED


def test_override_needs_a_reason(admin_client, failed_run):
    response = apply(
        admin_client,
        REVIEWS,
        "override_reviews",
        [ReviewResult.objects.filter(step_run=failed_run).latest("id").pk],
        reason="",
    )

    assert response.status_code == 200
    assert response.context["form"].errors == {"reason": ["This field is required."]}
    assert not HumanDecision.objects.exists()


def test_a_finished_step_run_cannot_be_overridden(admin_client, failed_run):
    gather = StepRun.objects.get(session=failed_run.session, step_id="gather")

    response = apply(
        admin_client, STEP_RUNS, "override_reviews", [gather.pk, failed_run.pk], reason="ok"
    )

    assert response.status_code == 302
    assert sent_messages(response) == [
        (
            messages.ERROR,
            f"{gather}: Step 'gather' of session '{failed_run.session.session_id}' is completed; "
            "only the current step can be overridden or sent back",
        ),
        (messages.SUCCESS, "Overrode the review of 1 step run."),
    ]
    assert list(HumanDecision.objects.values_list("step_run_id", flat=True)) == [failed_run.pk]


@pytest.mark.parametrize(
    ("changelist", "view_perm"),
    [(STEP_RUNS, "workflows.view_steprun"), (REVIEWS, "reviews.view_reviewresult")],
)
@pytest.mark.parametrize("action", ["override_reviews", "request_changes"])
def test_staff_without_the_permission_cannot_rule(
    client, failed_run, changelist, view_perm, action
):
    client.force_login(make_user(username="watcher", perms=(view_perm,), staff=True))
    review = ReviewResult.objects.filter(step_run=failed_run).latest("id")
    pk = failed_run.pk if changelist == STEP_RUNS else review.pk

    listing = client.get(changelist)
    assert listing.status_code == 200
    assert action not in offered_actions(listing)

    response = apply_without_page(client, changelist, action, [pk], "because")
    assert response.status_code == 200
    assert not any(level == messages.SUCCESS for level, _ in sent_messages(response))
    assert not HumanDecision.objects.exists()


def test_staff_with_the_permission_rules(client, failed_run):
    reviewer = make_user(
        username="reviewer",
        perms=("workflows.view_steprun", "reviews.decide_review"),
        staff=True,
    )
    client.force_login(reviewer)

    response = apply(client, STEP_RUNS, "request_changes", [failed_run.pk], reason="More detail")

    assert response.status_code == 302
    assert HumanDecision.objects.get().decided_by_name == "reviewer"
