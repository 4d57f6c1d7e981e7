"""``finished_step`` for DeepWork 0.14 sessions: decisions, checks, review tasks, advance.

In order: a person's pending ruling on the step (request changes: ``needs_work`` with their
feedback; override: the reviews are skipped), the agent's ``quality_review_override_reason``
(skips them too), the ``json_schema`` checks, then 0.14's review tasks (``reviews.gate014``).
Every outcome is stored as a ``ReviewResult`` of the step run, with who and why: each review
task the agent is asked to run (failed until passed, ``run_each`` = its review id), each task
later found marked as passed, a schema failure, an override. A hand-in that loses the race to
advance keeps none of its passing verdicts (they are written in the advancing transaction).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from django.db import transaction
from django.db.models import F

from reviews import gate014, rulings
from reviews.deepreview.precompute import NO_COMMANDS, CommandPolicy
from reviews.models import HumanDecision, ReviewResult, copied_from
from workflows import events
from workflows.models import Event, StepRun
from workflows.services import sessions014
from workflows.services.sessions014 import Advanced014, Checkpoint014, Completed014

SCHEMA_RUN_EACH = "json_schema"
PASSED_FEEDBACK = "Marked as passed with mark_review_as_passed."


@dataclass(frozen=True)
class NeedsWork014:
    feedback: str
    stack: sessions014.Stack


Finish014 = Advanced014 | Completed014 | NeedsWork014


def _run(checkpoint: Checkpoint014) -> StepRun:
    return StepRun.objects.get(
        session=checkpoint.session, step_id=checkpoint.step.key, status=StepRun.Status.ACTIVE
    )


def _stack(checkpoint: Checkpoint014) -> sessions014.Stack:
    return sessions014.conversation_stack(
        project=checkpoint.project,
        conversation_id=checkpoint.conversation_id,
        agent_id=checkpoint.agent_id,
    )


def _reviewer(checkpoint: Checkpoint014) -> str:
    return checkpoint.session.agent.agent_id


def _event(checkpoint: Checkpoint014, kind: str, payload: events.Payload) -> None:
    events.event_record(
        kind=kind,
        project=checkpoint.project,
        session=checkpoint.session,
        agent=checkpoint.session.agent,
        payload=payload,
    )


def _round(
    checkpoint: Checkpoint014, attempt: int, reviews: int, failed: int, reason: str | None
) -> events.ReviewRound:
    return events.ReviewRound(
        step_ids=[checkpoint.step.key],
        attempt=attempt,
        reviews=reviews,
        failed=failed,
        override_reason=reason,
    )


def _needs_work(
    checkpoint: Checkpoint014,
    run: StepRun,
    results: list[ReviewResult],
    feedback: str,
    *,
    requested: str | None = None,
    also: Callable[[int], None] = lambda round_: None,
) -> NeedsWork014:
    """Send the hand-in back with ``results`` as its round's verdicts, counting a quality
    attempt as DeepWork 0.14 does for every ``needs_work``. ``requested`` names the review
    instructions when the agent is asked to run its reviews (a request, not a failed round);
    ``also`` records, in the same transaction and round, what the hand-in did pass."""
    with transaction.atomic():
        round_ = rulings.next_rounds([run.pk])[run.pk]
        also(round_)
        StepRun.objects.filter(pk=run.pk).update(quality_attempts=F("quality_attempts") + 1)
        for result in results:
            result.attempt = round_
        ReviewResult.objects.bulk_create(results)
        if requested is not None:
            request = events.ReviewRequested(instructions=requested)
            _event(checkpoint, Event.Kind.REVIEW_REQUESTED, request)
        else:
            _event(
                checkpoint,
                Event.Kind.REVIEW_FAILED,
                _round(checkpoint, round_, len(results), len(results), None),
            )
    return NeedsWork014(feedback=feedback, stack=_stack(checkpoint))


def _failed(
    checkpoint: Checkpoint014, run: StepRun, run_each: str, target: str, feedback: str
) -> ReviewResult:
    return ReviewResult(
        step_run=run,
        session=checkpoint.session,
        **copied_from(checkpoint.session),
        step_id=run.step_id,
        attempt=0,
        run_each=run_each[:255],
        target_file=target[:1024] or None,
        passed=False,
        feedback=feedback,
        reviewer_kind=ReviewResult.Reviewer.SELF,
        reviewer=_reviewer(checkpoint),
    )


def _advance(checkpoint: Checkpoint014, record: Callable[[], None]) -> Finish014:
    return sessions014.step014_advance(checkpoint=checkpoint, on_claimed=record)


def step014_finish(
    *,
    checkpoint: Checkpoint014,
    override_reason: str | None,
    reviews_enabled: bool = True,
    honour_091_ids: bool = False,
    commands: CommandPolicy = NO_COMMANDS,
) -> Finish014:
    """Judge the validated hand-in and advance it, or answer ``needs_work``.

    ``commands``: whether the project rules' precompute commands may run (the server decides).

    ``honour_091_ids``: passes marked under the ids 0.9.1's review tools give the project's
    rules count too (``gate014.review_tasks``), for a server serving both generations.
    """
    run = _run(checkpoint)
    pending = rulings.pending_decisions([run.pk])
    project, session, agent = checkpoint.project, checkpoint.session, checkpoint.session.agent

    changes = pending.get(HumanDecision.Kind.REQUEST_CHANGES)
    if changes is not None:
        feedback = rulings.changes_deliver(
            decision=changes, project=project, session=session, agent=agent
        )
        if feedback is not None:
            return NeedsWork014(feedback=feedback, stack=_stack(checkpoint))

    override = pending.get(HumanDecision.Kind.OVERRIDE)
    if override is not None:
        return _advance(
            checkpoint,
            lambda: rulings.override_deliver(
                decision=override, project=project, session=session, agent=agent
            ),
        )

    if override_reason:

        def record_override() -> None:
            round_ = rulings.next_rounds([run.pk])[run.pk]
            ReviewResult.objects.create(
                step_run=run,
                session=checkpoint.session,
                **copied_from(checkpoint.session),
                step_id=run.step_id,
                attempt=round_,
                run_each="step",
                passed=True,
                feedback=override_reason,
                reviewer_kind=ReviewResult.Reviewer.SELF,
                reviewer=_reviewer(checkpoint),
                override_reason=override_reason,
            )
            _event(
                checkpoint,
                Event.Kind.REVIEW_PASSED,
                _round(checkpoint, round_, 0, 0, override_reason),
            )

        return _advance(checkpoint, record_override)

    schema_failure = gate014.schema_feedback(checkpoint=checkpoint)
    if schema_failure is not None:
        return _needs_work(
            checkpoint,
            run,
            [_failed(checkpoint, run, SCHEMA_RUN_EACH, "", schema_failure)],
            schema_failure,
        )
    if not reviews_enabled:
        return _advance(checkpoint, lambda: None)

    outstanding, passed = gate014.review_tasks(
        checkpoint=checkpoint, honour_091_ids=honour_091_ids, commands=commands
    )
    asked = set(
        ReviewResult.objects.filter(step_run=run, passed=False).values_list("run_each", flat=True)
    )
    already = set(
        ReviewResult.objects.filter(step_run=run, passed=True).values_list("run_each", flat=True)
    )
    newly_passed = [task for task in passed if task.review_id in asked - already]

    def record_passes(round_: int) -> None:
        ReviewResult.objects.bulk_create(
            ReviewResult(
                step_run=run,
                session=checkpoint.session,
                **copied_from(checkpoint.session),
                step_id=run.step_id,
                attempt=round_,
                run_each=task.review_id[:255],
                target_file=task.scope[:1024] or None,
                passed=True,
                feedback=PASSED_FEEDBACK,
                reviewer_kind=ReviewResult.Reviewer.SELF,
                reviewer=_reviewer(checkpoint),
            )
            for task in newly_passed
        )
        if newly_passed:
            _event(
                checkpoint,
                Event.Kind.REVIEW_PASSED,
                _round(checkpoint, round_, len(newly_passed), 0, None),
            )

    if not outstanding:
        if not newly_passed:
            return _advance(checkpoint, lambda: None)
        return _advance(checkpoint, lambda: record_passes(rulings.next_rounds([run.pk])[run.pk]))
    feedback = gate014.gate_feedback(outstanding)
    instructions = [f"{gate014.INSTRUCTIONS_DIR}/{task.review_id}.md" for task in outstanding]
    return _needs_work(
        checkpoint,
        run,
        [
            _failed(
                checkpoint,
                run,
                task.review_id,
                task.scope,
                f"{task.description}: to be run by a {task.agent} sub-agent with {path}",
            )
            for task, path in zip(outstanding, instructions, strict=True)
        ],
        feedback,
        requested=", ".join(instructions),
        also=record_passes,
    )
