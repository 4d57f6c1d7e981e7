"""The quality gate over the database: plan the reviews, run them, record verdicts, decide.

One pipeline for every generation, in this order: a person's pending ruling (request changes
sends the work back, override passes it; ``reviews.rulings``), the hand-in's override reason,
the generation's output checks (``Generation.output_feedback``), the review plan, the
reviews, then the advance with a compare-and-set. Who plans and runs the reviews is the
generation's (``Generation.reviews_by_agent``):

- the server: self-review instructions, or external reviewers run concurrently *outside any
  transaction*, their verdicts recorded with the advance, so that an abort or a second
  ``finished_step`` while the reviews ran wins cleanly;
- the agent: review tasks it hands to sub-agents. Each task it is asked to run is stored as a
  failed verdict until passed (``run_each`` = its review id); a task later found marked as
  passed is recorded as passing with the advance.

Whatever lets a hand-in pass (a person's override, the hand-in's reason, passing verdicts) is
written in the advancing transaction: a hand-in that loses the race to advance keeps none of it.

Why long: the pipeline, its two review planners and the server's reviews record verdicts,
rounds and events through the same few helpers, often inside one transaction; apart, each
piece would have to hand those helpers around.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

from django.db import transaction

from reviews import rulings
from reviews.deepreview.precompute import NO_COMMANDS, CommandPolicy
from reviews.gate import (
    GateConfig,
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
from workflows import events, limits, rows
from workflows.db import db_sync_to_async
from workflows.errors import InvalidInput, WorkflowError
from workflows.events import User
from workflows.files import project_write_text
from workflows.models import Agent, Event, Project, StepRun
from workflows.results import FailedReview, FinishOutcome, NeedsWork, SelfReviewRequired, Stack
from workflows.services import step_changes
from workflows.services.sessions import StepCheckpoint, step_advance, step_checkpoint
from workflows.services.step_runs import (
    step_runs_count_quality_attempt,
    step_runs_reset_quality_attempts,
    step_runs_return_quality_attempt,
)

logger = logging.getLogger(__name__)

Progress = Callable[[float, float, str], Awaitable[None]]


SCHEMA_RUN_EACH = "json_schema"
PASSED_FEEDBACK = "Marked as passed with mark_review_as_passed."


class GateFailed(WorkflowError):
    """The reviews failed ``max_attempts`` times, or the reviewer itself broke."""


@dataclass
class ReviewPlan:
    """What the gate decided before running anything: an answer (sent back without running
    reviews), reviews for the server's reviewer to run, or neither (the hand-in passes)."""

    run_ids: dict[str, int]  # step_id -> StepRun pk, in the entry's order
    answer: NeedsWork | SelfReviewRequired | None = None
    tasks: list[ReviewTask] = field(default_factory=list)
    attempt: int = 0  # the quality attempt the reviews use up (the cap counts these)
    # What let the hand-in pass, written by the advance once it has claimed the session.
    record: Callable[[], None] | None = None
    # The files the entry's steps changed, looked at before the reviews (the reviewer's list).
    files: step_changes.ReviewedFiles | None = None


def _keys(checkpoint: StepCheckpoint) -> list[str]:
    """The entry's steps in the workflow's order, as its runs and a round's event name them."""
    return checkpoint.generation.entry_keys(checkpoint.entry)


def _active_runs(checkpoint: StepCheckpoint) -> dict[str, int]:
    keys = _keys(checkpoint)
    # Every hand-in reads these: written out (``workflows.rows``).
    runs = {
        run.step_id: run.pk
        for run in rows.select_models(
            StepRun,
            fields=("id", "step_id"),
            where="session_id = %s AND status = %s",
            params=[checkpoint.session.pk, StepRun.Status.ACTIVE.value],
        )
    }
    return {key: runs[key] for key in keys if key in runs}


def _event(checkpoint: StepCheckpoint, kind: str, payload: events.Payload) -> None:
    # A verdict is the person's when a person handed in; a request to review is the agent's.
    by = None if kind == Event.Kind.REVIEW_REQUESTED else checkpoint.by
    events.event_record(
        kind=kind,
        project=checkpoint.project,
        session=checkpoint.session,
        agent=checkpoint.agent,
        by=by,
        payload=payload,
    )


def _round(
    checkpoint: StepCheckpoint,
    plan: ReviewPlan,
    rounds: dict[int, int],
    *,
    reviews: int,
    failed: int,
    reason: str | None = None,
) -> events.ReviewRound:
    """A hand-in's review round, numbered by its first step (an entry's steps are judged
    together, so they are at the same round unless a person ruled on one of them alone)."""
    keys = _keys(checkpoint)
    return events.ReviewRound(
        step_ids=keys,
        attempt=rounds[plan.run_ids[keys[0]]],
        reviews=reviews,
        failed=failed,
        override_reason=reason,
    )


def _verdict(
    checkpoint: StepCheckpoint, plan: ReviewPlan, step_id: str, **fields: object
) -> ReviewResult:
    """A verdict on one of the hand-in's runs; the agent's own unless ``fields`` say whose."""
    fields.setdefault("reviewer_kind", ReviewResult.Reviewer.SELF)
    fields.setdefault("reviewer", checkpoint.agent.agent_id)
    return ReviewResult(
        step_run_id=plan.run_ids[step_id],
        session=checkpoint.session,
        **copied_from(checkpoint.session),
        step_id=step_id,
        **fields,
    )


def _stack(checkpoint: StepCheckpoint) -> Stack:
    return checkpoint.generation.stack(
        project=checkpoint.project, agent=checkpoint.agent, conversation=checkpoint.conversation
    )


def _sent_back(checkpoint: StepCheckpoint, failed: Sequence[FailedReview]) -> NeedsWork:
    return NeedsWork(failed=tuple(failed), stack=_stack(checkpoint))


def review_plan(
    *,
    checkpoint: StepCheckpoint,
    gate: GateConfig | None,
    override_reason: str | None,
    commands: CommandPolicy = NO_COMMANDS,
    honour_091_ids: bool = False,
) -> ReviewPlan:
    """Decide what the gate does with this hand-in, recording any verdict it already implies.

    ``gate`` None: the server reviews nothing (a person's rulings and the output checks still
    apply). ``commands`` and ``honour_091_ids`` are for review tasks the agent runs
    (``review_tasks.review_tasks``).
    """
    plan = ReviewPlan(run_ids=_active_runs(checkpoint))
    project, session, agent = checkpoint.project, checkpoint.session, checkpoint.agent

    pending = rulings.pending_decisions(plan.run_ids.values())
    changes = pending.get(HumanDecision.Kind.REQUEST_CHANGES)
    if changes is not None:
        feedback = rulings.changes_deliver(
            decision=changes, project=project, session=session, agent=agent
        )
        if feedback is not None:
            plan.answer = _sent_back(checkpoint, [FailedReview(run_each="step", feedback=feedback)])
            return plan

    override = pending.get(HumanDecision.Kind.OVERRIDE)
    if override is not None:
        plan.record = lambda: rulings.override_deliver(
            decision=override, project=project, session=session, agent=agent
        )
        return plan

    generation = checkpoint.generation
    # The agent's review tasks may come from the project's rules whatever the step declares;
    # the server's reviews are only the ones the steps declare.
    reviewable = generation.reviews_by_agent or any(s.reviews for s in checkpoint.steps)
    if override_reason and reviewable:
        plan.record = lambda: _record_override_reason(checkpoint, plan, override_reason)
        return plan

    failure = generation.output_feedback(
        entry=checkpoint.entry, outputs=checkpoint.outputs, project_root=checkpoint.project_root
    )
    if failure is not None:
        schema = _failed_verdict(checkpoint, plan, SCHEMA_RUN_EACH, "", failure)
        plan.answer = _send_back_counted(checkpoint, plan, [schema], failure)
        return plan
    if gate is None or not reviewable:
        return plan
    if generation.reviews_by_agent:
        _plan_review_tasks(checkpoint, plan, commands=commands, honour_091_ids=honour_091_ids)
    else:
        _plan_server_reviews(checkpoint, gate, plan)
    return plan


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


def _plan_server_reviews(checkpoint: StepCheckpoint, gate: GateConfig, plan: ReviewPlan) -> None:
    """The steps' declared reviews, for the server's reviewer or one self-review request."""
    steps = [
        {"step_id": s.step_id, "outputs": s.outputs, "reviews": s.reviews} for s in checkpoint.steps
    ]
    inputs = _inputs_by_step(checkpoint)
    tasks = expand_tasks(steps=steps, submitted=checkpoint.outputs, inputs_by_step=inputs)
    if not tasks:
        # Every review targets an optional output that was not handed in.
        return
    # Reviews take seconds anyway and the reviewer is given the list: compare now.
    plan.files = step_changes.changes_for_review(
        session=checkpoint.session, run_pks=plan.run_ids, root=checkpoint.project_root
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
            instructions_path=relative,
            stack=_stack(checkpoint),
        )
        return

    # Counted before the reviews run, so a reviewer that crashes still uses up an attempt.
    plan.attempt = step_runs_count_quality_attempt(run_ids=plan.run_ids.values())
    plan.tasks = tasks


def _plan_review_tasks(
    checkpoint: StepCheckpoint, plan: ReviewPlan, *, commands: CommandPolicy, honour_091_ids: bool
) -> None:
    """Review tasks for the agent to run: the outstanding ones send the hand-in back; the ones
    it marked as passed since it was asked are recorded as passing."""
    # Imported here: the .deepreview rules engine (and its glob library) is loaded only by a
    # server whose sessions hand reviews to the agent, not by every server that finishes steps.
    from reviews import review_tasks

    [(step_id, run_pk)] = plan.run_ids.items()  # agent-run reviews: one step per entry
    outstanding, passed = review_tasks.review_tasks(
        checkpoint=checkpoint, honour_091_ids=honour_091_ids, commands=commands
    )
    given = ReviewResult.objects.filter(step_run_id=run_pk)
    asked = set(given.filter(passed=False).values_list("run_each", flat=True))
    already = set(given.filter(passed=True).values_list("run_each", flat=True))
    newly_passed = [task for task in passed if task.review_id in asked - already]

    def record_passes(rounds: dict[int, int]) -> None:
        if not newly_passed:
            return
        ReviewResult.objects.bulk_create(
            _verdict(
                checkpoint,
                plan,
                step_id,
                attempt=rounds[run_pk],
                run_each=task.review_id[:255],
                target_file=task.scope[:1024] or None,
                passed=True,
                feedback=PASSED_FEEDBACK,
            )
            for task in newly_passed
        )
        round_ = _round(checkpoint, plan, rounds, reviews=len(newly_passed), failed=0)
        _event(checkpoint, Event.Kind.REVIEW_PASSED, round_)

    if not outstanding:
        if newly_passed:
            plan.record = lambda: record_passes(rulings.next_rounds([run_pk]))
        return
    instructions = [f"{review_tasks.INSTRUCTIONS_DIR}/{task.review_id}.md" for task in outstanding]
    asked_now = [
        _failed_verdict(
            checkpoint,
            plan,
            task.review_id,
            task.scope,
            f"{task.description}: to be run by a {task.agent} sub-agent with {path}",
        )
        for task, path in zip(outstanding, instructions, strict=True)
    ]
    plan.answer = _send_back_counted(
        checkpoint,
        plan,
        asked_now,
        review_tasks.gate_feedback(outstanding),
        requested=", ".join(instructions),
        also=record_passes,
    )


def _failed_verdict(
    checkpoint: StepCheckpoint, plan: ReviewPlan, run_each: str, target: str, feedback: str
) -> ReviewResult:
    """A failed verdict on the hand-in's first step, its round numbered when it is stored."""
    return _verdict(
        checkpoint,
        plan,
        next(iter(plan.run_ids)),
        attempt=0,
        run_each=run_each[:255],
        target_file=target[:1024] or None,
        passed=False,
        feedback=feedback,
    )


def _send_back_counted(
    checkpoint: StepCheckpoint,
    plan: ReviewPlan,
    results: list[ReviewResult],
    feedback: str,
    *,
    requested: str | None = None,
    also: Callable[[dict[int, int]], None] = lambda rounds: None,
) -> NeedsWork:
    """Send the hand-in back with ``results`` as its round's verdicts, counting a quality
    attempt as DeepWork 0.14 does for every ``needs_work``. ``requested`` names the review
    instructions when the agent is asked to run its reviews (a request, not a failed round);
    ``also`` records, in the same transaction and round, what the hand-in did pass."""
    with transaction.atomic():
        rounds = rulings.next_rounds(plan.run_ids.values())
        also(rounds)
        step_runs_count_quality_attempt(run_ids=plan.run_ids.values())
        for result in results:
            result.attempt = rounds[result.step_run_id]
        ReviewResult.objects.bulk_create(results)
        if requested is not None:
            _event(
                checkpoint,
                Event.Kind.REVIEW_REQUESTED,
                events.ReviewRequested(instructions=requested),
            )
        else:
            round_ = _round(checkpoint, plan, rounds, reviews=len(results), failed=len(results))
            _event(checkpoint, Event.Kind.REVIEW_FAILED, round_)
    return _sent_back(checkpoint, [FailedReview(run_each="step", feedback=feedback)])


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
        step_runs_return_quality_attempt(run_ids=plan.run_ids.values())
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
            _verdict(
                checkpoint,
                plan,
                task.step_id,
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
            ).save()
        round_ = _round(checkpoint, plan, rounds, reviews=len(plan.tasks), failed=len(failed))
        if passed:
            _event(checkpoint, Event.Kind.REVIEW_PASSED, round_)
            # Attempts are counted per step run and start again once the step passes.
            step_runs_reset_quality_attempts(run_ids=plan.run_ids.values())
            if plan.files is not None:
                step_changes.record_reviewed(session=checkpoint.session, files=plan.files)
        else:
            _event(checkpoint, Event.Kind.REVIEW_FAILED, round_)

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
    return _sent_back(checkpoint, failed_reviews)


def _record_override_reason(checkpoint: StepCheckpoint, plan: ReviewPlan, reason: str) -> None:
    """The hand-in's reason as each step's passing verdict, and one event for the hand-in.
    Over the REST API a person hands in with it: the verdict is theirs, not the agent's
    self-review."""
    person = checkpoint.by.get_username() if checkpoint.by is not None else ""
    rounds = rulings.next_rounds(plan.run_ids.values())
    ReviewResult.objects.bulk_create(
        _verdict(
            checkpoint,
            plan,
            step_id,
            attempt=rounds[run_pk],
            run_each="step",
            passed=True,
            feedback=reason,
            reviewer_kind=ReviewResult.Reviewer.HUMAN if person else ReviewResult.Reviewer.SELF,
            reviewer=person or checkpoint.agent.agent_id,
            override_reason=reason,
        )
        for step_id, run_pk in plan.run_ids.items()
    )
    # No review ran, so no quality attempt was counted; the reason is a round.
    round_ = _round(checkpoint, plan, rounds, reviews=0, failed=0, reason=reason)
    _event(checkpoint, Event.Kind.REVIEW_PASSED, round_)


def _until_reviews(
    *,
    checkpoint: StepCheckpoint,
    gate: GateConfig | None,
    override_reason: str | None,
    commands: CommandPolicy = NO_COMMANDS,
    honour_091_ids: bool = False,
) -> tuple[FinishOutcome | None, ReviewPlan]:
    """The pipeline up to the server's reviews: plan, and answer straight away when no review
    is left for the server to run (sent back, or advanced with what let the hand-in pass)."""
    plan = review_plan(
        checkpoint=checkpoint,
        gate=gate,
        override_reason=override_reason,
        commands=commands,
        honour_091_ids=honour_091_ids,
    )
    if plan.answer is not None:
        return plan.answer, plan
    if not plan.tasks:
        return step_advance(checkpoint=checkpoint, on_claimed=plan.record), plan
    return None, plan


def _check_and_plan(
    *,
    project: Project,
    agent: Agent,
    gate: GateConfig | None,
    outputs: dict[str, str | list[str]],
    notes: str | None,
    override_reason: str | None,
    session_id: str | None,
    by: User | None = None,
) -> tuple[FinishOutcome | None, StepCheckpoint, ReviewPlan]:
    """Everything before the reviews run, in one trip to the database thread."""
    limits.OVERRIDE_REASON.check("override_reason", override_reason)
    checkpoint = step_checkpoint(
        project=project, agent=agent, outputs=outputs, notes=notes, session_id=session_id, by=by
    )
    answer, plan = _until_reviews(checkpoint=checkpoint, gate=gate, override_reason=override_reason)
    return answer, checkpoint, plan


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
    """``finished_step`` of a session named by its agent, end to end: the pipeline, with the
    server's reviews run off the database thread when the plan has any."""
    answer, checkpoint, plan = await db_sync_to_async(_check_and_plan)(
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
    # Reviews are left to run only when there is a gate with a reviewer.
    assert gate is not None
    results = await run_reviews(
        checkpoint=checkpoint, gate=gate, tasks=plan.tasks, progress=progress
    )
    return await db_sync_to_async(review_conclude)(
        checkpoint=checkpoint, gate=gate, plan=plan, results=results
    )


def step_finish_by_tasks(
    *,
    checkpoint: StepCheckpoint,
    override_reason: str | None,
    reviews_enabled: bool = True,
    honour_091_ids: bool = False,
    commands: CommandPolicy = NO_COMMANDS,
) -> FinishOutcome:
    """``finished_step`` of a hand-in whose reviews the agent runs: the same pipeline, which
    always answers on the database thread (nothing is left for the server to run).

    ``commands``: whether the project rules' precompute commands may run (the server decides).
    ``honour_091_ids``: passes marked under the ids 0.9.1's review tools give the project's
    rules count too (``review_tasks.review_tasks``), for a server serving both generations.
    """
    answer, _ = _until_reviews(
        checkpoint=checkpoint,
        gate=GateConfig() if reviews_enabled else None,
        override_reason=override_reason,
        commands=commands,
        honour_091_ids=honour_091_ids,
    )
    assert answer is not None
    return answer
