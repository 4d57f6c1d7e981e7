"""Issue 9 point 7, the accounting: a reviewer that could not run judged nothing.

It uses up no quality attempt and records no verdict, and the agent is told the reviewer could
not run and why. The reviewer here is a stand-in at the reviewer interface (``review``), so the
test does not depend on which real failures the reviewers classify as "could not run".
"""

from __future__ import annotations

from pathlib import Path

import pytest

from reviews.gate import GateConfig, ReviewerCouldNotRun, Verdict
from reviews.models import ReviewResult
from reviews.services import GateFailed
from tests.reviews.test_gate import CONCURRENT_JOB, GATE_JOB, start_session
from tests.support.driving import finished_step
from tests.support.factories import write_job
from workflows.models import Event, StepRun

pytestmark = pytest.mark.django_db(transaction=True)


class StandInReviewer:
    """Answers from a script: an exception to raise or a verdict to give, in order."""

    name = "stand-in"

    def __init__(self, *answers: Verdict | Exception) -> None:
        self.answers = list(answers)

    async def review(self, **_: object) -> Verdict:
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer


@pytest.fixture
def gated(project_dir: Path, db):
    write_job(project_dir, "gated", GATE_JOB, ["draft", "pages", "final"])
    (project_dir / "draft.md").write_text("DRAFT BODY\n")
    return start_session(project_dir, "gated")


async def hand_in(gated, reviewer: StandInReviewer, max_attempts: int = 2):
    project, agent = gated
    return await finished_step(
        project=project,
        agent=agent,
        gate=GateConfig(reviewer=reviewer, max_attempts=max_attempts),  # type: ignore[arg-type]
        outputs={"draft.md": "draft.md"},
    )


async def test_a_reviewer_that_could_not_run_uses_no_attempt_and_records_no_verdict(gated):
    cannot = ReviewerCouldNotRun("Reviewer command could not be started: Argument list too long")
    reviewer = StandInReviewer(
        cannot,
        cannot,
        cannot,
        Verdict(passed=False, feedback="Too short"),
        Verdict(passed=True, feedback="Good"),
    )

    for _ in range(3):  # more than max_attempts: none of them counts
        with pytest.raises(GateFailed) as excinfo:
            await hand_in(gated, reviewer)
        assert str(excinfo.value) == (
            "The reviewer could not run, so the work was not reviewed and no attempt was used: "
            "Reviewer command could not be started: Argument list too long"
        )
        run = await StepRun.objects.aget(step_id="draft")
        assert (run.status, run.quality_attempts) == ("active", 0)
    assert not await ReviewResult.objects.aexists()
    assert not await Event.objects.filter(
        kind__in=[Event.Kind.REVIEW_FAILED, Event.Kind.REVIEW_PASSED]
    ).aexists()

    # The first review that runs is attempt 1, and a failure is still needs_work, not
    # "failed after 2 attempts".
    failed = await hand_in(gated, reviewer)
    assert (failed.status, failed.feedback) == ("needs_work", "Too short")
    assert [r async for r in ReviewResult.objects.values_list("attempt", "passed")] == [(1, False)]
    passed = await hand_in(gated, reviewer)
    assert passed.status == "next_step"
    assert [
        r async for r in ReviewResult.objects.order_by("id").values_list("attempt", "passed")
    ] == [(1, False), (2, True)]
    assert await review_rounds() == [
        (
            "review_failed",
            {**ROUND, "step_ids": ["draft"], "attempt": 1, "reviews": 1, "failed": 1},
        ),
        ("review_passed", {**ROUND, "step_ids": ["draft"], "attempt": 2, "reviews": 1}),
    ]


ROUND = {"step_ids": [], "attempt": 0, "reviews": 0, "failed": 0, "override_reason": None}


async def review_rounds() -> list[tuple[str, dict]]:
    """Every review_passed and review_failed event, oldest first: each has all five keys."""
    rounds = [
        (kind, payload)
        async for kind, payload in Event.objects.filter(
            kind__in=[Event.Kind.REVIEW_FAILED, Event.Kind.REVIEW_PASSED]
        )
        .order_by("id")
        .values_list("kind", "payload")
    ]
    for _, payload in rounds:
        assert set(payload) == set(ROUND)
    return rounds


@pytest.fixture
def pair(project_dir: Path, db):
    write_job(project_dir, "pair", CONCURRENT_JOB, ["left", "right"])
    (project_dir / "left.md").write_text("LEFT\n")
    (project_dir / "right.md").write_text("RIGHT\n")
    return start_session(project_dir, "pair")


async def test_a_concurrent_entry_is_one_review_round_per_hand_in(pair):
    """Reviewed or passed by a reason, a hand-in of two steps is one event naming both, in the
    workflow's order; the reason's verdict rows stay one per step."""
    project, agent = pair
    both = {"left.md": "left.md", "right.md": "right.md"}
    reviewer = StandInReviewer(
        Verdict(passed=True, feedback="Good"), Verdict(passed=False, feedback="Thin")
    )
    gate = GateConfig(reviewer=reviewer, max_attempts=3)  # type: ignore[arg-type]

    failed = await finished_step(project=project, agent=agent, gate=gate, outputs=both)
    assert failed.status == "needs_work"
    done = await finished_step(
        project=project, agent=agent, gate=gate, outputs=both, override_reason="Fixed by hand"
    )
    assert done.status == "workflow_complete"

    steps = ["left", "right"]
    assert await review_rounds() == [
        ("review_failed", {**ROUND, "step_ids": steps, "attempt": 1, "reviews": 2, "failed": 1}),
        # The reason is the entry's second round (numbered like any verdict), though it used no
        # quality attempt.
        (
            "review_passed",
            {**ROUND, "step_ids": steps, "attempt": 2, "override_reason": "Fixed by hand"},
        ),
    ]
    overrides = [
        row
        async for row in ReviewResult.objects.filter(override_reason__isnull=False)
        .order_by("step_run__step_id")
        .values_list("step_run__step_id", "attempt", "passed")
    ]
    assert overrides == [("left", 2, True), ("right", 2, True)]
