"""Races found by attacking the server, each forced deterministically.

Issue 9 point 8: two processes finish the same step with an override reason. Both have read
the session and planned "passes on its reason" before either writes; exactly one advances, and
the loser leaves no passing verdict and no ``review_passed`` event behind — over MCP's service
path and over REST (where the loser must not be recorded as a person's verdict either).

The seam: ``review_plan`` is wrapped so that each contender waits on a barrier right after
planning, which is the interleaving that left the loser's verdict committed before the fix.
Real threads, the real database (SQLite, and PostgreSQL with ``DATABASE_URL``).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.db import connections
from django.test import Client

from accounts.services import api_token_create
from reviews import services as review_services
from reviews.gate import GateConfig
from reviews.models import ReviewResult
from reviews.services import step_finish_gated
from tests.support.driving import finished_step
from tests.support.factories import make_user
from tests.workflows.test_races import start_demo
from workflows.errors import Conflict, WorkflowError
from workflows.models import Event, StepRun, WorkflowSession

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.postgres]

CONTENDERS = 2
REASON = "Self-review passed: all criteria met"


def in_thread(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Run ``fn`` on a pool thread with its own connection, closed afterwards."""

    def wrapper(*args: Any) -> Any:
        try:
            return fn(*args)
        finally:
            connections.close_all()

    return wrapper


@pytest.fixture
def plan_together(monkeypatch) -> Callable[[], None]:
    """From the call on, every contender plans its hand-in before any of them records
    anything."""

    def arm() -> None:
        barrier = threading.Barrier(CONTENDERS)
        real_plan = review_services.review_plan

        def plan_then_wait(**kwargs: Any) -> review_services.ReviewPlan:
            plan = real_plan(**kwargs)
            barrier.wait(timeout=30)
            return plan

        monkeypatch.setattr(review_services, "review_plan", plan_then_wait)

    return arm


def at_wrap_up(project, agent, catalog) -> str:
    """A demo session at ``wrap_up``, the step with a review."""
    sid = start_demo(project, agent, catalog)
    gate = GateConfig()
    for outputs in ({"notes.md": "notes.md"}, {"a.md": "a.md", "b.md": "b.md"}):
        async_to_sync(step_finish_gated)(
            project=project, agent=agent, gate=gate, outputs=outputs, session_id=sid
        )
    assert WorkflowSession.objects.get(session_id=sid).current_step_id == "wrap_up"
    return sid


def assert_passed_once(sid: str) -> None:
    session = WorkflowSession.objects.get(session_id=sid)
    assert (session.status, session.revision) == ("completed", 3)
    run = StepRun.objects.get(session=session, step_id="wrap_up")
    assert run.status == "completed"
    # One verdict and one event: the winner's. Nothing of the loser's.
    assert list(ReviewResult.objects.values_list("step_run_id", "passed")) == [(run.pk, True)]
    passed = Event.objects.filter(session=session, kind=Event.Kind.REVIEW_PASSED)
    assert passed.count() == 1
    assert Event.objects.filter(session=session, kind=Event.Kind.STEP_FINISHED).count() == 4
    assert Event.objects.filter(session=session, kind=Event.Kind.SESSION_COMPLETED).count() == 1


def test_the_loser_of_an_override_race_leaves_no_verdict(project, agent, catalog, plan_together):
    sid = at_wrap_up(project, agent, catalog)
    plan_together()

    @in_thread
    def contender(_: int) -> Any:
        try:
            return async_to_sync(finished_step)(
                project=project,
                agent=agent,
                gate=GateConfig(),
                outputs={"summary.md": "summary.md"},
                override_reason=REASON,
                session_id=sid,
            )
        except WorkflowError as exc:
            return exc

    with ThreadPoolExecutor(CONTENDERS) as pool:
        results = list(pool.map(contender, range(CONTENDERS)))

    winners = [r for r in results if not isinstance(r, Exception)]
    losers = [r for r in results if isinstance(r, Exception)]
    assert [w.status for w in winners] == ["workflow_complete"]
    assert [type(loser) for loser in losers] == [Conflict], losers
    assert "nothing was changed" in str(losers[0])
    assert_passed_once(sid)
    verdict = ReviewResult.objects.get()
    assert (verdict.reviewer_kind, verdict.override_reason) == ("self", REASON)


def test_the_loser_of_an_override_race_over_rest_is_no_ones_verdict(
    project, agent, catalog, plan_together
):
    sid = at_wrap_up(project, agent, catalog)
    tokens = []
    for name in ("alice", "bob"):
        user = make_user(username=name, perms=("workflows.drive_session", "reviews.decide_review"))
        tokens.append(api_token_create(user=user, name="race")[1])
    plan_together()

    @in_thread
    def contender(token: str) -> tuple[int, dict]:
        response = Client().post(
            f"/api/sessions/{sid}/finish",
            json.dumps({"outputs": {"summary.md": "summary.md"}, "override_reason": REASON}),
            content_type="application/json",
            headers={"Authorization": f"Bearer {token}"},
        )
        return response.status_code, response.json()

    with ThreadPoolExecutor(CONTENDERS) as pool:
        results = list(pool.map(contender, tokens))

    statuses = sorted(status for status, _ in results)
    assert statuses == [200, 409], results
    (winner_body,) = [body for status, body in results if status == 200]
    assert winner_body["status"] == "workflow_complete"
    (loser_body,) = [body for status, body in results if status == 409]
    assert "nothing was changed" in loser_body["error"]["message"]
    assert_passed_once(sid)
    # The verdict is the winner's, as a person's; the loser is recorded nowhere.
    verdict = ReviewResult.objects.get()
    assert verdict.reviewer_kind == "human"
    event = Event.objects.get(kind=Event.Kind.REVIEW_PASSED)
    assert event.payload == {
        "step_ids": ["wrap_up"],
        "attempt": 1,
        "reviews": 0,
        "failed": 0,
        "override_reason": REASON,
        "by": verdict.reviewer,
    }
    finished_by = set(
        Event.objects.filter(session__session_id=sid, kind=Event.Kind.STEP_FINISHED)
        .exclude(payload__by=None)
        .values_list("payload__by", flat=True)
    )
    assert finished_by == {verdict.reviewer}
