"""The DeepWork dialect: DeepWork 0.9.1's wording and wire models for the engine's answers.

The MCP ``deepwork`` toolset and the REST API both answer in these models
(``workflows.schemas``). The engine answers in domain terms (``workflows.results``: a step
begun, a finish outcome, an abort, the stack); everything an agent reads as DeepWork's text is
written here.

The session calls (``start_workflow``, ``abort_workflow``, ``go_to_step``) take the services'
keyword arguments and answer on the wire. ``finished_step`` renders what
``reviews.services.step_finish_gated`` returned: the gate lives in ``reviews``, which
``workflows`` never imports, so the interface makes that call and hands the outcome here.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, ParamSpec, TypeVar

from workflows.results import (
    FailedReview,
    FinishOutcome,
    NeedsWork,
    SelfReviewRequired,
    SessionAborted,
    SessionStarted,
    Stack,
    StepAdvanced,
    StepBegun,
    StepInstructions,
    WentToStep,
    WorkflowCompleted,
)
from workflows.schemas import (
    AbortWorkflowResponse,
    ActiveStepInfo,
    ExpectedOutput,
    FailedReviewOut,
    FinishedStepResponse,
    GetWorkflowsResponse,
    GoToStepResponse,
    JobInfo,
    JobLoadErrorInfo,
    QualityCriteriaResult,
    ReviewInfo,
    StackEntry,
    StartWorkflowResponse,
    StepStatus,
    WorkflowInfo,
)
from workflows.services import sessions

if TYPE_CHECKING:
    from workflows.services.catalog import CatalogView

P = ParamSpec("P")
R = TypeVar("R")
W = TypeVar("W")

# Follows each job's load error in ``get_workflows``. It names the standard job's ``repair``
# workflow, which every server serves, rather than a client's slash command that a project
# may not have installed.
REPAIR_HINT = (
    "\nIf this job.yml was edited in this session, fix it directly. Otherwise repair the "
    "project's jobs with the repair workflow: start_workflow with job_name "
    '"deepwork_jobs" and workflow_name "repair".'
)

# What ``finished_step`` wants as the value of each output type.
OUTPUT_SYNTAX = {"file": "filepath", "files": "array of filepaths for all individual files"}

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


def workflows(view: CatalogView) -> GetWorkflowsResponse:
    """The catalog as DeepWork's ``get_workflows`` answer: the jobs, then the load errors."""
    return GetWorkflowsResponse(
        jobs=[
            JobInfo(
                name=job.name,
                summary=job.summary,
                workflows=[WorkflowInfo(name=n, summary=s) for n, s in job.workflows],
            )
            for job in view.jobs
        ],
        errors=[
            JobLoadErrorInfo(
                job_name=error.dir_name, job_dir=error.job_dir, error=error.error + REPAIR_HINT
            )
            for error in view.errors
        ],
    )


def entry_instructions(instructions: Sequence[StepInstructions]) -> str:
    """One entry's instructions: the first step's; a concurrent entry adds the note and its
    other members' instructions, which DeepWork 0.9.1 never showed."""
    first, *others = instructions
    text = first.text
    if others:
        ids = ", ".join(item.step_id for item in instructions)
        text += (
            f"\n\n**CONCURRENT STEPS**: This entry has {len(instructions)} steps that can run "
            f"in parallel: {ids}\nUse the Task tool to execute them concurrently."
        )
        for other in others:
            text += (
                f"\n\n---\n\n## Instructions for concurrent step '{other.step_id}'\n\n" + other.text
            )
    return text


def stack(items: Stack) -> list[StackEntry]:
    """The agent's stack as DeepWork's ``stack``: ``job/workflow`` and the current step."""
    return [
        StackEntry(workflow=f"{item.job_name}/{item.workflow_name}", step=item.step_id)
        for item in items
    ]


def begin_step(begun: StepBegun) -> ActiveStepInfo:
    """The entry the session is now at, as DeepWork's ``begin_step``."""
    job = begun.job
    return ActiveStepInfo(
        session_id=begun.session.session_id,
        step_id=begun.steps[0].step_id,
        job_dir=job.job_dir,
        step_expected_outputs=[
            ExpectedOutput(
                name=output["name"],
                type=output["type"],
                description=output["description"],
                required=output["required"],
                syntax_for_finished_step_tool=OUTPUT_SYNTAX[output["type"]],
            )
            for step in begun.steps
            for output in step.outputs
        ],
        step_reviews=[ReviewInfo(**review) for step in begun.steps for review in step.reviews],
        step_instructions=entry_instructions(begun.instructions),
        common_job_info=job.common_info,
    )


def joined_feedback(failed: Sequence[FailedReview]) -> str:
    return "; ".join(review.feedback for review in failed)


def started(result: SessionStarted) -> StartWorkflowResponse:
    return StartWorkflowResponse(begin_step=begin_step(result.begun), stack=stack(result.stack))


def finished_step(outcome: FinishOutcome) -> FinishedStepResponse:
    """What ``reviews.services.step_finish_gated`` returned, as DeepWork's ``finished_step``
    answer: ``next_step``, ``workflow_complete`` or ``needs_work``."""
    if isinstance(outcome, StepAdvanced):
        return FinishedStepResponse(
            status=StepStatus.NEXT_STEP,
            begin_step=begin_step(outcome.begun),
            stack=stack(outcome.stack),
        )
    if isinstance(outcome, WorkflowCompleted):
        return FinishedStepResponse(
            status=StepStatus.WORKFLOW_COMPLETE,
            summary=f"Workflow '{outcome.workflow_name}' completed successfully!",
            all_outputs=outcome.all_outputs,
            stack=stack(outcome.stack),
        )
    if isinstance(outcome, SelfReviewRequired):
        return FinishedStepResponse(
            status=StepStatus.NEEDS_WORK,
            feedback=SELF_REVIEW_FEEDBACK.format(path=outcome.instructions_path),
            stack=stack(outcome.stack),
        )
    return _needs_work(outcome)


def _needs_work(outcome: NeedsWork) -> FinishedStepResponse:
    """``needs_work`` with every failed review, their feedback joined as DeepWork joins it."""
    return FinishedStepResponse(
        status=StepStatus.NEEDS_WORK,
        feedback=joined_feedback(outcome.failed),
        failed_reviews=[
            FailedReviewOut(
                review_run_each=review.run_each,
                target_file=review.target_file,
                passed=False,
                feedback=review.feedback,
                criteria_results=[
                    QualityCriteriaResult(**item) for item in review.criteria_results
                ],
            )
            for review in outcome.failed
        ],
        stack=stack(outcome.stack),
    )


def aborted(result: SessionAborted) -> AbortWorkflowResponse:
    top = result.resumed
    return AbortWorkflowResponse(
        aborted_workflow=f"{result.session.job_name}/{result.session.workflow_name}",
        aborted_step=result.step_id,
        explanation=result.explanation,
        stack=stack(result.stack),
        resumed_workflow=f"{top.job_name}/{top.workflow_name}" if top else None,
        resumed_step=top.step_id if top else None,
    )


def went_to_step(result: WentToStep) -> GoToStepResponse:
    return GoToStepResponse(
        begin_step=begin_step(result.begun),
        invalidated_steps=list(result.invalidated_steps),
        stack=stack(result.stack),
    )


# --- The calls the interfaces make: a session service, answered on DeepWork's wire. ---------


def _answering(service: Callable[P, R], render: Callable[[R], W]) -> Callable[P, W]:
    """``service`` with the same keyword arguments, its result rendered by ``render``."""

    def call(*args: P.args, **kwargs: P.kwargs) -> W:
        return render(service(*args, **kwargs))

    call.__doc__ = (
        f"``{service.__module__}.{service.__name__}``, answered by ``{render.__name__}``."
    )
    return call


start_workflow = _answering(sessions.session_start, started)
abort_workflow = _answering(sessions.session_abort, aborted)
go_to_step = _answering(sessions.session_go_to_step, went_to_step)
