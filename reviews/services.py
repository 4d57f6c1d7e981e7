"""The quality gate over the database: plan the reviews, run them, record verdicts, decide.

One pipeline for every generation, in this order: a person's pending ruling (request changes
sends the work back, override passes it; ``reviews.rulings``), the hand-in's override reason,
the output checks, the review plan, the reviews, then the advance with a compare-and-set.
Who plans the reviews is the generation's (``Generation.reviews_by_agent``):

- the server's gate (``step_finish_gated``): self-review or external reviewers, run
  concurrently *outside any transaction*, verdicts recorded with the advance, so that an abort
  or a second ``finished_step`` while the reviews ran wins cleanly;
- review tasks the agent runs (``step_finish_by_tasks``): each task the agent is asked to run
  is stored as failed until passed (``run_each`` = its review id), each task later found
  marked as passed, a schema failure, an override, all with who and why. A hand-in that loses
  the race to advance keeps none of its passing verdicts (they are written in the advancing
  transaction).

Why long, and temporary: the two review planners still sit side by side here, each with its
own recording helpers; once the rulings, override and advance steps are walked once for both,
only the planners differ and the module shrinks below 600 lines.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from reviews import review_tasks, rulings
from reviews.deepreview.precompute import NO_COMMANDS, CommandPolicy
from reviews.gate import (
    ClaudeReviewer,
    CommandReviewer,
    ReviewerCouldNotRun,
    ReviewerError,
    ReviewTask,
    Verdict,
    build_payload,
    expand_tasks,
    review_timeout,
    self_review_instructions,
    system_prompt,
)
from reviews.models import HumanDecision, ReviewResult, copied_from
from workflows import events, limits
from workflows.db import db_sync_to_async
from workflows.errors import Conflict, InvalidInput, WorkflowError
from workflows.events import User
from workflows.files import project_write_text
from workflows.generations import v0_14
from workflows.models import Agent, Event, Project, StepRun
from workflows.results import FailedReview, FinishOutcome, NeedsWork, SelfReviewRequired, Stack
from workflows.selectors import stack_for_agent
from workflows.services import step_changes
from workflows.services.sessions import StepCheckpoint, step_advance, step_checkpoint

logger = logging.getLogger(__name__)

Progress = Callable[[float, float, str], Awaitable[None]]

# How long one review may take, in seconds, unless the server is told otherwise
# (``mcpserve --quality-gate-timeout``, ``create_server(quality_gate_timeout=...)``).
REVIEW_TIMEOUT_SECONDS = 240


class GateFailed(WorkflowError):
    """The reviews failed ``max_attempts`` times, or the reviewer itself broke."""


@dataclass(frozen=True)
class GateConfig:
    """How a server reviews: ``reviewer`` None means the agent reviews itself."""

    reviewer: ClaudeReviewer | CommandReviewer | None = None
    timeout: int = REVIEW_TIMEOUT_SECONDS
    max_attempts: int = 3
    concurrency: int = 4

    @property
    def max_inline_files(self) -> int:
        return 0 if self.reviewer is None else 5


@dataclass
class ReviewPlan:
    """What the gate decided before running anything."""

    answer: NeedsWork | SelfReviewRequired | None = None  # sent back without running reviews
    passes: bool = False  # passes without running reviews
    tasks: list[ReviewTask] = field(default_factory=list)
    attempt: int = 0  # the quality attempt the reviews use up (the cap counts these)
    run_ids: dict[str, int] = field(default_factory=dict)  # step_id -> StepRun pk
    override_decision: HumanDecision | None = None  # a human override to mark consumed on success
    override_reason: str | None = None  # the hand-in's reason for skipping the reviews
    # The files the entry's steps changed, looked at before the reviews (the reviewer's list).
    files: step_changes.ReviewedFiles | None = None


def _active_runs(checkpoint: StepCheckpoint) -> dict[str, int]:
    return dict(
        StepRun.objects.filter(
            session=checkpoint.session,
            status=StepRun.Status.ACTIVE,
            step_id__in=[step.step_id for step in checkpoint.steps],
        ).values_list("step_id", "pk")
    )


def _event(
    checkpoint: StepCheckpoint, kind: str, payload: events.Payload, by: User | None = None
) -> None:
    events.event_record(
        kind=kind,
        project=checkpoint.project,
        session=checkpoint.session,
        agent=checkpoint.agent,
        by=by,
        payload=payload,
    )


def _step_ids(checkpoint: StepCheckpoint) -> list[str]:
    """The entry's steps in the workflow's order, as a review round's event names them."""
    return [step.step_id for step in checkpoint.steps]


def _first_round(checkpoint: StepCheckpoint, plan: ReviewPlan, rounds: dict[int, int]) -> int:
    """The round a hand-in's event names: its first step's (an entry's steps are judged
    together, so they are at the same round unless a person ruled on one of them alone)."""
    return rounds[plan.run_ids[checkpoint.steps[0].step_id]]


def _inputs_by_step(checkpoint: StepCheckpoint) -> dict[str, tuple[tuple[str, str], ...]]:
    """Each step's file inputs, resolved to the paths its producing step handed in."""
    produced: dict[str, dict[str, str | list[str]]] = {}
    for step_id, outputs in (
        StepRun.objects.filter(session=checkpoint.session, status=StepRun.Status.COMPLETED)
        .order_by("id")
        .values_list("step_id", "outputs")
    ):
        produced[step_id] = outputs
    resolved = {}
    for step in checkpoint.steps:
        files: list[tuple[str, str]] = []
        for item in step.inputs:
            if "from_step" not in item:
                continue
            value = produced.get(item["from_step"], {}).get(item["file"])
            for path in value if isinstance(value, list) else [value] if value else []:
                files.append((f"{item['file']} from {item['from_step']}", path))
        resolved[step.step_id] = tuple(files)
    return resolved


def review_plan(
    *, checkpoint: StepCheckpoint, gate: GateConfig, override_reason: str | None
) -> ReviewPlan:
    """Decide what the gate does with this hand-in, recording any verdict it already implies."""
    run_ids = _active_runs(checkpoint)
    plan = ReviewPlan(run_ids=run_ids)
    first_run = next(iter(run_ids.values()), None)

    pending = rulings.pending_decisions(run_ids.values())
    changes = pending.get(HumanDecision.Kind.REQUEST_CHANGES)
    if changes is not None:
        feedback = rulings.changes_deliver(
            decision=changes,
            project=checkpoint.project,
            session=checkpoint.session,
            agent=checkpoint.agent,
        )
        if feedback is not None:
            plan.answer = NeedsWork(
                failed=(FailedReview(run_each="step", feedback=feedback),),
                stack=stack_for_agent(agent=checkpoint.agent),
            )
            return plan

    override = pending.get(HumanDecision.Kind.OVERRIDE)
    if override is not None:
        plan.passes = True
        plan.override_decision = override
        return plan

    reviews = [review for step in checkpoint.steps for review in step.reviews]
    if not reviews:
        plan.passes = True
        return plan

    if override_reason:
        # Recorded by the advance, in its transaction: a hand-in that loses the race to another
        # leaves no verdict behind (see ``_record_override_reason``).
        plan.passes = True
        plan.override_reason = override_reason
        return plan

    steps = [
        {"step_id": s.step_id, "outputs": s.outputs, "reviews": s.reviews} for s in checkpoint.steps
    ]
    inputs = _inputs_by_step(checkpoint)
    tasks = expand_tasks(steps=steps, submitted=checkpoint.outputs, inputs_by_step=inputs)
    if not tasks:
        # Every review targets an optional output that was not handed in.
        plan.passes = True
        return plan
    # Reviews take seconds anyway and the reviewer is given the list: compare now.
    plan.files = step_changes.changes_for_review(
        session=checkpoint.session, run_pks=run_ids, root=checkpoint.project_root
    )
    if plan.files is not None:
        tasks = expand_tasks(
            steps=steps,
            submitted=checkpoint.outputs,
            inputs_by_step=inputs,
            files_by_step=plan.files.by_step,
        )

    if gate.reviewer is None:
        session_id = checkpoint.session.session_id
        relative = f".deepwork/tmp/quality_review_{session_id}_{checkpoint.steps[0].step_id}.md"
        try:
            # Never through a link or pipe an agent planted at that name (workflows.files).
            project_write_text(
                root=checkpoint.project_root,
                relative=relative,
                text=self_review_instructions(
                    tasks=tasks, project_root=checkpoint.project_root, notes=checkpoint.notes
                ),
            )
        except OSError as exc:
            raise InvalidInput(
                "The self-review instructions could not be written to "
                f"{relative}: {exc.strerror or exc}"
            ) from None
        _event(
            checkpoint, Event.Kind.REVIEW_REQUESTED, events.ReviewRequested(instructions=relative)
        )
        plan.answer = SelfReviewRequired(
            instructions_path=relative, stack=stack_for_agent(agent=checkpoint.agent)
        )
        return plan

    # Counted before the reviews run, so a reviewer that crashes still uses up an attempt.
    StepRun.objects.filter(pk__in=run_ids.values()).update(
        quality_attempts=F("quality_attempts") + 1
    )
    # Every step of the checkpoint has an active run, so there is a first one.
    assert first_run is not None
    plan.attempt = StepRun.objects.get(pk=first_run).quality_attempts
    plan.tasks = tasks
    return plan


async def run_reviews(
    *,
    checkpoint: StepCheckpoint,
    gate: GateConfig,
    tasks: list[ReviewTask],
    progress: Progress | None = None,
) -> list[Verdict | ReviewerError]:
    """Run independent reviews concurrently (at most ``gate.concurrency`` at once)."""
    reviewer = gate.reviewer
    assert reviewer is not None
    limit = asyncio.Semaphore(gate.concurrency)
    done = 0

    async def one(task: ReviewTask) -> Verdict | ReviewerError:
        nonlocal done
        async with limit:
            verdict: Verdict | ReviewerError
            try:
                verdict = await reviewer.review(
                    system=system_prompt(task, checkpoint.notes),
                    payload=build_payload(
                        task=task,
                        project_root=checkpoint.project_root,
                        max_inline_files=gate.max_inline_files,
                        notes=checkpoint.notes,
                        include_notes=True,
                    ),
                    timeout_seconds=review_timeout(gate.timeout, task),
                    cwd=checkpoint.project_root,
                )
            except ReviewerError as exc:
                verdict = exc
        done += 1
        if progress is not None:
            target = task.target_file or task.run_each
            await progress(done, len(tasks), f"Reviewed {task.step_id} ({target})")
        return verdict

    if progress is not None:
        await progress(0, len(tasks), f"Running {len(tasks)} review(s)")
    return list(await asyncio.gather(*(one(task) for task in tasks)))


def _not_run(results: list[Verdict | ReviewerError]) -> ReviewerCouldNotRun | None:
    return next((r for r in results if isinstance(r, ReviewerCouldNotRun)), None)


def review_conclude(
    *,
    checkpoint: StepCheckpoint,
    gate: GateConfig,
    plan: ReviewPlan,
    results: list[Verdict | ReviewerError],
) -> FinishOutcome:
    """Record every verdict, then advance, send the work back or fail the gate.

    A reviewer that could not run judged nothing: its hand-in gets its attempt back and no
    verdict is recorded. Passing verdicts commit with the advance, or not at all.
    """
    assert gate.reviewer is not None
    reviewer = gate.reviewer
    not_run = _not_run(results)
    if not_run is not None:
        # Counted when the reviews started (so a crash mid-review still counts); give it back.
        StepRun.objects.filter(pk__in=plan.run_ids.values(), quality_attempts__gt=0).update(
            quality_attempts=F("quality_attempts") - 1
        )
        raise GateFailed(
            f"The reviewer could not run, so the work was not reviewed and no attempt was "
            f"used: {not_run}"
        )

    broken = [r for r in results if isinstance(r, ReviewerError)]
    failed = [
        (task, r)
        for task, r in zip(plan.tasks, results, strict=True)
        if not isinstance(r, ReviewerError) and not r.passed
    ]
    passed = not broken and not failed

    def record() -> None:
        rounds = rulings.next_rounds(plan.run_ids.values())
        for task, result in zip(plan.tasks, results, strict=True):
            verdict = None if isinstance(result, ReviewerError) else result
            ReviewResult.objects.create(
                step_run_id=plan.run_ids[task.step_id],
                session=checkpoint.session,
                **copied_from(checkpoint.session),
                step_id=task.step_id,
                attempt=rounds[plan.run_ids[task.step_id]],
                run_each=task.run_each,
                target_file=task.target_file,
                passed=False if verdict is None else verdict.passed,
                feedback=str(result) if verdict is None else verdict.feedback,
                criteria_results=[] if verdict is None else verdict.criteria_results,
                reviewer_kind=ReviewResult.Reviewer.EXTERNAL,
                reviewer=reviewer.name,
                error=str(result) if verdict is None else None,
                duration_ms=None if verdict is None else verdict.duration_ms,
            )
        round_ = events.ReviewRound(
            step_ids=_step_ids(checkpoint),
            attempt=_first_round(checkpoint, plan, rounds),
            reviews=len(plan.tasks),
            failed=len(failed),
            override_reason=None,
        )
        if passed:
            _event(checkpoint, Event.Kind.REVIEW_PASSED, round_, by=checkpoint.by)
            # Attempts are counted per step run and start again once the step passes.
            StepRun.objects.filter(pk__in=plan.run_ids.values()).update(quality_attempts=0)
            if plan.files is not None:
                step_changes.record_reviewed(session=checkpoint.session, files=plan.files)
        else:
            _event(checkpoint, Event.Kind.REVIEW_FAILED, round_, by=checkpoint.by)

    if passed:
        return step_advance(checkpoint=checkpoint, on_claimed=record)

    with transaction.atomic():
        record()
    if broken:
        raise GateFailed(str(broken[0]))
    failed_reviews = tuple(
        FailedReview(
            run_each=task.run_each,
            target_file=task.target_file,
            feedback=verdict.feedback,
            criteria_results=tuple(verdict.criteria_results),
        )
        for task, verdict in failed
    )
    if plan.attempt >= gate.max_attempts:
        feedback = "; ".join(review.feedback for review in failed_reviews)
        raise GateFailed(
            f"Quality gate failed after {gate.max_attempts} attempts. Feedback: {feedback}"
        )
    return NeedsWork(failed=failed_reviews, stack=stack_for_agent(agent=checkpoint.agent))


def _record_override_reason(checkpoint: StepCheckpoint, plan: ReviewPlan) -> None:
    """The hand-in's reason as each step's passing verdict, and one event for the hand-in.
    Over the REST API a person hands in with it: the verdict is theirs, not the agent's
    self-review."""
    assert plan.override_reason is not None
    person = checkpoint.by.get_username() if checkpoint.by is not None else ""
    step_ids = _step_ids(checkpoint)
    rounds = rulings.next_rounds(plan.run_ids.values())
    ReviewResult.objects.bulk_create(
        ReviewResult(
            step_run_id=plan.run_ids[step_id],
            session=checkpoint.session,
            **copied_from(checkpoint.session),
            step_id=step_id,
            attempt=rounds[plan.run_ids[step_id]],
            run_each="step",
            passed=True,
            feedback=plan.override_reason,
            reviewer_kind=ReviewResult.Reviewer.HUMAN if person else ReviewResult.Reviewer.SELF,
            reviewer=person or checkpoint.agent.agent_id,
            override_reason=plan.override_reason,
        )
        for step_id in step_ids
    )
    _event(
        checkpoint,
        Event.Kind.REVIEW_PASSED,
        events.ReviewRound(
            step_ids=step_ids,
            # No review ran, so no quality attempt was counted; the reason is a round.
            attempt=_first_round(checkpoint, plan, rounds),
            reviews=0,
            failed=0,
            override_reason=plan.override_reason,
        ),
        by=checkpoint.by,
    )


def _advance_after_pass(*, checkpoint: StepCheckpoint, plan: ReviewPlan) -> FinishOutcome:
    """Advance, recording in the same transaction what let the hand-in pass: if another call
    moved the session first, neither the verdict nor the override's delivery is kept."""

    def record() -> None:
        if plan.override_reason is not None:
            _record_override_reason(checkpoint, plan)
        if plan.override_decision is not None:
            rulings.override_deliver(
                decision=plan.override_decision,
                project=checkpoint.project,
                session=checkpoint.session,
                agent=checkpoint.agent,
            )

    return step_advance(checkpoint=checkpoint, on_claimed=record)


def _finish_until_reviews(
    *,
    project: Project,
    agent: Agent,
    gate: GateConfig | None,
    outputs: dict[str, str | list[str]],
    notes: str | None,
    override_reason: str | None,
    session_id: str | None,
    by: User | None = None,
) -> tuple[FinishOutcome | None, StepCheckpoint, ReviewPlan | None]:
    """Everything before the reviews run, in one trip to the database thread: validate, plan,
    and, when no review has to run, advance straight away."""
    limits.OVERRIDE_REASON.check("override_reason", override_reason)
    checkpoint = step_checkpoint(
        project=project,
        agent=agent,
        outputs=outputs,
        notes=notes,
        session_id=session_id,
        by=by,
    )
    if gate is None:
        return step_advance(checkpoint=checkpoint), checkpoint, None
    plan = review_plan(checkpoint=checkpoint, gate=gate, override_reason=override_reason)
    if plan.answer is not None:
        return plan.answer, checkpoint, plan
    if plan.passes:
        return _advance_after_pass(checkpoint=checkpoint, plan=plan), checkpoint, plan
    return None, checkpoint, plan


async def step_finish_gated(
    *,
    project: Project,
    agent: Agent,
    gate: GateConfig | None,
    outputs: dict[str, str | list[str]],
    notes: str | None = None,
    override_reason: str | None = None,
    session_id: str | None = None,
    progress: Progress | None = None,
    by: User | None = None,
) -> FinishOutcome:
    """``finished_step`` end to end, with the quality gate when ``gate`` is set."""
    answer, checkpoint, plan = await db_sync_to_async(_finish_until_reviews)(
        project=project,
        agent=agent,
        gate=gate,
        outputs=outputs,
        notes=notes,
        override_reason=override_reason,
        session_id=session_id,
        by=by,
    )
    if answer is not None:
        return answer
    # Without a gate, or with a plan that settled the hand-in, there is always an answer.
    assert gate is not None
    assert plan is not None
    results = await run_reviews(
        checkpoint=checkpoint, gate=gate, tasks=plan.tasks, progress=progress
    )
    return await db_sync_to_async(review_conclude)(
        checkpoint=checkpoint, gate=gate, plan=plan, results=results
    )


def _decide(*, step_run: StepRun, kind: str, by: User, reason: str, field: str) -> HumanDecision:
    if not reason or not reason.strip():
        raise InvalidInput("A reason is required so the agent and the team know why")
    limits.DECISION_REASON.check(field, reason)
    with transaction.atomic():
        run = StepRun.objects.select_related("session__project", "session__agent").get(
            pk=step_run.pk
        )
        if run.status != StepRun.Status.ACTIVE:
            raise Conflict(
                f"Step '{run.step_id}' of session '{run.session.session_id}' is {run.status}; "
                "only the current step can be overridden or sent back"
            )
        # A newer ruling replaces one the agent has not seen yet.
        HumanDecision.objects.filter(step_run=run, consumed_at__isnull=True).update(
            consumed_at=timezone.now()
        )
        decision = HumanDecision.objects.create(
            step_run=run,
            kind=kind,
            decided_by=by,
            decided_by_name=by.get_username(),
            reason=reason.strip(),
        )
        is_override = kind == HumanDecision.Kind.OVERRIDE
        events.event_record(
            kind=Event.Kind.REVIEW_OVERRIDDEN if is_override else Event.Kind.CHANGES_REQUESTED,
            project=run.session.project,
            session=run.session,
            agent=run.session.agent,
            by=by,
            payload=(events.ReviewOverridden if is_override else events.ChangesRequested)(
                step_id=run.step_id, reason=decision.reason
            ),
        )
    return decision


def review_override(*, step_run: StepRun, reason: str, by: User) -> HumanDecision:
    """A person passes the step's review; the agent's next ``finished_step`` advances."""
    return _decide(
        step_run=step_run, kind=HumanDecision.Kind.OVERRIDE, by=by, reason=reason, field="reason"
    )


def review_request_changes(*, step_run: StepRun, feedback: str, by: User) -> HumanDecision:
    """A person sends the step back; the agent's next ``finished_step`` gets the feedback."""
    return _decide(
        step_run=step_run,
        kind=HumanDecision.Kind.REQUEST_CHANGES,
        by=by,
        reason=feedback,
        field="feedback",
    )


# --- review tasks the agent runs ----------------------------------------------------------------

SCHEMA_RUN_EACH = "json_schema"
PASSED_FEEDBACK = "Marked as passed with mark_review_as_passed."


@dataclass(frozen=True)
class TasksNeedWork:
    """A hand-in sent back with one feedback text (the review tasks to run, a schema failure,
    a person's requested changes), as DeepWork 0.14 answers ``needs_work``."""

    feedback: str
    stack: Stack


TasksFinish = Any


def _task_run(checkpoint: StepCheckpoint) -> StepRun:
    return StepRun.objects.get(
        session=checkpoint.session, step_id=checkpoint.step.key, status=StepRun.Status.ACTIVE
    )


def _task_stack(checkpoint: StepCheckpoint) -> Stack:
    return checkpoint.generation.stack(
        project=checkpoint.project,
        agent=checkpoint.session.agent,
        conversation=checkpoint.conversation,
    )


def _task_reviewer(checkpoint: StepCheckpoint) -> str:
    return checkpoint.session.agent.agent_id


def _task_event(checkpoint: StepCheckpoint, kind: str, payload: events.Payload) -> None:
    events.event_record(
        kind=kind,
        project=checkpoint.project,
        session=checkpoint.session,
        agent=checkpoint.session.agent,
        payload=payload,
    )


def _task_round(
    checkpoint: StepCheckpoint, attempt: int, reviews: int, failed: int, reason: str | None
) -> events.ReviewRound:
    return events.ReviewRound(
        step_ids=[checkpoint.step.key],
        attempt=attempt,
        reviews=reviews,
        failed=failed,
        override_reason=reason,
    )


def _tasks_need_work(
    checkpoint: StepCheckpoint,
    run: StepRun,
    results: list[ReviewResult],
    feedback: str,
    *,
    requested: str | None = None,
    also: Callable[[int], None] = lambda round_: None,
) -> TasksNeedWork:
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
            _task_event(checkpoint, Event.Kind.REVIEW_REQUESTED, request)
        else:
            _task_event(
                checkpoint,
                Event.Kind.REVIEW_FAILED,
                _task_round(checkpoint, round_, len(results), len(results), None),
            )
    return TasksNeedWork(feedback=feedback, stack=_task_stack(checkpoint))


def _task_failed(
    checkpoint: StepCheckpoint, run: StepRun, run_each: str, target: str, feedback: str
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
        reviewer=_task_reviewer(checkpoint),
    )


def _task_advance(checkpoint: StepCheckpoint, record: Callable[[], None]) -> TasksFinish:
    return step_advance(checkpoint=checkpoint, on_claimed=record)


def step_finish_by_tasks(
    *,
    checkpoint: StepCheckpoint,
    override_reason: str | None,
    reviews_enabled: bool = True,
    honour_091_ids: bool = False,
    commands: CommandPolicy = NO_COMMANDS,
) -> TasksFinish:
    """Judge the validated hand-in and advance it, or answer ``needs_work``.

    ``commands``: whether the project rules' precompute commands may run (the server decides).

    ``honour_091_ids``: passes marked under the ids 0.9.1's review tools give the project's
    rules count too (``review_tasks.review_tasks``), for a server serving both generations.
    """
    run = _task_run(checkpoint)
    pending = rulings.pending_decisions([run.pk])
    project, session, agent = checkpoint.project, checkpoint.session, checkpoint.session.agent

    changes = pending.get(HumanDecision.Kind.REQUEST_CHANGES)
    if changes is not None:
        feedback = rulings.changes_deliver(
            decision=changes, project=project, session=session, agent=agent
        )
        if feedback is not None:
            return TasksNeedWork(feedback=feedback, stack=_task_stack(checkpoint))

    override = pending.get(HumanDecision.Kind.OVERRIDE)
    if override is not None:
        return _task_advance(
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
                reviewer=_task_reviewer(checkpoint),
                override_reason=override_reason,
            )
            _task_event(
                checkpoint,
                Event.Kind.REVIEW_PASSED,
                _task_round(checkpoint, round_, 0, 0, override_reason),
            )

        return _task_advance(checkpoint, record_override)

    schema_failure = v0_14.schema_feedback(
        step=checkpoint.step, outputs=checkpoint.outputs, project_root=checkpoint.project_root
    )
    if schema_failure is not None:
        return _tasks_need_work(
            checkpoint,
            run,
            [_task_failed(checkpoint, run, SCHEMA_RUN_EACH, "", schema_failure)],
            schema_failure,
        )
    if not reviews_enabled:
        return _task_advance(checkpoint, lambda: None)

    outstanding, passed = review_tasks.review_tasks(
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
                reviewer=_task_reviewer(checkpoint),
            )
            for task in newly_passed
        )
        if newly_passed:
            _task_event(
                checkpoint,
                Event.Kind.REVIEW_PASSED,
                _task_round(checkpoint, round_, len(newly_passed), 0, None),
            )

    if not outstanding:
        if not newly_passed:
            return _task_advance(checkpoint, lambda: None)
        return _task_advance(
            checkpoint, lambda: record_passes(rulings.next_rounds([run.pk])[run.pk])
        )
    feedback = review_tasks.gate_feedback(outstanding)
    instructions = [f"{review_tasks.INSTRUCTIONS_DIR}/{task.review_id}.md" for task in outstanding]
    return _tasks_need_work(
        checkpoint,
        run,
        [
            _task_failed(
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
