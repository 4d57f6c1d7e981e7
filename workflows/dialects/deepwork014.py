"""The DeepWork 0.14 dialect: 0.14.0's wire models and wording for the engine's 0.14 answers.

``workflows.generations.v0_14`` answers in domain terms; everything a 0.14 agent reads
(field names and order, ``step_instructions`` with its ``## Inputs`` block, the delegation
sentence, ``how_to_invoke``) is shaped here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

if TYPE_CHECKING:
    from workflows.generations.base import Value
    from workflows.generations.v0_14 import Aborted, Advanced, Begun, Completed, Started, WentToStep
    from workflows.jobdefs.base import RtArg
    from workflows.results import NeedsWork, Stack
    from workflows.services.catalog import CatalogView

IMPORTANT_NOTE = (
    "IMPORTANT: If, given the info on the workflow you now have, the user's request seems "
    "ambiguous and can be interpreted several ways, you MUST use AskUserQuestion to clarify "
    "their intent if that tool is available."
)
SESSION_ID_REQUIRED = (
    "session_id is required. Pass CLAUDE_CODE_SESSION_ID on Claude Code, or the session_id "
    "returned by start_workflow on other platforms."
)
SESSION_ID_REQUIRED_JOBS = "session_id is required. Pass CLAUDE_CODE_SESSION_ID on Claude Code."
START_NEEDS_SESSION_ID = (
    "session_id is required on Claude Code. Pass CLAUDE_CODE_SESSION_ID from startup context."
)
START_TOOL = "mcp__plugin_deepwork_deepwork__start_workflow"
SYNTAX = {"file_path": "filepath or list of filepaths", "string": "string value"}


class StackEntry(BaseModel):
    workflow: str
    step: str


class ExpectedOutput(BaseModel):
    name: str
    type: str
    description: str
    required: bool
    syntax_for_finished_step_tool: str


class StepInputInfo(BaseModel):
    name: str
    type: str
    description: str
    value: str | list[str] | None
    required: bool


class ActiveStepInfo(BaseModel):
    session_id: str
    step_id: str
    project_root: str
    job_dir: str
    step_expected_outputs: list[ExpectedOutput]
    step_inputs: list[StepInputInfo]
    step_instructions: str
    common_job_info: str


class StartWorkflowResponse(BaseModel):
    important_note: str
    begin_step: ActiveStepInfo
    stack: list[StackEntry]


class FinishedStepResponse(BaseModel):
    status: str
    feedback: str | None = None
    begin_step: ActiveStepInfo | None = None
    summary: str | None = None
    all_outputs: dict[str, str | list[str]] | None = None
    post_workflow_instructions: str | None = None
    stack: list[StackEntry]


class AbortWorkflowResponse(BaseModel):
    aborted_workflow: str
    aborted_step: str
    explanation: str
    stack: list[StackEntry]
    resumed_workflow: str | None
    resumed_step: str | None


class GoToStepResponse(BaseModel):
    begin_step: ActiveStepInfo
    invalidated_steps: list[str]
    stack: list[StackEntry]


class WorkflowInfo(BaseModel):
    name: str
    summary: str
    how_to_invoke: str


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


def step_name(key: str) -> str:
    """A step row's id as the 0.14 wire names it (ids qualified ``workflow.step`` only when a
    job uses one name in two workflows; step names never hold a dot)."""
    return key.rsplit(".", 1)[-1]


def stack(items: Stack) -> list[StackEntry]:
    return [
        StackEntry(workflow=f"{item.job_name}/{item.workflow_name}", step=step_name(item.step_id))
        for item in items
    ]


def how_to_invoke(job: str, workflow: str, agent: str | None) -> str:
    if agent:
        return (
            f'Invoke as an Agent using subagent_type="{agent}" with a prompt giving full '
            f"context needed and instructions to call `{START_TOOL}` "
            f'(job_name="{job}", workflow_name="{workflow}"). If you do not have Agent as an '
            "available tool, invoke the workflow directly."
        )
    return (
        f'Call `{START_TOOL}` with job_name="{job}" and workflow_name="{workflow}", then '
        "follow the step instructions it returns."
    )


def repair_suggestion(job_dir: str) -> str:
    """What to do about a job.yml that fails to load: the file, and the standard job's
    ``repair`` workflow (which also migrates jobs written in the older format), since a
    client's slash command may not be installed."""
    return (
        f"The file to fix is {job_dir}/job.yml. If it was edited in this session, fix it "
        "directly. Otherwise repair the project's jobs, older job formats included, with the "
        'repair workflow: start_workflow with job_name "deepwork_jobs" and workflow_name '
        '"repair".'
    )


def workflows(view: CatalogView, agents: dict[tuple[int, str], str | None]) -> GetWorkflowsResponse:
    """The catalog as 0.14's ``get_workflows``; ``agents`` maps (job pk, workflow) to its
    ``agent`` field."""
    return GetWorkflowsResponse(
        jobs=[
            JobInfo(
                name=job.name,
                summary=job.summary,
                workflows=[
                    WorkflowInfo(
                        name=name,
                        summary=summary,
                        how_to_invoke=how_to_invoke(job.name, name, agents.get((job.pk, name))),
                    )
                    for name, summary in job.workflows
                ],
            )
            for job in view.jobs
        ],
        errors=[
            JobLoadErrorInfo(
                job_name=error.dir_name,
                job_dir=error.job_dir,
                error=f"{error.error}\n{repair_suggestion(error.job_dir)}",
            )
            for error in view.errors
        ],
    )


def _value_text(arg: RtArg, value: Value | None, required: str) -> str:
    if value is None:
        return f"- **{arg.name}** ({required}): {arg.description} — *not yet available*"
    if arg.type == "file_path":
        paths = [value] if isinstance(value, str) else value
        return f"- **{arg.name}** ({required}): " + ", ".join(f"`{p}`" for p in paths)
    return f"- **{arg.name}** ({required}): {value}"


def active_step(begun: Begun) -> ActiveStepInfo:
    step, session = begun.step, begun.session
    text = begun.body
    if step.inputs:
        lines = [
            _value_text(
                arg, begun.input_values.get(arg.name), "required" if arg.required else "optional"
            )
            for arg in step.inputs
        ]
        text = "## Inputs\n\n" + "\n".join(lines) + "\n\n" + begun.body
    return ActiveStepInfo(
        session_id=session.conversation_id,
        step_id=step.name,
        project_root=str(begun.project_root),
        job_dir=session.job.job_dir,
        step_expected_outputs=[
            ExpectedOutput(
                name=arg.name,
                type=arg.type,
                description=arg.description,
                required=arg.required,
                syntax_for_finished_step_tool=SYNTAX[arg.type],
            )
            for arg in step.outputs
        ],
        step_inputs=[
            StepInputInfo(
                name=arg.name,
                type=arg.type,
                description=arg.description,
                value=begun.input_values.get(arg.name),
                required=arg.required,
            )
            for arg in step.inputs
        ],
        step_instructions=text,
        common_job_info=begun.workflow.common_info,
    )


def started(result: Started) -> StartWorkflowResponse:
    return StartWorkflowResponse(
        important_note=IMPORTANT_NOTE,
        begin_step=active_step(result.begun),
        stack=stack(result.stack),
    )


def finished(result: Advanced | Completed) -> FinishedStepResponse:
    # Imported here: the generation reads the database, and this module is imported before
    # the app registry is ready (mcpserve lists its tools first).
    from workflows.generations.v0_14 import Completed

    if isinstance(result, Completed):
        return FinishedStepResponse(
            status="workflow_complete",
            summary=f"Workflow '{result.workflow.name}' completed successfully!",
            all_outputs=result.all_outputs,
            post_workflow_instructions=result.workflow.post_workflow_instructions,
            stack=stack(result.stack),
        )
    return FinishedStepResponse(
        status="next_step", begin_step=active_step(result.begun), stack=stack(result.stack)
    )


def needs_work(result: NeedsWork) -> FinishedStepResponse:
    """0.14 answers ``needs_work`` with one feedback text (its pipeline sends back one)."""
    feedback = "\n\n".join(review.feedback for review in result.failed)
    return FinishedStepResponse(status="needs_work", feedback=feedback, stack=stack(result.stack))


def aborted(result: Aborted) -> AbortWorkflowResponse:
    resumed = result.resumed
    return AbortWorkflowResponse(
        aborted_workflow=f"{result.session.job_name}/{result.session.workflow_name}",
        aborted_step=result.step_name,
        explanation=result.explanation,
        stack=stack(result.stack),
        resumed_workflow=f"{resumed.job_name}/{resumed.workflow_name}" if resumed else None,
        resumed_step=step_name(resumed.current_step_id) if resumed else None,
    )


def went_to_step(result: WentToStep) -> GoToStepResponse:
    return GoToStepResponse(
        begin_step=active_step(result.begun),
        invalidated_steps=list(result.invalidated_steps),
        stack=stack(result.stack),
    )


def soft_error(text: str) -> dict[str, Any]:
    return {"error": text}


class ActiveWorkflowResponse(BaseModel):
    """``get_active_workflow``: where a run is, for an agent that lost its context."""

    generation: str
    session_id: str
    job_name: str
    workflow_name: str
    goal: str
    step_number: int
    total_steps: int
    completed_steps: list[str]
    current_step: dict[str, Any]
    stack: list[StackEntry]


class ValidateStepOutputsResponse(BaseModel):
    """``validate_step_outputs``: what ``finished_step`` would refuse, nothing changed."""

    valid: bool
    step_id: str
    errors: list[str]
