"""The ``agents`` toolset: multi-agent DAG workflows.

Seven tools with the exact names and input schemas agents already know (``define_workflow``,
``get_workflow_details``, ``list_workflows``, ``delete_workflow``, ``execute_workflow``,
``report_step_completion``, ``report_step_failure``), plus what agents need to take part:
``register_agent``, ``heartbeat``, ``get_my_assignments`` and ``await_assignment`` (a long poll
that answers as soon as a step is handed to the agent), and ``get_step_result`` (one step's
result, paged, for results too big to show with the workflow). Tools are thin: parse, call one
service or selector in the database thread, answer a pydantic model; refusals are
``ToolError`` with the engine's exact message.

Why long: one dialect's tools with their long annotated signatures and exact input
schemas; each tool is a thin call into the DAG services.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Annotated, Any, NoReturn, TypeVar

from django.conf import settings
from django.utils import timezone
from fastmcp import Context, FastMCP
from fastmcp.tools.function_tool import FunctionTool
from mcp.types import ToolAnnotations
from pydantic import Field

from dag import selectors, services
from dag.schemas import (
    DagAgentOut,
    DagAssignment,
    DagAssignmentsResponse,
    DagDefineResponse,
    DagDelegatedOut,
    DagDeleteResponse,
    DagExecuteResponse,
    DagIssueOut,
    DagListResponse,
    DagReportResponse,
    DagStepResultOut,
    DagWorkflowOut,
    DagWorkflowSummary,
)
from mcp_bridge.runner import described
from mcp_bridge.state import ServerState
from mcp_bridge.toolsets import hints
from mcp_bridge.toolsets.calls import Refusal, db_tool_call, refusal_error
from mcp_bridge.toolsets.specs import AGENTS_INSTRUCTIONS as INSTRUCTIONS  # noqa: F401  # its name here
from mcp_bridge.toolsets.specs import AGENTS_TOOL_NAMES as TOOL_NAMES  # noqa: F401
from workflows.db import db_sync_to_async
from workflows.liveness import liveness, process_lease_seconds, responsive_seconds

logger = logging.getLogger("deepwork.mcp")

T = TypeVar("T")


# The input schemas of those seven tools, advertised word for word so agents written for them
# keep working; arguments are checked by the functions' own signatures and then by the engine,
# whose errors name the rule broken.
_STEP_ITEM = {
    "type": "object",
    "properties": {
        "step_id": {
            "type": "string",
            "description": "Unique identifier for this step within the workflow.",
        },
        "description": {"type": "string", "description": "Description of the task for this step."},
        "assigned_role": {
            "type": "string",
            "description": "Optional: Role required to perform this step.",
        },
        "assigned_agent_id": {
            "type": "string",
            "description": "Optional: Specific agent ID assigned to this step.",
        },
        "depends_on": {
            "type": "array",
            "items": {"type": "string"},
            "description": "Optional: List of step_ids that must be completed before this step "
            "can start.",
        },
        "tool_to_call": {
            "type": "string",
            "description": "Optional: Specific tool to execute for this step.",
        },
        "tool_arguments": {
            "type": "object",
            "additionalProperties": True,
            "description": "Arguments for the tool, if specified.",
        },
    },
    "required": ["step_id", "description"],
}
TOOL_SCHEMAS: dict[str, dict[str, Any]] = {
    "define_workflow": {
        "type": "object",
        "properties": {
            "creator_id": {"type": "string", "description": "Your unique Agent ID."},
            "name": {"type": "string", "description": "A descriptive name for the workflow."},
            "description": {
                "type": "string",
                "description": "Optional detailed description of the workflow's purpose.",
            },
            "steps": {
                "type": "array",
                "minItems": 1,
                "description": "An ordered list of steps defining the workflow.",
                "items": _STEP_ITEM,
            },
            # Our addition: how the workflow's own tool (workflow-tools toolset) runs it.
            "execution_type": {
                "type": "string",
                "enum": ["sync", "async"],
                "description": "Optional: how the workflow's tool in the workflow-tools toolset "
                "runs it: 'sync' waits for every step's result, 'async' (default) answers a "
                "run_id at once.",
            },
        },
        "required": ["creator_id", "name", "steps"],
    },
    "get_workflow_details": {
        "type": "object",
        "properties": {
            "workflow_id": {
                "type": "string",
                "description": "The ID of the workflow to retrieve details for.",
            }
        },
        "required": ["workflow_id"],
    },
    "list_workflows": {
        "type": "object",
        "properties": {
            "creator_id": {
                "type": "string",
                "description": "Optional: Filter workflows by creator agent ID.",
            }
        },
    },
    "delete_workflow": {
        "type": "object",
        "properties": {
            "workflow_id": {"type": "string", "description": "The ID of the workflow to delete."},
            "requesting_agent_id": {
                "type": "string",
                "description": "Your unique Agent ID (must be the workflow creator).",
            },
            # Our addition: a running workflow is deleted only when asked explicitly.
            "force": {
                "type": "boolean",
                "description": "Optional: also delete a running workflow (its agents' reports "
                "are then refused). Default false.",
            },
        },
        "required": ["workflow_id", "requesting_agent_id"],
    },
    "execute_workflow": {
        "type": "object",
        "properties": {
            "workflow_id": {
                "type": "string",
                "description": "The ID of the workflow to start executing.",
            },
            "triggering_agent_id": {
                "type": "string",
                "description": "Your unique Agent ID initiating the execution.",
            },
        },
        "required": ["workflow_id", "triggering_agent_id"],
    },
    "report_step_completion": {
        "type": "object",
        "properties": {
            "workflow_id": {
                "type": "string",
                "description": "ID of the workflow containing the step.",
            },
            "step_id": {
                "type": "string",
                "description": "ID of the step being reported as complete.",
            },
            "agent_id": {
                "type": "string",
                "description": "Your unique Agent ID reporting completion.",
            },
            "result": {
                "description": "Optional: The output or result produced by the step.",
                "anyOf": [
                    {"type": "object"},
                    {"type": "array"},
                    {"type": "string"},
                    {"type": "number"},
                    {"type": "boolean"},
                    {"type": "null"},
                ],
            },
        },
        "required": ["workflow_id", "step_id", "agent_id"],
    },
    "report_step_failure": {
        "type": "object",
        "properties": {
            "workflow_id": {
                "type": "string",
                "description": "ID of the workflow containing the step.",
            },
            "step_id": {
                "type": "string",
                "description": "ID of the step being reported as failed.",
            },
            "agent_id": {
                "type": "string",
                "description": "Your unique Agent ID reporting the failure.",
            },
            "error_message": {
                "type": "string",
                "description": "A description of the error that occurred.",
            },
        },
        "required": ["workflow_id", "step_id", "agent_id", "error_message"],
    },
}


def _delegation(advance: services.Advance) -> tuple[list[DagDelegatedOut], list[DagIssueOut]]:
    return (
        [DagDelegatedOut(step_id=d.step_id, agent_id=d.agent_id) for d in advance.delegated],
        [DagIssueOut(step_id=i.step_id, reason=i.reason) for i in advance.issues],
    )


def _steps_phrase(n: int) -> str:
    return f"{n} step{'' if n == 1 else 's'}"


def _refused(refusal: Refusal) -> NoReturn:
    raise refusal_error(refusal.message)


async def _db(state: ServerState, tool: str, params: dict[str, Any], fn: Callable[[], T]) -> T:
    """``fn`` through the one database-call path; refusals become ``ToolError`` with the
    engine's message."""
    return await db_tool_call(state, tool, params, fn, refused=_refused)


def _targeting(state: ServerState, steps: list[Any]) -> list[Any]:
    """``steps`` with each ``assigned_agent_id`` meaning what the caller's state says it does
    (over ``/mcp``, a bare name is a sub-agent of the caller's token); anything else malformed
    is left for the engine to refuse."""
    scoped = []
    for step in steps:
        target = step.get("assigned_agent_id") if isinstance(step, dict) else None
        # Empty means nobody in particular; "user:<name>" is a person, not an agent.
        if isinstance(target, str) and target and not target.startswith(services.USER_PREFIX):
            step = {**step, "assigned_agent_id": state.target_agent_id(target)}
        scoped.append(step)
    return scoped


def _register(mcp: FastMCP, fn: Callable[..., Any], name: str, **options: Any) -> None:
    """Register ``fn`` as ``name`` with its docstring and its ``TOOL_SCHEMAS`` entry, if any."""
    with described(fn) as description:
        registered = FunctionTool.from_function(fn, name=name, description=description, **options)
    schema = TOOL_SCHEMAS.get(fn.__name__)
    if schema is not None:
        registered.parameters = schema
    mcp.add_tool(registered)


def register(mcp: FastMCP, state: ServerState, prefix: str = "") -> None:
    """Put the agents toolset's tools on ``mcp``, each named ``prefix + name``."""

    async def define_workflow(
        creator_id: str,
        name: str,
        steps: list[Any],
        description: str | None = None,
        execution_type: str | None = None,
    ) -> DagDefineResponse:
        """Define a new multi-step workflow whose steps other agents will do. Each step has a
        unique `step_id`, a `description`, and optionally `assigned_role` (any responsive agent
        with that role may get it), `assigned_agent_id` (only that agent gets it), `depends_on`
        (step_ids that must complete first; no cycles), and `tool_to_call` with
        `tool_arguments` (an object) for the agent to run. Returns the stored workflow (status
        `pending`) with its `workflow_id`, plus warnings for roles or agents nobody has
        registered yet. Start it with `execute_workflow`. With the workflow-tools toolset it
        is also a tool of its own until it runs; `execution_type` `sync` makes that tool wait
        for the results (default `async`: it answers a run id)."""

        def call() -> DagDefineResponse:
            project = state.project()
            defined = services.dag_define(
                project=project,
                creator_id=state.acting_agent_id(creator_id),
                name=name,
                description=description,
                steps=_targeting(state, steps),
                execution_type=execution_type,
            )
            details = selectors.dag_details(job=defined.job)
            return DagDefineResponse(
                message=f"Workflow {details['workflow_id']!r} defined with "
                f"{_steps_phrase(details['step_count'])}; status pending. Start it with "
                "execute_workflow.",
                workflow=DagWorkflowOut.model_validate(details),
                warnings=defined.warnings,
            )

        return await _db(state, "define_workflow", {"name": name}, call)

    async def get_workflow_details(workflow_id: str) -> DagWorkflowOut:
        """The full stored workflow: its definition and status, and every step with its
        status (`pending`, `in_progress`, `completed`, `failed`), agent, result or error and
        timing."""

        def call() -> DagWorkflowOut:
            job = services.dag_job(project=state.project(), workflow_id=workflow_id)
            return DagWorkflowOut.model_validate(selectors.dag_details(job=job))

        return await _db(state, "get_workflow_details", {"workflow_id": workflow_id}, call)

    async def get_step_result(
        workflow_id: Annotated[str, Field(description="The workflow holding the step.")],
        step_id: Annotated[str, Field(description="The step whose result to read.")],
        offset: Annotated[
            int,
            Field(
                ge=0, le=2**62, description="Where to start in the result's JSON text (default 0)."
            ),
        ] = 0,
    ) -> DagStepResultOut:
        """One step's reported result as its JSON text, a page at a time: for results too big
        to show in `get_workflow_details`, `get_my_assignments` or a run's status. Call again
        with `next_offset` until it is null, join the pages and parse them."""

        def call() -> DagStepResultOut:
            job = services.dag_job(project=state.project(), workflow_id=workflow_id)
            return DagStepResultOut.model_validate(
                selectors.dag_step_result(job=job, step_id=step_id, offset=offset)
            )

        params = {"workflow_id": workflow_id, "step_id": step_id, "offset": offset}
        return await _db(state, "get_step_result", params, call)

    async def list_workflows(creator_id: str | None = None) -> DagListResponse:
        """Summaries of the defined workflows (id, name, creator, step count, status), newest
        first; only one creator's with `creator_id`."""

        def call() -> DagListResponse:
            rows = selectors.dag_summaries(
                project=state.project(),
                creator_id=None if creator_id is None else state.target_agent_id(creator_id),
            )
            return DagListResponse(
                workflows=[DagWorkflowSummary.model_validate(row) for row in rows], count=len(rows)
            )

        return await _db(state, "list_workflows", {"creator_id": creator_id}, call)

    async def delete_workflow(
        workflow_id: str, requesting_agent_id: str, force: bool = False
    ) -> DagDeleteResponse:
        """Delete a workflow and its execution. Only its creator may; a running workflow only
        with `force` true (its agents' later reports are refused)."""

        def call() -> DagDeleteResponse:
            status = services.dag_delete(
                project=state.project(),
                workflow_id=workflow_id,
                requesting_agent_id=state.acting_agent_id(requesting_agent_id),
                force=force,
            )
            return DagDeleteResponse(
                message=f"Workflow {workflow_id!r} ({status}) deleted.", workflow_id=workflow_id
            )

        return await _db(state, "delete_workflow", {"workflow_id": workflow_id}, call)

    async def execute_workflow(workflow_id: str, triggering_agent_id: str) -> DagExecuteResponse:
        """Start a defined workflow (it runs once): its status becomes `running` and the steps
        without dependencies are handed to agents. Returns the steps delegated and any issues,
        e.g. no responsive agent with a step's role: such a step waits and is handed out as
        soon as a suitable agent registers or heartbeats."""

        def call() -> DagExecuteResponse:
            advance = services.dag_execute(
                project=state.project(),
                workflow_id=workflow_id,
                triggering_agent_id=state.acting_agent_id(triggering_agent_id),
            )
            delegated, issues = _delegation(advance)
            return DagExecuteResponse(
                message=f"Workflow {workflow_id!r} started: "
                f"{_steps_phrase(len(delegated))} delegated"
                + (f", {len(issues)} waiting for an agent" if issues else ""),
                workflow_id=workflow_id,
                status=advance.status,
                delegated=delegated,
                issues=issues,
            )

        return await _db(state, "execute_workflow", {"workflow_id": workflow_id}, call)

    def _report_answer(report: services.Report, verb: str) -> DagReportResponse:
        delegated, issues = _delegation(report.advance)
        if report.already:
            message = report.note
        else:
            message = f"Step {report.step_id!r} {verb}; workflow is {report.status}"
            if delegated:
                message += f"; {_steps_phrase(len(delegated))} delegated next"
        return DagReportResponse(
            message=message,
            workflow_id=report.workflow_id,
            step_id=report.step_id,
            workflow_status=report.status,
            already_reported=report.already,
            delegated=delegated,
            issues=issues,
        )

    async def report_step_completion(
        workflow_id: str, step_id: str, agent_id: str, result: Any = None
    ) -> DagReportResponse:
        """Report that you completed a step assigned to you, with its `result` (any JSON
        value; agents doing the steps that depend on it receive it). The server then hands
        out the steps that became ready. Only the step's assigned agent may report; a repeated
        report changes nothing and says so."""

        def call() -> DagReportResponse:
            project = state.project()
            report = services.dag_report_completion(
                project=project,
                workflow_id=workflow_id,
                step_id=step_id,
                agent_id=state.acting_agent_id(agent_id),
                result=result,
            )
            return _report_answer(report, "completed")

        params = {"workflow_id": workflow_id, "step_id": step_id, "agent_id": agent_id}
        return await _db(state, "report_step_completion", params, call)

    async def report_step_failure(
        workflow_id: str, step_id: str, agent_id: str, error_message: str
    ) -> DagReportResponse:
        """Report that a step assigned to you failed, saying why. The whole workflow fails
        (fail-fast): no further steps are handed out and later reports change nothing."""

        def call() -> DagReportResponse:
            report = services.dag_report_failure(
                project=state.project(),
                workflow_id=workflow_id,
                step_id=step_id,
                agent_id=state.acting_agent_id(agent_id),
                error_message=error_message,
            )
            return _report_answer(report, "failed")

        params = {"workflow_id": workflow_id, "step_id": step_id, "agent_id": agent_id}
        return await _db(state, "report_step_failure", params, call)

    def _agent_answer(agent: Any, message: str) -> DagAgentOut:
        return DagAgentOut(
            message=message,
            agent_id=agent.agent_id,
            roles=list(agent.roles or []),
            last_heartbeat=agent.heartbeat_at.isoformat() if agent.heartbeat_at else None,
            lease_until=agent.lease_until.isoformat() if agent.lease_until else None,
            state=liveness(
                lease_until=agent.lease_until, left_at=agent.left_at, now=timezone.now()
            ),
            responsive_seconds=responsive_seconds(),
        )

    def _lease_seconds(agent_id: str) -> float:
        # The agent this server's process holds is renewed by its heartbeat thread too, so its
        # lease stays short (a crash shows within seconds); any other agent only by its calls.
        held = state.claimed_agent()
        if held is not None and held.agent_id == agent_id:
            return process_lease_seconds()
        return responsive_seconds()

    def _renew(agent_id: str) -> Any:
        """Renew the agent's lease and hand out the DAG steps that may fit it now."""
        agent = services.dag_agent(project=state.project(), agent_id=agent_id)
        renewed = services.dag_agent_renew(
            agent=agent, lease_seconds=_lease_seconds(agent.agent_id)
        )
        return renewed or agent

    async def register_agent(
        agent_id: Annotated[str, Field(description="Your unique Agent ID.")],
        roles: Annotated[
            list[str],
            Field(description='Roles you take steps for, e.g. ["SWE", "QA"]; replaces any.'),
        ],
    ) -> DagAgentOut:
        """Register as an agent that takes workflow steps (again to change your roles). You
        count as responsive, and get steps, while your last heartbeat is recent: call
        `heartbeat` (or any of these tools) more often than `responsive_seconds`. Steps
        waiting for one of your roles are handed to you at once."""

        def call() -> DagAgentOut:
            acting = state.acting_agent_id(agent_id)
            agent = services.dag_agent_register(
                project=state.project(),
                agent_id=acting,
                roles=roles,
                lease_seconds=_lease_seconds(acting),
                dispatch=True,
            )
            return _agent_answer(agent, f"Agent {agent.agent_id!r} registered.")

        return await _db(state, "register_agent", {"agent_id": agent_id}, call)

    async def heartbeat(
        agent_id: Annotated[str, Field(description="Your unique Agent ID.")],
    ) -> DagAgentOut:
        """Tell the server you are alive, so you keep getting steps and keep the ones you
        hold (an agent silent for longer than `responsive_seconds` loses them to others)."""

        def call() -> DagAgentOut:
            agent = _renew(state.acting_agent_id(agent_id))
            return _agent_answer(agent, "Heartbeat recorded.")

        return await _db(state, "heartbeat", {"agent_id": agent_id}, call)

    def _assignments(agent_id: str, *, timed_out: bool = False) -> DagAssignmentsResponse:
        agent = services.dag_agent(
            project=state.project(), agent_id=state.acting_agent_id(agent_id)
        )
        rows = selectors.dag_assignments(agent=agent)
        return DagAssignmentsResponse(
            agent_id=agent.agent_id,
            assignments=[DagAssignment.model_validate(row) for row in rows],
            timed_out=timed_out and not rows,
        )

    async def get_my_assignments(
        agent_id: Annotated[str, Field(description="Your unique Agent ID.")],
    ) -> DagAssignmentsResponse:
        """The steps handed to you and not yet reported, oldest first, each with its
        description, `tool_to_call`, `tool_arguments` and the results of the steps it depends
        on. Returns at once; use `await_assignment` to wait for one."""
        return await _db(
            state, "get_my_assignments", {"agent_id": agent_id}, lambda: _assignments(agent_id)
        )

    async def await_assignment(
        agent_id: Annotated[str, Field(description="Your unique Agent ID.")],
        timeout_s: Annotated[
            float,
            Field(ge=0, le=600, description="Longest wait in seconds (0 to 600; default 60)."),
        ] = 60,
        ctx: Context = None,  # type: ignore[assignment]  # FastMCP injects it
    ) -> DagAssignmentsResponse:
        """Wait until a step is handed to you, then return your assignments (as
        `get_my_assignments`). Returns at once if you already hold a step; after `timeout_s`
        with nothing, returns `timed_out` true, and you may call it again. While waiting you
        count as responsive, and progress notifications report the wait."""
        params = {"agent_id": agent_id, "timeout_s": timeout_s}
        poll = float(getattr(settings, "DEEPWORK_AGENT_POLL_SECONDS", 0.02))
        # Heartbeat and retry waiting steps a few times per responsiveness window.
        sweep_every = max(poll, min(5.0, responsive_seconds() / 3))
        agent = await _db(
            state,
            "await_assignment",
            params,
            lambda: services.dag_agent(
                project=state.project(), agent_id=state.acting_agent_id(agent_id)
            ),
        )

        def sweep() -> None:
            _renew(agent.agent_id)

        def holds() -> bool:
            return selectors.dag_has_assignment(agent_pk=agent.pk)

        started = time.monotonic()
        deadline = started + timeout_s
        next_sweep = started
        next_progress = started + 1.0
        while True:
            now = time.monotonic()
            if now >= next_sweep:
                await _db(state, "await_assignment", params, sweep)
                next_sweep = now + sweep_every
            if await db_sync_to_async(holds)():
                break
            if now >= deadline:
                return await _db(
                    state,
                    "await_assignment",
                    params,
                    lambda: _assignments(agent_id, timed_out=True),
                )
            if ctx is not None and now >= next_progress:
                await ctx.report_progress(
                    now - started, timeout_s, f"Waiting for a step for {agent.agent_id}"
                )
                next_progress = now + 1.0
            await asyncio.sleep(min(poll, max(0.0, deadline - now)))
        return await _db(state, "await_assignment", params, lambda: _assignments(agent_id))

    tools: list[tuple[Callable[..., Any], ToolAnnotations]] = [
        (define_workflow, hints.writes("Define a DAG workflow")),
        (get_workflow_details, hints.reads("Show a DAG workflow")),
        (list_workflows, hints.reads("List DAG workflows")),
        # Deleting it again finds nothing more to delete.
        (delete_workflow, hints.writes("Delete a DAG workflow", destructive=True, idempotent=True)),
        (execute_workflow, hints.writes("Run a DAG workflow")),
        (report_step_completion, hints.writes("Report a step done")),
        # A failed step fails its whole workflow, which cannot be run again.
        (report_step_failure, hints.writes("Report a step failed", destructive=True)),
        (register_agent, hints.writes("Register as an agent", idempotent=True)),
        (heartbeat, hints.writes("Send a heartbeat", idempotent=True)),
        (get_my_assignments, hints.reads("List my assignments")),
        # Waiting counts as a heartbeat.
        (await_assignment, hints.writes("Wait for an assignment", idempotent=True)),
        (get_step_result, hints.reads("Read a step's result")),
    ]
    for fn, declared in tools:
        _register(mcp, fn, f"{prefix}{fn.__name__}", annotations=declared)
