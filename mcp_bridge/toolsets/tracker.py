"""The ``tracker`` toolset: an orchestrating agent records what it actually did.

The original tracker's eight tools with its names, parameters and enums, plus ``start_phase`` and
``complete_phase`` (the original's later additions) and ``parent_task_id`` for sub-tasks. As in
the original, every answer is its JSON object as text (indented), here also as structured
content; every refusal is an error result whose text is
``{"error": true, "code": ..., "message": ...}`` with a message naming the field and the rule.
Arguments the schema already refuses (a wrong type, an enum value outside its list, a
missing field) get the same shape, code ``VALIDATION_ERROR``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Annotated, Any, Literal

from fastmcp import FastMCP
from fastmcp.exceptions import ValidationError
from fastmcp.server.middleware import Middleware, MiddlewareContext
from fastmcp.tools.base import ToolResult
from mcp.types import TextContent
from pydantic import BaseModel, ConfigDict, Field
from pydantic import ValidationError as PydanticValidationError
from pydantic_core import to_json

from mcp_bridge.runner import LOOSE_OBJECT, tool
from mcp_bridge.state import ServerState
from mcp_bridge.toolsets import hints
from mcp_bridge.toolsets.calls import Refusal, db_tool_call
from mcp_bridge.toolsets.specs import TRACKER_INSTRUCTIONS as INSTRUCTIONS  # noqa: F401  # its name here
from mcp_bridge.toolsets.specs import TRACKER_TOOL_NAMES as TOOL_NAMES
from tracker import selectors, services
from workflows.errors import Conflict, InvalidInput, NotFound, WorkflowError

logger = logging.getLogger("deepwork.mcp")


def _code(exc: WorkflowError) -> str:
    if isinstance(exc, InvalidInput):
        return "VALIDATION_ERROR"
    if isinstance(exc, NotFound):
        return "NOT_FOUND"
    if isinstance(exc, Conflict):
        return "CONFLICT"
    return "REFUSED"


def _text(data: dict[str, Any]) -> str:
    """Indented JSON, as the original answers. pydantic-core's encoder: the standard library's
    indenting one is pure Python and took about 10 ms on a full page of get_context."""
    return to_json(data, indent=2).decode()


def answer(data: dict[str, Any]) -> ToolResult:
    # Built without validation: ``data`` is plain JSON values already (the services' and
    # selectors' own dicts), which ToolResult's constructor would copy through pydantic again.
    return ToolResult.model_construct(
        content=[TextContent(type="text", text=_text(data))], structured_content=data
    )


def error(code: str, message: str) -> ToolResult:
    data = {"error": True, "code": code, "message": message}
    return ToolResult(content=[TextContent(type="text", text=_text(data))], is_error=True)


def _argument_errors(exc: ValidationError) -> str:
    """Pydantic's argument errors as ``field: rule`` pairs (the original's zod wording)."""
    cause = exc.__cause__
    if not isinstance(cause, PydanticValidationError):
        return str(exc)
    parts = []
    for problem in cause.errors():
        where = ".".join(str(part) for part in problem["loc"]) or "arguments"
        parts.append(f"{where}: {problem['msg']}")
    return "; ".join(parts)


class _ArgumentErrors(Middleware):
    """Arguments the schema refuses answer in the tracker's error shape (tracker tools only)."""

    def __init__(self, names: set[str]) -> None:
        self.names = names

    async def on_call_tool(self, context: MiddlewareContext[Any], call_next: Any) -> ToolResult:
        try:
            result: ToolResult = await call_next(context)
        except ValidationError as exc:
            if context.message.name not in self.names:
                raise
            return error("VALIDATION_ERROR", _argument_errors(exc))
        return result


def _refused(refusal: Refusal) -> ToolResult:
    if refusal.error is None:
        return error("BUSY", refusal.message)
    return error(_code(refusal.error), refusal.message)


def _crashed(exc: Exception) -> ToolResult:
    # The original's INTERNAL_ERROR: the agent gets the shape it parses, the log the trace.
    return error(
        "INTERNAL_ERROR",
        f"The server failed on this call ({type(exc).__name__}); its log has the details. "
        "Writes of this call were rolled back.",
    )


async def run(
    state: ServerState, tool: str, params: dict[str, Any], fn: Callable[[], dict[str, Any]]
) -> ToolResult:
    """``fn`` through the one database-call path; refusals in the tracker's error shape."""
    data = await db_tool_call(state, tool, params, fn, refused=_refused, crashed=_crashed)
    return data if isinstance(data, ToolResult) else answer(data)


def _iso(value: Any) -> str | None:
    return value.isoformat() if value is not None else None


def _snapshot_fields(task_id: int, snapshot: dict[str, Any] | None) -> dict[str, Any]:
    """The original's snapshot id and type: the start commit for a git snapshot ("git"), the
    task's own id for a fingerprint of the folder's files ("tree")."""
    if not snapshot:
        return {"snapshot_id": None, "snapshot_type": None}
    kind = snapshot.get("kind")
    return {"snapshot_id": snapshot.get("head") or f"{kind}-{task_id}", "snapshot_type": kind}


class Outcome(BaseModel):
    model_config = ConfigDict(extra="forbid")

    summary: Annotated[str, Field(description="What the task achieved, in a few sentences.")]
    achievements: list[str] | None = None
    limitations: list[str] | None = None
    next_steps: list[str] | None = None
    manual_review_needed: bool | None = None
    # Not among the original's documented fields, but its code accepted it, so we do too.
    manual_review_reason: str | None = None


class TaskMetadata(BaseModel):
    model_config = ConfigDict(extra="forbid")

    packages_added: list[str] | None = None
    packages_removed: list[str] | None = None
    commands_executed: list[str] | None = None
    tests_status: Literal["passed", "failed", "not_run"] | None = None
    tokens_input: int | None = Field(default=None, description="Tokens read by the task.")
    tokens_output: int | None = Field(default=None, description="Tokens written by the task.")


class ContextFilter(BaseModel):
    model_config = ConfigDict(extra="forbid")

    phase: int | None = Field(default=None, description="Only this phase number's tasks.")
    agent: str | None = Field(default=None, description="Only this agent's tasks (agent_name).")
    since: str | None = Field(
        default=None, description="Only what started or was logged at or after this ISO time."
    )


def register(mcp: FastMCP, state: ServerState, prefix: str = "") -> None:
    """Put the tracker's ten tools on ``mcp``, each named ``prefix + name``."""
    mcp.add_middleware(_ArgumentErrors({prefix + name for name in TOOL_NAMES}))

    def ids() -> tuple[Any, Any]:
        return state.project(), state.agent()

    @tool(
        mcp,
        name=f"{prefix}start_workflow",
        annotations=hints.writes("Start tracking a workflow"),
        output_schema=LOOSE_OBJECT,
    )
    async def start_workflow(
        name: Annotated[str, Field(description="Short workflow name (at most 200 characters).")],
        objective: Annotated[str | None, Field(description="Measurable goal.")] = None,
        profile: Annotated[
            Literal["simple", "standard", "complex"] | None,
            Field(description="How much ceremony the work needs (default standard)."),
        ] = None,
        total_phases: Annotated[
            int | None, Field(description="Expected number of phases, 1 to 20.")
        ] = None,
        scope: Annotated[str | None, Field(description="What is included and excluded.")] = None,
        constraints: Annotated[str | None, Field(description="Technical limits.")] = None,
    ) -> ToolResult:
        """Create a tracked workflow (once per piece of work). Returns its `workflow_id`, to
        pass to `start_task`, `get_context` and `complete_workflow`."""

        def call() -> dict[str, Any]:
            project, agent = ids()
            workflow = services.tracked_workflow_start(
                project=project,
                agent=agent,
                name=name,
                objective=objective,
                profile=profile,
                total_phases=total_phases,
                scope=scope,
                constraints=constraints,
            )
            return {
                "workflow_id": str(workflow.pk),
                "status": workflow.status,
                "profile": workflow.profile,
                "total_phases": workflow.total_phases,
                "created_at": _iso(workflow.created_at),
            }

        return await run(state, f"{prefix}start_workflow", {"name": name}, call)

    @tool(
        mcp,
        name=f"{prefix}complete_workflow",
        annotations=hints.writes("Complete a tracked workflow"),
        output_schema=LOOSE_OBJECT,
    )
    async def complete_workflow(
        workflow_id: Annotated[str, Field(description="From start_workflow.")],
        status: Annotated[
            Literal["completed", "failed", "partial"],
            Field(
                description="How it ended. 'completed' is refused while tasks still run; "
                "'failed' and 'partial' are accepted with a warning naming them."
            ),
        ],
        summary: Annotated[str, Field(description="What was done, in a few sentences.")],
        achievements: list[str] | None = None,
        limitations: list[str] | None = None,
    ) -> ToolResult:
        """Finalize the workflow with its summary. Returns the metrics: phases, tasks,
        wall-clock `duration` (seconds, start to completion) beside the summed task time,
        tokens and the number of distinct files changed."""

        def call() -> dict[str, Any]:
            project, agent = ids()
            done = services.tracked_workflow_complete(
                project=project,
                agent=agent,
                workflow_id=workflow_id,
                status=status,
                summary=summary,
                achievements=achievements,
                limitations=limitations,
            )
            workflow = done.workflow
            return {
                "workflow_id": str(workflow.pk),
                "status": status,
                "summary": workflow.summary,
                "achievements": workflow.achievements,
                "limitations": workflow.limitations,
                "metrics": selectors.workflow_metrics(workflow=workflow),
                "completed_at": _iso(workflow.completed_at),
                "warnings": done.warnings,
            }

        params = {"workflow_id": workflow_id, "status": status}
        return await run(state, f"{prefix}complete_workflow", params, call)

    @tool(
        mcp,
        name=f"{prefix}get_context",
        annotations=hints.reads("Read the tracked work"),
        output_schema=LOOSE_OBJECT,
    )
    async def get_context(
        workflow_id: Annotated[str, Field(description="From start_workflow.")],
        include: Annotated[
            list[Literal["decisions", "milestones", "blockers", "phase_summary", "tasks"]],
            Field(
                description="What to return. Blockers are issues that require human review "
                "and are not yet resolved."
            ),
        ],
        filter: Annotated[
            ContextFilter | None, Field(description="Select tasks, then their logs.")
        ] = None,
        limit: Annotated[
            int, Field(description="Rows per list, 1 to 200, newest first.")
        ] = selectors.DEFAULT_LIMIT,
        cursor: Annotated[
            dict[str, str] | None,
            Field(
                description="The next page of a list: {list name: that list's "
                "<name>_next_cursor from the previous answer}."
            ),
        ] = None,
    ) -> ToolResult:
        """Read the workflow's state: its header, then each list named in `include`. Every
        list is one page of at most `limit` rows with its total count and the cursor of the
        next page (null on the last)."""
        chosen = filter or ContextFilter()

        def call() -> dict[str, Any]:
            project = state.project()
            return selectors.context_get(
                project=project,
                workflow_id=workflow_id,
                include=include,
                phase=chosen.phase,
                agent=chosen.agent,
                since=chosen.since,
                limit=limit,
                cursor=cursor,
            )

        params = {"workflow_id": workflow_id, "include": include}
        return await run(state, f"{prefix}get_context", params, call)

    @tool(
        mcp,
        name=f"{prefix}start_task",
        annotations=hints.writes("Start a task"),
        output_schema=LOOSE_OBJECT,
    )
    async def start_task(
        workflow_id: Annotated[str, Field(description="From start_workflow.")],
        name: Annotated[str, Field(description="Task name (at most 200 characters).")],
        goal: Annotated[str, Field(description="What the task must achieve.")],
        phase: Annotated[
            int | None,
            Field(description="Phase number (1-100); the phase is created if it is new."),
        ] = None,
        phase_name: Annotated[
            str | None, Field(description="Name of an auto-created phase (default 'Phase N').")
        ] = None,
        caller_type: Annotated[
            Literal["orchestrator", "subagent"] | None,
            Field(description="Who runs the task."),
        ] = None,
        agent_name: Annotated[
            str | None, Field(description="The sub-agent's name (required for a subagent).")
        ] = None,
        areas: Annotated[
            list[str] | None,
            Field(
                description="Code areas the task may touch: path prefixes ('src/api') or "
                "globs ('src/**/*.py'), relative to the project root. Files changed outside "
                "them are reported as unexpected."
            ),
        ] = None,
        parent_task_id: Annotated[
            str | None, Field(description="The running task this one is a sub-task of.")
        ] = None,
    ) -> ToolResult:
        """Start a task: snapshots the project's files so `complete_task` can report exactly
        what changed during it."""

        def call() -> dict[str, Any]:
            project, agent = ids()
            started = services.task_start(
                project=project,
                agent=agent,
                workflow_id=workflow_id,
                name=name,
                goal=goal,
                phase=phase,
                phase_name=phase_name,
                caller_type=caller_type,
                agent_name=agent_name,
                areas=areas,
                parent_task_id=parent_task_id,
                root=state.project_root,
            )
            task = started.task
            data: dict[str, Any] = {
                "task_id": str(task.pk),
                "workflow_id": str(task.workflow_id),
                **_snapshot_fields(task.pk, task.snapshot),
                "started_at": _iso(task.started_at),
            }
            if started.phase is not None:
                data.update(
                    phase_id=str(started.phase.pk),
                    phase_created=started.phase_created,
                    phase_number=started.phase.number,
                    phase_name=started.phase.name,
                )
            if parent_task_id is not None:
                data["parent_task_id"] = str(task.parent_id)
            if caller_type is not None:
                data["caller_type"] = caller_type
            if agent_name is not None:
                data["agent_name"] = agent_name
            if started.warnings:
                data["warnings"] = started.warnings
            return data

        params = {"workflow_id": workflow_id, "name": name, "phase": phase}
        return await run(state, f"{prefix}start_task", params, call)

    @tool(
        mcp,
        name=f"{prefix}complete_task",
        annotations=hints.writes("Complete a task"),
        output_schema=LOOSE_OBJECT,
    )
    async def complete_task(
        task_id: Annotated[str, Field(description="From start_task.")],
        status: Annotated[
            Literal["success", "partial_success", "failed"],
            Field(description="How the task ended; a task is completed once."),
        ],
        outcome: Annotated[Outcome, Field(description="What came of the task.")],
        phase_complete: Annotated[
            bool, Field(description="Also mark the task's phase completed.")
        ] = False,
        metadata: Annotated[TaskMetadata | None, Field(description="Packages, tests.")] = None,
    ) -> ToolResult:
        """Complete a running task (not one whose sub-tasks still run). Returns its duration,
        the files changed during it (`added`, `modified`, `deleted`: commits, staged, unstaged
        and untracked changes) and whether they lie inside its declared `areas`."""
        meta = metadata or TaskMetadata()

        def call() -> dict[str, Any]:
            project, agent = ids()
            done = services.task_complete(
                project=project,
                agent=agent,
                task_id=task_id,
                status=status,
                summary=outcome.summary,
                achievements=outcome.achievements,
                limitations=outcome.limitations,
                next_steps=outcome.next_steps,
                manual_review_needed=bool(outcome.manual_review_needed),
                manual_review_reason=outcome.manual_review_reason,
                phase_complete=phase_complete,
                packages_added=meta.packages_added,
                packages_removed=meta.packages_removed,
                commands_executed=meta.commands_executed,
                tests_status=meta.tests_status,
                tokens_input=meta.tokens_input,
                tokens_output=meta.tokens_output,
                root=state.project_root,
            )
            task = done.task
            data: dict[str, Any] = {
                "task_id": str(task.pk),
                "workflow_id": str(task.workflow_id),
                "status": status,
                "duration_seconds": round((task.duration_ms or 0) / 1000),
                "files_changed": done.files.as_dict(),
                "verification": {
                    "scope_match": done.verification.scope_match,
                    "unexpected_files": done.verification.unexpected_files,
                    "warnings": task.warnings,
                },
            }
            if task.phase is not None:
                phase = done.phase.phase if done.phase else task.phase
                data["phase_number"] = phase.number
                data["phase_status"] = phase.status.lower()
                if done.phase and done.phase.warnings:
                    data["phase_warnings"] = done.phase.warnings
            return data

        params = {"task_id": task_id, "status": status}
        return await run(state, f"{prefix}complete_task", params, call)

    @tool(
        mcp,
        name=f"{prefix}log_decision",
        annotations=hints.writes("Log a decision"),
        output_schema=LOOSE_OBJECT,
    )
    async def log_decision(
        task_id: Annotated[str, Field(description="The task the decision belongs to.")],
        category: Literal["architecture", "library_choice", "trade_off", "workaround", "other"],
        question: Annotated[str, Field(description="What had to be decided.")],
        chosen: Annotated[str, Field(description="The option taken.")],
        reasoning: Annotated[str, Field(description="Why.")],
        options_considered: list[str] | None = None,
        trade_offs: str | None = None,
    ) -> ToolResult:
        """Record an architectural decision and why it was taken."""

        def call() -> dict[str, Any]:
            project, agent = ids()
            row = services.decision_log(
                project=project,
                agent=agent,
                task_id=task_id,
                category=category,
                question=question,
                chosen=chosen,
                reasoning=reasoning,
                options_considered=options_considered,
                trade_offs=trade_offs,
            )
            return {"decision_id": str(row.pk), "created_at": _iso(row.created_at)}

        params = {"task_id": task_id, "category": category}
        return await run(state, f"{prefix}log_decision", params, call)

    @tool(
        mcp,
        name=f"{prefix}log_issue",
        annotations=hints.writes("Log an issue"),
        output_schema=LOOSE_OBJECT,
    )
    async def log_issue(
        task_id: Annotated[str, Field(description="The task the issue came up in.")],
        type: Literal[
            "documentation_gap",
            "bug_encountered",
            "dependency_conflict",
            "unclear_requirement",
            "other",
        ],
        description: Annotated[str, Field(description="The problem.")],
        resolution: Annotated[str, Field(description="What you did about it.")],
        requires_human_review: Annotated[
            bool, Field(description="A person must look at it: it shows as a blocker.")
        ] = False,
    ) -> ToolResult:
        """Record a problem met during a task; with `requires_human_review` it is a blocker
        until a person resolves it."""

        def call() -> dict[str, Any]:
            project, agent = ids()
            row = services.issue_log(
                project=project,
                agent=agent,
                task_id=task_id,
                type=type,
                description=description,
                resolution=resolution,
                requires_human_review=requires_human_review,
            )
            return {"issue_id": str(row.pk), "created_at": _iso(row.created_at)}

        params = {"task_id": task_id, "type": type}
        return await run(state, f"{prefix}log_issue", params, call)

    @tool(
        mcp,
        name=f"{prefix}log_milestone",
        annotations=hints.writes("Log a milestone"),
        output_schema=LOOSE_OBJECT,
    )
    async def log_milestone(
        task_id: Annotated[str, Field(description="The task making progress.")],
        message: Annotated[str, Field(description="The progress, at most 500 characters.")],
        progress: Annotated[float | None, Field(description="Percent done, 0 to 100.")] = None,
        metadata: dict[str, Any] | None = None,
    ) -> ToolResult:
        """Record progress on a task."""

        def call() -> dict[str, Any]:
            project, agent = ids()
            row = services.milestone_log(
                project=project,
                agent=agent,
                task_id=task_id,
                message=message,
                progress=progress,
                metadata=metadata,
            )
            return {"milestone_id": str(row.pk), "created_at": _iso(row.created_at)}

        return await run(state, f"{prefix}log_milestone", {"task_id": task_id}, call)

    @tool(
        mcp,
        name=f"{prefix}start_phase",
        annotations=hints.writes("Start a phase"),
        output_schema=LOOSE_OBJECT,
    )
    async def start_phase(
        workflow_id: Annotated[str, Field(description="From start_workflow.")],
        number: Annotated[int, Field(description="Phase number, 1 to 100.")],
        name: Annotated[str | None, Field(description="Phase name (default 'Phase N').")] = None,
    ) -> ToolResult:
        """Open a numbered phase (or return it if it is already open)."""

        def call() -> dict[str, Any]:
            project, agent = ids()
            started = services.phase_start(
                project=project, agent=agent, workflow_id=workflow_id, number=number, name=name
            )
            phase = started.phase
            return {
                "phase_id": str(phase.pk),
                "workflow_id": str(phase.workflow_id),
                "phase_number": phase.number,
                "phase_name": phase.name,
                "status": phase.status,
                "phase_created": started.created,
                "started_at": _iso(phase.started_at),
            }

        params = {"workflow_id": workflow_id, "number": number}
        return await run(state, f"{prefix}start_phase", params, call)

    @tool(
        mcp,
        name=f"{prefix}complete_phase",
        annotations=hints.writes("Complete a phase"),
        output_schema=LOOSE_OBJECT,
    )
    async def complete_phase(
        phase_id: Annotated[str, Field(description="From start_phase or start_task.")],
        status: Literal["completed", "failed"] = "completed",
    ) -> ToolResult:
        """Close a phase. Tasks still running in it are named in `warnings`."""

        def call() -> dict[str, Any]:
            project, agent = ids()
            done = services.phase_complete(
                project=project, agent=agent, phase_id=phase_id, status=status
            )
            phase = done.phase
            return {
                "phase_id": str(phase.pk),
                "workflow_id": str(phase.workflow_id),
                "phase_number": phase.number,
                "status": phase.status,
                "completed_at": _iso(phase.completed_at),
                "warnings": done.warnings,
            }

        params = {"phase_id": phase_id, "status": status}
        return await run(state, f"{prefix}complete_phase", params, call)
