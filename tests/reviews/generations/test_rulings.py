"""The same behaviour in both DeepWork generations where DeepWork does not differ: a person's
rulings (request changes, override, an overrule of work the gate sent back), a person's abort,
``go_to_step``, the self-review request, review pass caching and the quality-attempt count.

Each test runs once per generation and asserts the same events (kinds, in order) and the same
counts, except where DeepWork itself differs between the generations; each such place says
how, next to the assertion.
"""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async

from reviews.models import HumanDecision
from reviews.rulings import review_override, review_request_changes
from tests.reviews.generations.conftest import (
    DRAFT,
    attempts,
    current_run,
    session_kinds,
    the_session,
    verdicts,
)
from workflows import events
from workflows.models import Event
from workflows.services.sessions import session_abort

pytestmark = pytest.mark.django_db(transaction=True)

STARTED = ["session_started", "step_started"]
# A hand-in that passes its step: the step ends and the next begins.
ADVANCED = ["step_finished", "step_started"]


async def request_changes(person, feedback: str) -> None:
    run = await current_run()
    await sync_to_async(review_request_changes)(
        step_run=run, feedback=feedback, by=person, via="dashboard"
    )


async def override(person, reason: str) -> None:
    run = await current_run()
    await sync_to_async(review_override)(step_run=run, reason=reason, by=person, via="dashboard")


async def test_a_persons_requested_changes_are_delivered_once_and_use_no_attempt(driver, person):
    await driver.start()
    await request_changes(person, "Cite the 2024 paper.")

    answer = await driver.finish_ok(DRAFT, reason="the agent thinks it is fine")
    # The wire shapes differ (0.9 lists failed_reviews), the words do not.
    assert answer["status"] == "needs_work"
    assert answer["feedback"] == "Changes requested by rita: Cite the 2024 paper."
    assert await session_kinds() == [*STARTED, "changes_requested", "changes_delivered"]
    assert await verdicts() == [("draft", "human", 1, False)]
    assert await attempts() == [("draft", "active", 0)]
    assert not await HumanDecision.objects.filter(consumed_at__isnull=True).aexists()

    # Delivered once: the next hand-in is reviewed as usual.
    asked = await driver.finish_ok(DRAFT)
    assert asked["status"] == "needs_work"
    assert "Changes requested" not in asked["feedback"]
    assert (await session_kinds())[-1] == "review_requested"


async def test_requested_changes_survive_a_crash_while_they_are_recorded(
    driver, person, monkeypatch
):
    """Claiming the ruling and recording it commit together: a hand-in that dies while
    recording leaves the request pending for the next one, not consumed and unrecorded."""
    await driver.start()
    await request_changes(person, "Cite the 2024 paper.")
    record = events.event_record

    def crash_on_delivery(**kwargs):
        if kwargs["kind"] in (Event.Kind.CHANGES_DELIVERED, Event.Kind.REVIEW_FAILED):
            raise RuntimeError("the server died here")
        return record(**kwargs)

    monkeypatch.setattr(events, "event_record", crash_on_delivery)
    await driver.finish(DRAFT)
    monkeypatch.setattr(events, "event_record", record)

    assert await HumanDecision.objects.filter(consumed_at__isnull=True).acount() == 1
    assert await verdicts() == []
    answer = await driver.finish_ok(DRAFT)
    assert answer["feedback"] == "Changes requested by rita: Cite the 2024 paper."
    assert await session_kinds() == [*STARTED, "changes_requested", "changes_delivered"]
    assert await attempts() == [("draft", "active", 0)]


async def test_a_persons_rulings_reach_the_agent_on_a_server_without_reviews(
    ungated_driver, person
):
    """No reviews run, but a person's ruling is still the person's: requested changes send the
    work back once, and the next hand-in passes as it would have."""
    driver = ungated_driver
    await driver.start()
    await request_changes(person, "Cite the 2024 paper.")

    answer = await driver.finish_ok(DRAFT)
    assert answer["status"] == "needs_work"
    assert answer["feedback"] == "Changes requested by rita: Cite the 2024 paper."
    assert await attempts() == [("draft", "active", 0)]

    await override(person, "Good enough.")
    assert (await driver.finish_ok(DRAFT))["status"] == "next_step"
    assert await session_kinds() == [
        *STARTED,
        "changes_requested",
        "changes_delivered",
        "review_overridden",
        "override_delivered",
        *ADVANCED,
    ]
    assert await verdicts() == [("draft", "human", 1, False)]
    assert await attempts() == [("draft", "completed", 0), ("final", "active", 0)]


async def test_a_persons_override_passes_the_next_hand_in_without_reviews(driver, person):
    await driver.start()
    await override(person, "Good enough for a draft.")

    answer = await driver.finish_ok(DRAFT)
    assert answer["status"] == "next_step"
    assert await session_kinds() == [
        *STARTED,
        "review_overridden",
        "override_delivered",
        *ADVANCED,
    ]
    assert await verdicts() == []
    assert await attempts() == [("draft", "completed", 0), ("final", "active", 0)]


async def test_a_person_overrules_the_review_the_gate_asked_for(driver, person):
    await driver.start()
    asked = await driver.finish_ok(DRAFT)
    assert asked["status"] == "needs_work"
    await override(person, "I read it; it is fine.")

    answer = await driver.finish_ok(DRAFT)
    assert answer["status"] == "next_step"
    assert await session_kinds() == [
        *STARTED,
        "review_requested",
        "review_overridden",
        "override_delivered",
        *ADVANCED,
    ]
    if driver.generation == "0.9":
        # DeepWork 0.9 asks for one self-review and records nothing until the agent's verdict;
        # it counts no quality attempt for the request (there is no cap on self-review).
        assert await verdicts() == []
        assert await attempts() == [("draft", "completed", 0), ("final", "active", 0)]
    else:
        # DeepWork 0.14 hands out one task per review, stored as asked until passed, and counts
        # every needs_work as a quality attempt.
        assert await verdicts() == [("draft", "self", 1, False)]
        assert await attempts() == [("draft", "completed", 1), ("final", "active", 0)]


async def test_a_self_review_request_is_logged_as_a_request_then_the_review_passes(driver):
    await driver.start()
    asked = await driver.finish_ok(DRAFT)
    assert asked["status"] == "needs_work"
    assert await session_kinds() == [*STARTED, "review_requested"]

    await driver.run_asked_reviews(asked)
    answer = await driver.hand_in_reviewed(DRAFT)
    assert answer["status"] == "next_step"
    assert await session_kinds() == [*STARTED, "review_requested", "review_passed", *ADVANCED]
    # Nothing failed: no failed review round is counted against the agent.
    assert not await Event.objects.filter(kind=Event.Kind.REVIEW_FAILED).aexists()
    if driver.generation == "0.9":
        # 0.9: the request stores nothing and uses no attempt; the agent's reason is its
        # verdict, in the run's first round.
        assert await verdicts() == [("draft", "self", 1, True)]
        assert await attempts() == [("draft", "completed", 0), ("final", "active", 0)]
    else:
        # 0.14: the task is stored as asked (round 1) and its pass on the next hand-in
        # (round 2); the request was a needs_work, so one quality attempt.
        assert await verdicts() == [("draft", "self", 1, False), ("draft", "self", 2, True)]
        assert await attempts() == [("draft", "completed", 1), ("final", "active", 0)]


async def test_a_reason_passes_the_step_as_its_first_round(driver):
    await driver.start()
    answer = await driver.finish_ok(DRAFT, reason="Reviewed with the team")
    assert answer["status"] == "next_step"
    assert await session_kinds() == [*STARTED, "review_passed", *ADVANCED]
    assert await verdicts() == [("draft", "self", 1, True)]
    assert await attempts() == [("draft", "completed", 0), ("final", "active", 0)]
    (round_,) = [
        payload
        async for payload in Event.objects.filter(kind=Event.Kind.REVIEW_PASSED).values_list(
            "payload", flat=True
        )
    ]
    assert round_ == {
        "step_ids": ["draft"],
        "attempt": 1,
        "reviews": 0,
        "failed": 0,
        "override_reason": "Reviewed with the team",
    }


async def test_a_passed_review_is_not_asked_again(driver):
    """Within a run both generations stop asking once the review passed (the step advances).
    After ``go_to_step`` back to the step, unchanged work differs by generation."""
    await driver.start()
    asked = await driver.finish_ok(DRAFT)
    await driver.run_asked_reviews(asked)
    assert (await driver.hand_in_reviewed(DRAFT))["status"] == "next_step"
    before = await session_kinds()

    went = await driver.go_to_step("draft")
    assert went["begin_step"]["step_id"] == "draft"
    again = await driver.finish_ok(DRAFT)
    if driver.generation == "0.9":
        # DeepWork 0.9 keeps no passes: the self-review is asked for again.
        assert again["status"] == "needs_work"
        assert await session_kinds() == [*before, "step_reopened", "step_started"] + [
            "review_requested"
        ]
    else:
        # DeepWork 0.14 keys a pass by the reviewed content: unchanged, it is not asked again.
        assert again["status"] == "next_step"
        assert await session_kinds() == [*before, "step_reopened", "step_started", *ADVANCED]


async def test_go_to_step_invalidates_later_runs_and_starts_the_step_again(driver):
    await driver.start()
    assert (await driver.finish_ok(DRAFT, reason="fine"))["status"] == "next_step"

    went = await driver.go_to_step("draft")
    assert went["begin_step"]["step_id"] == "draft"
    assert await session_kinds() == [
        *STARTED,
        "review_passed",
        *ADVANCED,
        "step_reopened",
        "step_started",
    ]
    assert await attempts() == [
        ("draft", "invalidated", 0),
        ("final", "invalidated", 0),
        ("draft", "active", 0),
    ]
    # Rounds count per run: the new run's first verdict is round 1 again.
    assert (await driver.finish_ok(DRAFT, reason="fine again"))["status"] == "next_step"
    assert await verdicts() == [("draft", "self", 1, True), ("draft", "self", 1, True)]


async def test_a_persons_abort_is_told_to_the_agent_once(driver, person):
    await driver.start()
    session = await the_session()
    await sync_to_async(session_abort)(
        project=session.project,
        agent=session.agent,
        explanation="Wrong project",
        session_id=session.session_id,
        by=person,
    )
    assert await session_kinds() == [*STARTED, "session_aborted"]
    assert await attempts() == [("draft", "aborted", 0)]

    told = await driver.finish(DRAFT)
    # Each generation says it in its own words; both name who and why.
    assert isinstance(told, str)
    assert "rita" in told
    assert "Wrong project" in told
    # Told once: the next call finds no session, as it would have before.
    again = await driver.finish(DRAFT)
    assert "No active workflow session" in str(again)
    assert await session_kinds() == [*STARTED, "session_aborted"]
    assert await verdicts() == []
