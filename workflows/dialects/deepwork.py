"""The DeepWork dialect: DeepWork 0.9.1's wording and wire models for the engine's answers.

The MCP ``deepwork`` toolset and the REST API both answer in these models
(``workflows.schemas``). The engine hands over domain values (a session, the steps of an entry
with each step's instructions, verdicts, the stack); everything an agent reads as DeepWork's
text is written here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from workflows.models import Job, Step, WorkflowSession
from workflows.schemas import (
    ActiveStepInfo,
    CriterionResult,
    ExpectedOutput,
    FinishedStepResponse,
    QualityCriteriaResult,
    ReviewInfo,
    ReviewResult,
    StackEntry,
    StepStatus,
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


@dataclass(frozen=True)
class FailedReview:
    """One review that judged the work and found it wanting."""

    run_each: str
    feedback: str
    target_file: str | None = None
    criteria_results: list[CriterionResult] = field(default_factory=list)


def entry_instructions(instructions: Sequence[tuple[str, str]]) -> str:
    """One entry's instructions from each step's ``(step_id, text)``: the first step's; a
    concurrent entry adds the note and its other members' instructions, which DeepWork 0.9.1
    never showed."""
    (_, text), *others = instructions
    if others:
        ids = ", ".join(step_id for step_id, _ in instructions)
        text += (
            f"\n\n**CONCURRENT STEPS**: This entry has {len(instructions)} steps that can run "
            f"in parallel: {ids}\nUse the Task tool to execute them concurrently."
        )
        for step_id, other in others:
            text += f"\n\n---\n\n## Instructions for concurrent step '{step_id}'\n\n" + other
    return text


def begin_step(
    *,
    session: WorkflowSession,
    job: Job,
    entry: list[Step],
    instructions: Sequence[tuple[str, str]],
) -> ActiveStepInfo:
    """The entry the session is now at, as DeepWork's ``begin_step``."""
    return ActiveStepInfo(
        session_id=session.session_id,
        step_id=entry[0].step_id,
        job_dir=job.job_dir,
        step_expected_outputs=[
            ExpectedOutput(
                name=output["name"],
                type=output["type"],
                description=output["description"],
                required=output["required"],
                syntax_for_finished_step_tool=OUTPUT_SYNTAX[output["type"]],
            )
            for step in entry
            for output in step.outputs
        ],
        step_reviews=[ReviewInfo(**review) for step in entry for review in step.reviews],
        step_instructions=entry_instructions(instructions),
        common_job_info=job.common_info,
    )


def workflow_complete(
    *, workflow_name: str, all_outputs: dict[str, str | list[str]], stack: list[StackEntry]
) -> FinishedStepResponse:
    return FinishedStepResponse(
        status=StepStatus.WORKFLOW_COMPLETE,
        summary=f"Workflow '{workflow_name}' completed successfully!",
        all_outputs=all_outputs,
        stack=stack,
    )


def self_review_required(
    *, instructions_path: str, stack: list[StackEntry]
) -> FinishedStepResponse:
    """``needs_work`` asking the agent to review its own work with the written instructions."""
    return FinishedStepResponse(
        status=StepStatus.NEEDS_WORK,
        feedback=SELF_REVIEW_FEEDBACK.format(path=instructions_path),
        stack=stack,
    )


def needs_work(*, failed: Sequence[FailedReview], stack: list[StackEntry]) -> FinishedStepResponse:
    """``needs_work`` with every failed review, their feedback joined as DeepWork joins it."""
    return FinishedStepResponse(
        status=StepStatus.NEEDS_WORK,
        feedback=joined_feedback(failed),
        failed_reviews=[
            ReviewResult(
                review_run_each=review.run_each,
                target_file=review.target_file,
                passed=False,
                feedback=review.feedback,
                criteria_results=[
                    QualityCriteriaResult(**item) for item in review.criteria_results
                ],
            )
            for review in failed
        ],
        stack=stack,
    )


def joined_feedback(failed: Sequence[FailedReview]) -> str:
    return "; ".join(review.feedback for review in failed)
