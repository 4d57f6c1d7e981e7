"""The ``deepwork`` tools of a server speaking both generations (``mcpserve --generation both``,
the default).

0.9.1's tools with the union of both generations' parameters, plus 0.14's
``register_session_job``, ``get_session_job`` and ``get_named_schemas``. Each session's
generation is decided at ``start_workflow`` and stored with it: ``instance_id`` means 0.9.1;
``session_id``, ``inputs`` or ``agent_id`` mean 0.14; none of them means 0.9.1 on the
``claude`` platform (a 0.14 Claude client always sends ``session_id``), else 0.14. Later calls
are routed by what they name: 0.14-only parameters (``work_summary``, ``agent_id``) or a
``session_id`` naming a live 0.14 stack go the 0.14 way; everything else is 0.9.1's path,
unchanged. Sessionless tools (``get_workflows``, the review tools) answer in 0.9.1's wording;
a review pass counts under 0.9.1's id and 0.14's alike (``deepreview.beside_review_tasks``).

A 0.9.1-style start while this server has an active 0.14 stack, or a 0.14-style start while
its 0.9.1 stack is not empty, is refused: the two kinds of stacks never nest.
"""

from __future__ import annotations

from typing import Annotated, Any, cast

from fastmcp import Context, FastMCP
from pydantic import Field

from mcp_bridge.runner import LOOSE_OBJECT, tool
from mcp_bridge.state import ServerState
from mcp_bridge.toolsets import hints
from mcp_bridge.toolsets.deepwork import v0_9, v0_14
from mcp_bridge.toolsets.deepwork.common import (
    ABORT_HINTS,
    GO_TO_STEP_HINTS,
    LIST_HINTS,
    START_HINTS,
    AgentId,
    Capture,
    Goal,
    Inputs,
    JobName,
    Override,
    SessionId,
    WorkflowName,
    call,
    conversation,
    fail,
    finish_hints,
    platform,
    shown,
    started_here,
)
from workflows.db import db_sync_to_async
from workflows.dialects import deepwork014 as dialect
from workflows.errors import InvalidInput

# The selectors, services and the later generation read the database: they are imported inside
# the calls, because ``mcpserve`` lists these tools before Django's app registry is ready and runs
# no call until it is (``mcp_bridge.startup``).

BOTH_NOTE = """\
## DeepWork 0.14 clients
This server also speaks DeepWork 0.14: pass `session_id` (your conversation id) and, for
sub-agents, `agent_id` to `start_workflow`, `finished_step`, `abort_workflow` and `go_to_step`;
`inputs` and `work_summary` work as in 0.14, and `register_session_job`, `get_session_job` and
`get_named_schemas` are available."""


# Beyond both releases, for either generation's sessions.
REBIND_TOOLS = ("get_active_workflow", "validate_step_outputs")
TOOL_NAMES = v0_9.TOOL_NAMES + v0_14.SESSION_JOB_TOOLS + REBIND_TOOLS


# --- Calls only the union tools make (sync, for the database thread).


def check_no_conversation_stacks(state: ServerState) -> None:
    from workflows.generations import v0_14 as later_generation
    from workflows.selectors import generations

    project = state.project()
    generations.refuse_nesting_in_conversation_stacks(
        project=project,
        stacks=[
            (
                conversation,
                later_generation.conversation_stack_agent(
                    project=project, conversation_id=conversation
                ),
            )
            for conversation in sorted(started_here(state))
        ],
    )


def names_agent_session(state: ServerState, session_id: str | None) -> bool:
    from workflows.selectors import generations

    return generations.names_agent_session(project=state.project(), session_id=session_id)


def live_conversation(state: ServerState, session_id: str | None, agent_id: str | None) -> bool:
    from workflows.generations import v0_14 as later_generation
    from workflows.selectors import generations

    if not session_id:
        return False
    try:
        key = later_generation.stack_agent_key(
            later_generation.stack_id_clean("session_id", conversation(state, session_id)), agent_id
        )
    except InvalidInput:
        return False
    return generations.names_conversation_stack(
        project=state.project(), session_id=session_id, stack_agent_key=key
    )


def active_workflow(
    state: ServerState, *, session_id: str | None, agent_id: str | None
) -> dialect.ActiveWorkflowResponse:
    from workflows.dialects import deepwork as dialect091
    from workflows.services import active

    if agent_id is None and names_agent_session(state, session_id):
        found = active.active_by_agent(
            project=state.project(), agent=state.agent(), session_id=session_id
        )
        assert found.begun_by_agent is not None
        current = dialect091.begin_step(found.begun_by_agent).model_dump()
        items = dialect091.stack(found.stack)
        stack = [dialect.StackEntry(workflow=i.workflow, step=i.step) for i in items]
    else:
        if session_id is None:
            raise InvalidInput("agent_id needs the session_id of its conversation")
        found = active.active_by_conversation(
            project=state.project(),
            conversation_id=conversation(state, session_id),
            agent_id=agent_id,
        )
        assert found.begun_by_conversation is not None
        current = shown(state, dialect.active_step(found.begun_by_conversation)).model_dump()
        stack = dialect.stack(found.stack)
    session = found.session
    return dialect.ActiveWorkflowResponse(
        generation=session.generation,
        session_id=state.session_id_shown(session.conversation_id)
        if session.conversation_id
        else session.session_id,
        job_name=session.job_name,
        workflow_name=session.workflow_name,
        goal=session.goal,
        step_number=found.step_number,
        total_steps=found.total_steps,
        completed_steps=list(found.completed_steps),
        current_step=current,
        stack=stack,
    )


def validate_outputs(
    state: ServerState,
    *,
    outputs: dict[str, str | list[str]],
    session_id: str | None,
    agent_id: str | None,
) -> dialect.ValidateStepOutputsResponse:
    from workflows.services import active

    if agent_id is None and names_agent_session(state, session_id):
        result = active.validate_by_agent(
            project=state.project(), agent=state.agent(), outputs=outputs, session_id=session_id
        )
    else:
        if session_id is None:
            raise InvalidInput("agent_id needs the session_id of its conversation")
        result = active.validate_by_conversation(
            project=state.project(),
            conversation_id=conversation(state, session_id),
            agent_id=agent_id,
            outputs=outputs,
        )
    return dialect.ValidateStepOutputsResponse(
        valid=not result.errors, step_id=result.step_id, errors=list(result.errors)
    )


def register_both(mcp: FastMCP, state: ServerState, prefix: str = "") -> None:
    """0.9.1's tools with both generations' parameters, routed per call; plus the 0.14-only
    session-job and schema tools."""
    # 0.9.1's own tool functions, registered on a private server: its path runs unchanged.
    legacy = Capture()
    v0_9.register(cast(FastMCP, legacy), state)
    legacy_fn = legacy.fns

    @tool(
        mcp,
        name=f"{prefix}get_workflows",
        annotations=LIST_HINTS,
        output_schema=LOOSE_OBJECT,
    )
    async def get_workflows() -> Any:
        """List every available job and its workflows. Call this first, before starting any
        workflow, to learn the exact job and workflow names. Jobs whose job.yml fails to load
        are listed under `errors` with the reason."""
        return await legacy_fn["get_workflows"]()

    @tool(mcp, name=f"{prefix}start_workflow", annotations=START_HINTS, output_schema=LOOSE_OBJECT)
    async def start_workflow(
        goal: Goal,
        job_name: JobName,
        workflow_name: WorkflowName,
        instance_id: Annotated[
            str | None,
            Field(description="DeepWork 0.9.1: optional label for this run, e.g. 'acme'."),
        ] = None,
        session_id: SessionId = None,
        inputs: Inputs = None,
        agent_id: AgentId = None,
    ) -> Any:
        """Start a workflow and get its first step: instructions, expected outputs and what
        it must pass. DeepWork 0.9.1 clients call it as before; DeepWork 0.14 clients pass
        `session_id` (and `inputs`, `agent_id`) and get 0.14's answers for that workflow.
        Starting while another workflow is active nests the new one on top of the stack."""
        name = f"{prefix}start_workflow"
        later = any(v is not None for v in (session_id, inputs, agent_id))
        if instance_id is not None and later:
            raise fail(
                name,
                "instance_id belongs to DeepWork 0.9.1 calls and session_id, inputs and "
                "agent_id to DeepWork 0.14 calls; a call cannot mix them",
            )
        if instance_id is None and not later and platform(state) != "claude":
            later = True
        if not later:
            if started_here(state):
                await call(state, name, {}, lambda: check_no_conversation_stacks(state))
            return await legacy_fn["start_workflow"](
                goal=goal, job_name=job_name, workflow_name=workflow_name, instance_id=instance_id
            )
        return await call(
            state,
            name,
            {"job_name": job_name, "workflow_name": workflow_name, "session_id": session_id},
            lambda: v0_14.start_call(
                state,
                goal=goal,
                job_name=job_name,
                workflow_name=workflow_name,
                session_id=session_id,
                inputs=inputs,
                agent_id=agent_id,
                mixed_check=True,
            ),
        )

    async def routes_by_conversation(
        session_id: str | None, agent_id: str | None, only_later: bool
    ) -> bool:
        if only_later:
            return True
        if not session_id:
            # A 0.9.1 call on the top of the stack: answered without a hop to the database
            # thread, which costs more than the rest of a short 0.9.1 call's routing.
            return False
        return bool(await db_sync_to_async(live_conversation)(state, session_id, None))

    @tool(
        mcp,
        name=f"{prefix}finished_step",
        # A 0.14 session's hand-in builds review tasks whose rules may run commands.
        annotations=finish_hints(open_world=True),
        output_schema=LOOSE_OBJECT,
    )
    async def finished_step(
        outputs: Annotated[
            dict[str, str | list[str]],
            Field(
                description="Output name -> path(s) relative to the project root (a `file` or "
                "`file_path` output takes a path, a `files` output a list of paths), or the "
                "value itself for a `string` output. Outputs marked required=false may be "
                "left out."
            ),
        ],
        notes: Annotated[
            str | None, Field(description="DeepWork 0.9.1: notes about the work done.")
        ] = None,
        quality_review_override_reason: Override = None,
        session_id: Annotated[
            str | None,
            Field(
                description="DeepWork 0.9.1: the session to act on (from "
                "begin_step.session_id), by default the top of your stack. DeepWork 0.14: "
                "your conversation id, which names your stack."
            ),
        ] = None,
        work_summary: Annotated[
            str | None,
            Field(
                description="DeepWork 0.14: what you did in this step, checked against its "
                "process requirements (a 0.9.1 session takes `notes`)."
            ),
        ] = None,
        agent_id: AgentId = None,
        ctx: Context = None,  # type: ignore[assignment]  # FastMCP injects it
    ) -> Any:
        """Report that the current step is done and hand in its outputs. The answer's
        `status` says what next: `needs_work` (fix what `feedback` says and call again),
        `next_step` (follow `begin_step`) or `workflow_complete` (done; see `all_outputs`)."""
        name = f"{prefix}finished_step"
        only_later = work_summary is not None or agent_id is not None
        if not await routes_by_conversation(session_id, agent_id, only_later):
            return await legacy_fn["finished_step"](
                outputs=outputs,
                notes=notes,
                quality_review_override_reason=quality_review_override_reason,
                session_id=session_id,
                ctx=ctx,
            )
        if not session_id:
            # Refused as an error: this server is not 0.14's wire, whose answer here is a
            # plain result holding the text.
            raise fail(name, dialect.SESSION_ID_REQUIRED)
        await v0_14.schemas_checked_ahead(
            state, session_id=session_id, agent_id=agent_id, outputs=outputs
        )
        return await call(
            state,
            name,
            {"outputs": outputs, "session_id": session_id},
            lambda: v0_14.finish_call(
                state,
                session_id=session_id,
                agent_id=agent_id,
                outputs=outputs,
                work_summary=work_summary if work_summary is not None else notes,
                override_reason=quality_review_override_reason,
            ),
        )

    @tool(mcp, name=f"{prefix}abort_workflow", annotations=ABORT_HINTS, output_schema=LOOSE_OBJECT)
    async def abort_workflow(
        explanation: Annotated[str, Field(description="Why the workflow is being aborted.")],
        session_id: Annotated[
            str | None,
            Field(
                description="DeepWork 0.9.1: the session to abort, by default the top of your "
                "stack. DeepWork 0.14: your conversation id; its top workflow is aborted."
            ),
        ] = None,
        agent_id: AgentId = None,
    ) -> Any:
        """Abort a workflow that cannot be completed. The session is marked aborted with your
        explanation and the workflow below it on the stack, if any, resumes."""
        if not await routes_by_conversation(session_id, agent_id, agent_id is not None):
            return await legacy_fn["abort_workflow"](explanation=explanation, session_id=session_id)
        if not session_id:
            raise fail(f"{prefix}abort_workflow", dialect.SESSION_ID_REQUIRED)
        return await call(
            state,
            f"{prefix}abort_workflow",
            {"session_id": session_id},
            lambda: v0_14.abort_call(
                state, session_id=session_id, agent_id=agent_id, explanation=explanation
            ),
        )

    @tool(mcp, name=f"{prefix}go_to_step", annotations=GO_TO_STEP_HINTS, output_schema=LOOSE_OBJECT)
    async def go_to_step(
        step_id: Annotated[str, Field(description="The earlier step to return to.")],
        session_id: Annotated[
            str | None,
            Field(
                description="DeepWork 0.9.1: the session to act on, by default the top of "
                "your stack. DeepWork 0.14: your conversation id."
            ),
        ] = None,
        agent_id: AgentId = None,
    ) -> Any:
        """Return the active workflow to an earlier step (or restart the current one) to redo
        work. Progress from that step on is discarded (files are kept) and the step's
        instructions are returned; you cannot skip forward."""
        if not await routes_by_conversation(session_id, agent_id, agent_id is not None):
            return await legacy_fn["go_to_step"](step_id=step_id, session_id=session_id)
        if not session_id:
            raise fail(f"{prefix}go_to_step", dialect.SESSION_ID_REQUIRED)
        return await call(
            state,
            f"{prefix}go_to_step",
            {"step_id": step_id, "session_id": session_id},
            lambda: v0_14.go_to_step_call(
                state, session_id=session_id, agent_id=agent_id, step_id=step_id
            ),
        )

    v0_14.register_session_tools(mcp, state, prefix)

    @tool(
        mcp,
        name=f"{prefix}get_active_workflow",
        output_schema=LOOSE_OBJECT,
        annotations=hints.reads("Show the active workflow"),
    )
    async def get_active_workflow(
        session_id: Annotated[
            str | None,
            Field(
                description="DeepWork 0.14: your conversation id. DeepWork 0.9.1: a session id; "
                "omit it for the top of your stack."
            ),
        ] = None,
        agent_id: AgentId = None,
    ) -> dialect.ActiveWorkflowResponse:
        """Find your place again after losing context (compaction, restart): the active
        workflow's goal, step n of N, the completed steps and the current step with its
        instructions and expected outputs, in one call. Changes nothing."""
        return await call(
            state,
            f"{prefix}get_active_workflow",
            {"session_id": session_id, "agent_id": agent_id},
            lambda: active_workflow(state, session_id=session_id, agent_id=agent_id),
        )

    @tool(
        mcp,
        name=f"{prefix}validate_step_outputs",
        output_schema=LOOSE_OBJECT,
        annotations=hints.reads("Check a step's outputs"),
    )
    async def validate_step_outputs(
        outputs: Annotated[
            dict[str, str | list[str]],
            Field(description="The outputs you would hand to finished_step."),
        ],
        session_id: Annotated[
            str | None,
            Field(
                description="DeepWork 0.14: your conversation id. DeepWork 0.9.1: a session id; "
                "omit it for the top of your stack."
            ),
        ] = None,
        agent_id: AgentId = None,
    ) -> dialect.ValidateStepOutputsResponse:
        """Check outputs the way finished_step would (names, required outputs, files,
        string values, json_schema) without handing them in: a dry run that changes nothing
        and runs no review. `valid` is true when finished_step would accept them."""
        return await call(
            state,
            f"{prefix}validate_step_outputs",
            {"session_id": session_id},
            lambda: validate_outputs(
                state, outputs=outputs, session_id=session_id, agent_id=agent_id
            ),
        )
