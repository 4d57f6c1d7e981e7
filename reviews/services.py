"""The quality gate over the database: plan the reviews, run them, record verdicts, decide.

``step_finish_gated`` is the whole ``finished_step``: validate (a read), plan (human rulings,
override reason, self-review or external reviews), run the reviews concurrently *outside any
transaction*, then record the verdicts and advance with a compare-and-set, so that an abort or
a second ``finished_step`` while the reviews ran wins cleanly.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from channels.db import database_sync_to_async
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from reviews.gate import (
    ClaudeReviewer,
    CommandReviewer,
    ReviewerError,
    ReviewTask,
    Verdict,
    build_payload,
    expand_tasks,
    review_timeout,
    self_review_instructions,
    system_prompt,
)
from reviews.models import HumanDecision, ReviewResult
from workflows.errors import Conflict, InvalidInput, WorkflowError
from workflows.files import project_write_text
from workflows.models import Agent, Event, Project, StepRun
from workflows.schemas import FinishedStepResponse, QualityCriteriaResult, StepStatus
from workflows.schemas import ReviewResult as WireReviewResult
from workflows.selectors import stack_for_agent
from workflows.services.sessions import StepCheckpoint, step_advance, step_checkpoint

logger = logging.getLogger(__name__)

Progress = Callable[[float, float, str], Awaitable[None]]

SELF_REVIEW_FEEDBACK = """\
Quality review required. Review instructions have been written to: {path}

Verify the quality of your work:
1. Spawn a subagent with the prompt: "Read the file at {path} and follow the instructions in \
it. Review the referenced output files and evaluate them against the criteria specified. \
Report your detailed findings."
2. Review the subagent's findings
3. Fix any issues identified by the subagent
4. Repeat steps 1-3 until all criteria pass
5. Once all criteria pass, call finished_step again with quality_review_override_reason set \
to describe the review outcome (e.g. 'Self-review passed: all criteria met')"""


class GateFailed(WorkflowError):
    """The reviews failed ``max_attempts`` times, or the reviewer itself broke."""


@dataclass(frozen=True)
class GateConfig:
    """How a server reviews: ``reviewer`` None means the agent reviews itself."""

    reviewer: ClaudeReviewer | CommandReviewer | None = None
    timeout: int = 120
    max_attempts: int = 3
    concurrency: int = 4

    @property
    def max_inline_files(self) -> int:
        return 0 if self.reviewer is None else 5


@dataclass
class ReviewPlan:
    """What the gate decided before running anything."""

    answer: FinishedStepResponse | None = None  # needs_work without running reviews
    passes: bool = False  # passes without running reviews
    tasks: list[ReviewTask] = field(default_factory=list)
    attempt: int = 0
    run_ids: dict[str, int] = field(default_factory=dict)  # step_id -> StepRun pk
    override_decision: int | None = None  # a human override to mark consumed on success


def _active_runs(checkpoint: StepCheckpoint) -> dict[str, int]:
    return dict(
        StepRun.objects.filter(
            session=checkpoint.session,
            status=StepRun.Status.ACTIVE,
            step_id__in=[step.step_id for step in checkpoint.steps],
        ).values_list("step_id", "pk")
    )


def _event(checkpoint: StepCheckpoint, kind: str, payload: dict) -> None:
    Event.objects.create(
        project=checkpoint.project,
        session=checkpoint.session,
        agent=checkpoint.agent,
        kind=kind,
        payload=payload,
    )


def _inputs_by_step(checkpoint: StepCheckpoint) -> dict[str, tuple[tuple[str, str], ...]]:
    """Each step's file inputs, resolved to the paths its producing step handed in."""
    produced: dict[str, dict] = {}
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


def _pending_decisions(run_ids: list[int]) -> dict[str, HumanDecision]:
    """The rulings on these runs that the agent has not seen yet, newest per kind."""
    pending: dict[str, HumanDecision] = {}
    for decision in HumanDecision.objects.filter(
        step_run_id__in=run_ids, consumed_at__isnull=True
    ).order_by("id"):
        pending[decision.kind] = decision
    return pending


def review_plan(
    *, checkpoint: StepCheckpoint, gate: GateConfig, override_reason: str | None
) -> ReviewPlan:
    """Decide what the gate does with this hand-in, recording any verdict it already implies."""
    run_ids = _active_runs(checkpoint)
    plan = ReviewPlan(run_ids=run_ids)
    first_run = next(iter(run_ids.values()), None)

    pending = _pending_decisions(list(run_ids.values()))
    changes = pending.get(HumanDecision.Kind.REQUEST_CHANGES)
    if changes is not None:
        with transaction.atomic():
            claimed = HumanDecision.objects.filter(pk=changes.pk, consumed_at__isnull=True).update(
                consumed_at=timezone.now()
            )
            if claimed:
                feedback = f"Changes requested by {changes.decided_by_name}: {changes.reason}"
                ReviewResult.objects.create(
                    step_run_id=changes.step_run_id,
                    session=checkpoint.session,
                    attempt=StepRun.objects.get(pk=changes.step_run_id).quality_attempts,
                    run_each="step",
                    passed=False,
                    feedback=feedback,
                    reviewer_kind=ReviewResult.Reviewer.HUMAN,
                    reviewer=changes.decided_by_name,
                )
                _event(checkpoint, Event.Kind.CHANGES_DELIVERED, {"decision": changes.pk})
        if claimed:
            plan.answer = FinishedStepResponse(
                status=StepStatus.NEEDS_WORK,
                feedback=feedback,
                failed_reviews=[
                    WireReviewResult(review_run_each="step", passed=False, feedback=feedback)
                ],
                stack=stack_for_agent(agent=checkpoint.agent),
            )
            return plan

    override = pending.get(HumanDecision.Kind.OVERRIDE)
    if override is not None:
        plan.passes = True
        plan.override_decision = override.pk
        return plan

    reviews = [review for step in checkpoint.steps for review in step.reviews]
    if not reviews:
        plan.passes = True
        return plan

    if override_reason:
        # Over the REST API a person hands in with the override: the verdict is theirs, not the
        # agent's self-review.
        person = checkpoint.handed_in_by
        with transaction.atomic():
            for step_id, run_id in run_ids.items():
                ReviewResult.objects.create(
                    step_run_id=run_id,
                    session=checkpoint.session,
                    attempt=StepRun.objects.get(pk=run_id).quality_attempts,
                    run_each="step",
                    passed=True,
                    feedback=override_reason,
                    reviewer_kind=ReviewResult.Reviewer.HUMAN
                    if person
                    else ReviewResult.Reviewer.SELF,
                    reviewer=person or checkpoint.agent.agent_id,
                    override_reason=override_reason,
                )
                payload = {"step_id": step_id, "override_reason": override_reason}
                if person:
                    payload["by"] = person
                _event(checkpoint, Event.Kind.REVIEW_PASSED, payload)
        plan.passes = True
        return plan

    tasks = expand_tasks(
        steps=[
            {"step_id": s.step_id, "outputs": s.outputs, "reviews": s.reviews}
            for s in checkpoint.steps
        ],
        submitted=checkpoint.outputs,
        inputs_by_step=_inputs_by_step(checkpoint),
    )
    if not tasks:
        # Every review targets an optional output that was not handed in.
        plan.passes = True
        return plan

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
        _event(checkpoint, Event.Kind.REVIEW_REQUESTED, {"instructions": relative})
        plan.answer = FinishedStepResponse(
            status=StepStatus.NEEDS_WORK,
            feedback=SELF_REVIEW_FEEDBACK.format(path=relative),
            stack=stack_for_agent(agent=checkpoint.agent),
        )
        return plan

    # Counted before the reviews run, so a reviewer that crashes still uses up an attempt.
    StepRun.objects.filter(pk__in=run_ids.values()).update(
        quality_attempts=F("quality_attempts") + 1
    )
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
    assert gate.reviewer is not None
    limit = asyncio.Semaphore(gate.concurrency)
    done = 0

    async def one(task: ReviewTask) -> Verdict | ReviewerError:
        nonlocal done
        async with limit:
            try:
                verdict = await gate.reviewer.review(
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


def review_conclude(
    *,
    checkpoint: StepCheckpoint,
    gate: GateConfig,
    plan: ReviewPlan,
    results: list[Verdict | ReviewerError],
) -> FinishedStepResponse:
    """Record every verdict, then advance, answer ``needs_work`` or fail the gate."""
    failed: list[tuple[ReviewTask, Verdict]] = []
    broken: list[ReviewerError] = []
    with transaction.atomic():
        for task, result in zip(plan.tasks, results, strict=True):
            is_error = isinstance(result, ReviewerError)
            ReviewResult.objects.create(
                step_run_id=plan.run_ids[task.step_id],
                session=checkpoint.session,
                attempt=plan.attempt,
                run_each=task.run_each,
                target_file=task.target_file,
                passed=False if is_error else result.passed,
                feedback=str(result) if is_error else result.feedback,
                criteria_results=[] if is_error else result.criteria_results,
                reviewer_kind=ReviewResult.Reviewer.EXTERNAL,
                reviewer=gate.reviewer.name,
                error=str(result) if is_error else None,
                duration_ms=None if is_error else result.duration_ms,
            )
            if is_error:
                broken.append(result)
            elif not result.passed:
                failed.append((task, result))
        passed = not failed and not broken
        _event(
            checkpoint,
            Event.Kind.REVIEW_PASSED if passed else Event.Kind.REVIEW_FAILED,
            {"attempt": plan.attempt, "reviews": len(plan.tasks), "failed": len(failed)},
        )
    if broken:
        raise GateFailed(str(broken[0]))
    if failed:
        feedback = "; ".join(verdict.feedback for _, verdict in failed)
        if plan.attempt >= gate.max_attempts:
            raise GateFailed(
                f"Quality gate failed after {gate.max_attempts} attempts. Feedback: {feedback}"
            )
        return FinishedStepResponse(
            status=StepStatus.NEEDS_WORK,
            feedback=feedback,
            failed_reviews=[
                WireReviewResult(
                    review_run_each=task.run_each,
                    target_file=task.target_file,
                    passed=False,
                    feedback=verdict.feedback,
                    criteria_results=[
                        QualityCriteriaResult(**item) for item in verdict.criteria_results
                    ],
                )
                for task, verdict in failed
            ],
            stack=stack_for_agent(agent=checkpoint.agent),
        )
    # Attempts are counted per step run and start again once the step passes.
    StepRun.objects.filter(pk__in=plan.run_ids.values()).update(quality_attempts=0)
    return step_advance(checkpoint=checkpoint)


def _advance_after_pass(*, checkpoint: StepCheckpoint, plan: ReviewPlan) -> FinishedStepResponse:
    response = step_advance(checkpoint=checkpoint)
    if plan.override_decision is not None:
        HumanDecision.objects.filter(pk=plan.override_decision, consumed_at__isnull=True).update(
            consumed_at=timezone.now()
        )
        _event(checkpoint, Event.Kind.OVERRIDE_DELIVERED, {"decision": plan.override_decision})
    return response


def _finish_until_reviews(
    *,
    project: Project,
    agent: Agent,
    gate: GateConfig | None,
    outputs: dict[str, str | list[str]],
    notes: str | None,
    override_reason: str | None,
    session_id: str | None,
    acting_user=None,
) -> tuple[FinishedStepResponse | None, StepCheckpoint, ReviewPlan | None]:
    """Everything before the reviews run, in one trip to the database thread: validate, plan,
    and, when no review has to run, advance straight away."""
    checkpoint = step_checkpoint(
        project=project,
        agent=agent,
        outputs=outputs,
        notes=notes,
        session_id=session_id,
        acting_user=acting_user,
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
    acting_user=None,
) -> FinishedStepResponse:
    """``finished_step`` end to end, with the quality gate when ``gate`` is set."""
    answer, checkpoint, plan = await database_sync_to_async(_finish_until_reviews)(
        project=project,
        agent=agent,
        gate=gate,
        outputs=outputs,
        notes=notes,
        override_reason=override_reason,
        session_id=session_id,
        acting_user=acting_user,
    )
    if answer is not None:
        return answer
    results = await run_reviews(
        checkpoint=checkpoint, gate=gate, tasks=plan.tasks, progress=progress
    )
    return await database_sync_to_async(review_conclude)(
        checkpoint=checkpoint, gate=gate, plan=plan, results=results
    )


def _decide(
    *, step_run: StepRun, kind: str, user, by_name: str | None, reason: str
) -> HumanDecision:
    if not reason or not reason.strip():
        raise InvalidInput("A reason is required so the agent and the team know why")
    name = by_name or (user.get_username() if user is not None else "")
    if not name:
        raise InvalidInput("Say who decided: give a user or a name")
    with transaction.atomic():
        run = StepRun.objects.select_related("session").get(pk=step_run.pk)
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
            decided_by=user,
            decided_by_name=name,
            reason=reason.strip(),
        )
        Event.objects.create(
            project_id=run.session.project_id,
            session=run.session,
            agent_id=run.session.agent_id,
            kind=Event.Kind.REVIEW_OVERRIDDEN
            if kind == HumanDecision.Kind.OVERRIDE
            else Event.Kind.CHANGES_REQUESTED,
            payload={"step_id": run.step_id, "by": name, "reason": decision.reason},
        )
    return decision


def review_override(
    *, step_run: StepRun, reason: str, user=None, by_name: str | None = None
) -> HumanDecision:
    """A person passes the step's review; the agent's next ``finished_step`` advances."""
    return _decide(
        step_run=step_run,
        kind=HumanDecision.Kind.OVERRIDE,
        user=user,
        by_name=by_name,
        reason=reason,
    )


def review_request_changes(
    *, step_run: StepRun, feedback: str, user=None, by_name: str | None = None
) -> HumanDecision:
    """A person sends the step back; the agent's next ``finished_step`` gets the feedback."""
    return _decide(
        step_run=step_run,
        kind=HumanDecision.Kind.REQUEST_CHANGES,
        user=user,
        by_name=by_name,
        reason=feedback,
    )
