"""DeepWork 0.9.1's five workflow tools (``mcpserve --generation 0.9``), in its wording.

Tools are thin: parse, call the session service or the finish pipeline on the database thread
(``common.call``), and answer with what the DeepWork dialect (``workflows.dialects.deepwork``)
renders from its domain result.

The dialect and the finish pipeline read the database, so they are imported inside the tools:
``mcpserve`` lists these tools before Django's app registry is ready, and no call runs until it
is (``mcp_bridge.startup``).
"""

from __future__ import annotations

import logging
from typing import Annotated, Any

from fastmcp import Context, FastMCP
from pydantic import Field

from mcp_bridge.runner import LOOSE_OBJECT, tool
from mcp_bridge.state import ServerState, log_call
from mcp_bridge.toolsets.deepwork.common import (
    ABORT_HINTS,
    GO_TO_STEP_HINTS,
    LIST_HINTS,
    START_HINTS,
    Goal,
    JobName,
    WorkflowName,
    call,
    fail,
    finish_hints,
)
from workflows.db import BUSY_MESSAGE, db_sync_to_async, is_busy
from workflows.errors import WorkflowError
from workflows.schemas import (
    AbortWorkflowResponse,
    FinishedStepResponse,
    GetWorkflowsResponse,
    GoToStepResponse,
    StartWorkflowResponse,
)

logger = logging.getLogger("deepwork.mcp")

TOOL_NAMES = ("get_workflows", "start_workflow", "finished_step", "abort_workflow", "go_to_step")

INSTRUCTIONS = """\
# DeepWork Workflow Server

This server runs multi-step workflows ("jobs") defined in the project's `.deepwork/jobs`.
Each step tells you what to do and which output files to hand in; the server checks those
outputs and, where the job asks for it, has them reviewed before you may move on.

## Workflow
1. **Discover**: call `get_workflows` to see the jobs and their workflows.
2. **Start**: call `start_workflow` with a clear `goal`, the `job_name` and the `workflow_name`.
   The answer holds the first step's instructions and its expected outputs.
3. **Execute**: follow the step's instructions and create its output files.
4. **Checkpoint**: call `finished_step` with the outputs (paths relative to the project root).
5. **Iterate**: on `needs_work`, read the feedback, fix the outputs and call `finished_step` again.
6. **Continue**: on `next_step`, carry on with the instructions in `begin_step`.
7. **Complete**: on `workflow_complete` the workflow is done; `all_outputs` lists every output.

## Quality Gates
Steps with reviews are judged against their quality criteria when you call `finished_step`.
A failed review answers `needs_work` with feedback explaining what to fix.

## Nested Workflows
Starting a workflow while another is active puts it on top of a stack. Every answer carries
`stack`, entries of the form `{workflow: "job/workflow", step: "current_step"}`, bottom to top.
When the top workflow completes it is removed and the one below resumes. Pass `session_id` to
act on a session that is not on top.

## Aborting Workflows
`abort_workflow` marks the session aborted, records your explanation and resumes the
workflow below it, if any.

## Going Back
`go_to_step` returns the active workflow to an earlier step, discarding the progress after it.

## Best Practices
- Call `get_workflows` first; do not guess job or workflow names.
- Give a specific goal, and an `instance_id` when you run the same workflow for several things.
- Create every required output before calling `finished_step`.
- Read `needs_work` feedback carefully and fix what it names.
- Check `stack` to know where you are.
- Abort a workflow you cannot finish instead of leaving it half done.
"""


def _stack(answer: Any) -> Any:
    """The caller's stack in an answer, for the call log."""
    return getattr(answer, "stack", None)


def register(mcp: FastMCP, state: ServerState, prefix: str = "") -> None:
    """Put the five workflow tools on ``mcp``, each named ``prefix + name``."""
    listed: list[tuple[object, GetWorkflowsResponse]] = []

    def workflows() -> GetWorkflowsResponse:
        """The get_workflows answer for the catalog as it is, built once per catalog view."""
        from workflows.dialects import deepwork

        view = state.catalog().view()
        if not listed or listed[0][0] is not view:
            listed[:] = [(view, deepwork.workflows(view))]
        return listed[0][1]

    def acted_on(session_id: str | None) -> dict[str, Any]:
        state.session_check(session_id)
        return {"project": state.project(), "agent": state.agent(), "session_id": session_id}

    @tool(
        mcp,
        name=f"{prefix}get_workflows",
        annotations=LIST_HINTS,
        output_schema=LOOSE_OBJECT,
    )
    async def get_workflows() -> GetWorkflowsResponse:
        """List every available job and its workflows. Call this first, before starting any
        workflow, to learn the exact job and workflow names. Jobs whose job.yml fails to load
        are listed under `errors` with the reason."""
        # While no job file changed, the answer already built is the answer: no trip to the
        # database thread.
        view = state.catalog_if_unchanged()
        if view is not None and listed and listed[0][0] is view:
            log_call(state, f"{prefix}get_workflows", {})
            return listed[0][1]
        return await call(state, f"{prefix}get_workflows", {}, workflows, stack=_stack)

    @tool(
        mcp,
        name=f"{prefix}start_workflow",
        annotations=START_HINTS,
        output_schema=LOOSE_OBJECT,
    )
    async def start_workflow(
        goal: Goal,
        job_name: JobName,
        workflow_name: WorkflowName,
        instance_id: Annotated[
            str | None,
            Field(description="Optional label for this run, e.g. 'acme' or 'q1-2026'."),
        ] = None,
    ) -> StartWorkflowResponse:
        """Start a workflow and get its first step: instructions, expected outputs (with the
        value syntax `finished_step` wants for each) and the reviews it must pass. Starting
        while another workflow is active nests the new one on top of the stack; finishing it
        resumes the one below."""
        from workflows.dialects import deepwork

        params = {"job_name": job_name, "workflow_name": workflow_name, "instance_id": instance_id}
        return await call(
            state,
            f"{prefix}start_workflow",
            params,
            lambda: deepwork.start_workflow(
                project=state.project(),
                agent=state.agent(),
                catalog=state.catalog().view(),
                job_name=job_name,
                workflow_name=workflow_name,
                goal=goal,
                instance_id=instance_id,
            ),
            stack=_stack,
        )

    @tool(
        mcp,
        name=f"{prefix}finished_step",
        # 0.9.1's gate runs no review rule's command, only a reviewer the server was told
        # to run (--external-runner).
        annotations=finish_hints(
            open_world=state.gate is not None and state.gate.reviewer is not None
        ),
        output_schema=LOOSE_OBJECT,
    )
    async def finished_step(
        outputs: Annotated[
            dict[str, str | list[str]],
            Field(
                description="Output name -> path(s) relative to the project root. A `file` "
                "output takes one path string; a `files` output takes a list of paths. "
                "Outputs marked required=false may be left out."
            ),
        ],
        notes: Annotated[
            str | None, Field(description="Optional notes about the work done.")
        ] = None,
        quality_review_override_reason: Annotated[
            str | None,
            Field(
                description="Skips the quality review when given; say why (e.g. the outcome "
                "of your own review)."
            ),
        ] = None,
        session_id: Annotated[
            str | None,
            Field(
                description="The session to act on (from begin_step.session_id). Defaults to "
                "the top of your stack."
            ),
        ] = None,
        ctx: Context = None,  # type: ignore[assignment]  # FastMCP injects it
    ) -> FinishedStepResponse:
        """Report that the current step is done and hand in its outputs. The answer's
        `status` says what next: `needs_work` (fix what `feedback` says and call again),
        `next_step` (follow `begin_step`) or `workflow_complete` (done; see `all_outputs`)."""
        from reviews.services import step_finish_gated
        from workflows.dialects import deepwork

        tool = f"{prefix}finished_step"
        params = {"outputs": outputs, "session_id": session_id}

        async def progress(done: float, total: float, message: str) -> None:
            await ctx.report_progress(done, total, message)

        # Not retried: a review may already have run when the database turns out busy, and
        # running it again is the agent's choice, not ours.
        try:
            if not state.ready():
                await db_sync_to_async(state.agent)()
            if session_id is not None:
                await db_sync_to_async(state.session_check)(session_id)
            outcome = await step_finish_gated(
                project=state.project(),
                agent=state.agent(),
                gate=state.gate,
                outputs=outputs,
                notes=notes,
                override_reason=quality_review_override_reason,
                session_id=session_id,
                progress=progress,
            )
            answer = deepwork.finished_step(outcome)
        except WorkflowError as exc:
            log_call(state, tool, params)
            raise fail(tool, exc) from None
        except Exception as exc:
            if not is_busy(exc):
                raise
            logger.warning("Database busy during %s: %s", tool, exc)
            log_call(state, tool, params)
            raise fail(tool, BUSY_MESSAGE) from None
        log_call(state, tool, params, answer.stack)
        return answer

    @tool(
        mcp,
        name=f"{prefix}abort_workflow",
        annotations=ABORT_HINTS,
        output_schema=LOOSE_OBJECT,
    )
    async def abort_workflow(
        explanation: Annotated[str, Field(description="Why the workflow is being aborted.")],
        session_id: Annotated[
            str | None,
            Field(description="The session to abort. Defaults to the top of your stack."),
        ] = None,
    ) -> AbortWorkflowResponse:
        """Abort a workflow that cannot be completed. The session is marked aborted with your
        explanation and the workflow below it on the stack, if any, resumes."""
        from workflows.dialects import deepwork

        return await call(
            state,
            f"{prefix}abort_workflow",
            {"session_id": session_id},
            lambda: deepwork.abort_workflow(explanation=explanation, **acted_on(session_id)),
            stack=_stack,
        )

    @tool(
        mcp,
        name=f"{prefix}go_to_step",
        annotations=GO_TO_STEP_HINTS,
        output_schema=LOOSE_OBJECT,
    )
    async def go_to_step(
        step_id: Annotated[str, Field(description="The earlier step to return to.")],
        session_id: Annotated[
            str | None,
            Field(description="The session to act on. Defaults to the top of your stack."),
        ] = None,
    ) -> GoToStepResponse:
        """Return the active workflow to an earlier step (or restart the current one) to redo
        work. Progress from that step on is discarded (files are kept) and the step's
        instructions are returned; you cannot skip forward."""
        from workflows.dialects import deepwork

        return await call(
            state,
            f"{prefix}go_to_step",
            {"step_id": step_id, "session_id": session_id},
            lambda: deepwork.go_to_step(step_id=step_id, **acted_on(session_id)),
            stack=_stack,
        )
