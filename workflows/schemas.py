"""Wire models shared by the MCP tools and the REST API.

Field names, order and nullability follow DeepWork 0.9.1's MCP responses: every field is
present, ``null`` where unset.
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, Field


class StepStatus(StrEnum):
    NEEDS_WORK = "needs_work"
    NEXT_STEP = "next_step"
    WORKFLOW_COMPLETE = "workflow_complete"


class WorkflowInfo(BaseModel):
    name: str
    summary: str


class JobInfo(BaseModel):
    name: str
    summary: str
    workflows: list[WorkflowInfo]


class JobLoadErrorInfo(BaseModel):
    job_name: str
    job_dir: str
    error: str


class GetWorkflowsResponse(BaseModel):
    jobs: list[JobInfo]
    errors: list[JobLoadErrorInfo]


class ExpectedOutput(BaseModel):
    name: str
    type: str
    description: str
    required: bool
    syntax_for_finished_step_tool: str


class ReviewInfo(BaseModel):
    run_each: str
    quality_criteria: dict[str, str]
    additional_review_guidance: str | None = None


class ActiveStepInfo(BaseModel):
    session_id: str
    step_id: str
    job_dir: str
    step_expected_outputs: list[ExpectedOutput]
    step_reviews: list[ReviewInfo]
    step_instructions: str
    common_job_info: str


class StackEntry(BaseModel):
    workflow: str = Field(description="job_name/workflow_name")
    step: str = Field(description="The session's current step id")


class StartWorkflowResponse(BaseModel):
    begin_step: ActiveStepInfo
    stack: list[StackEntry]


# The wire form of ``workflows.results.CriterionResult`` (no docstring: it would enter the schema).
class QualityCriteriaResult(BaseModel):
    criterion: str
    passed: bool
    feedback: str | None = None


# A review that did not pass, on the wire; DeepWork calls it a review result, a name the
# verdicts table (``reviews.models.ReviewResult``) has here.
class FailedReviewOut(BaseModel):
    review_run_each: str
    target_file: str | None = None
    passed: bool
    feedback: str
    criteria_results: list[QualityCriteriaResult] = []


class FinishedStepResponse(BaseModel):
    status: StepStatus
    feedback: str | None = None
    failed_reviews: list[FailedReviewOut] | None = None
    begin_step: ActiveStepInfo | None = None
    summary: str | None = None
    all_outputs: dict[str, str | list[str]] | None = None
    stack: list[StackEntry]


class AbortWorkflowResponse(BaseModel):
    aborted_workflow: str
    aborted_step: str
    explanation: str
    stack: list[StackEntry]
    resumed_workflow: str | None = None
    resumed_step: str | None = None


class GoToStepResponse(BaseModel):
    begin_step: ActiveStepInfo
    invalidated_steps: list[str]
    stack: list[StackEntry]
