"""DeepWork 0.14's ``deepwork`` tools (``mcpserve --generation 0.14``): its tool names, input
schemas, answers and texts, over the one session service and finish pipeline.

A 0.14 client names its stack with ``session_id`` (its conversation id) and, for a
sub-agent, ``agent_id``; each call below maps that to the stack's ``Conversation`` and calls
the service through the one database-call path (``common.call``).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, cast

from fastmcp import FastMCP
from pydantic import BaseModel, Field

from mcp_bridge.runner import LOOSE_OBJECT, tool
from mcp_bridge.state import ServerState, log_call
from mcp_bridge.toolsets import hints
from mcp_bridge.toolsets.deepwork import deepreview
from mcp_bridge.toolsets.deepwork.common import (
    ABORT_HINTS,
    GO_TO_STEP_HINTS,
    LIST_HINTS,
    START_HINTS,
    AgentId,
    Capture,
    Inputs,
    Outputs,
    Override,
    SessionId,
    WorkSummary,
    call,
    conversation,
    finish_hints,
    platform,
    shown,
    started_here,
)
from mcp_bridge.toolsets.deepwork.deepreview import beside_review_tasks
from workflows.db import db_sync_to_async
from workflows.dialects import deepwork014 as dialect
from workflows.errors import InvalidInput, NotFound, WorkflowError
from workflows.generations import Conversation
from workflows.results import NeedsWork

if TYPE_CHECKING:
    from workflows.jobdefs.base import RtStep
    from workflows.services.session_jobs import ParsedSessionJob

# The session services and the selectors read the database: they are imported inside the calls,
# because ``mcpserve`` lists these tools before Django's app registry is ready and runs no call
# until it is (``mcp_bridge.startup``).

TOOL_NAMES = (
    "get_workflows",
    "start_workflow",
    "finished_step",
    "abort_workflow",
    "go_to_step",
    "register_session_job",
    "get_session_job",
    "get_named_schemas",
)
SESSION_JOB_TOOLS = ("register_session_job", "get_session_job", "get_named_schemas")
INSTRUCTIONS = """\
# DeepWork Workflow Server

Runs the project's multi-step workflows ("jobs") and checks each step's outputs.

**Session identity.** `session_id` names your conversation's stack of workflows: on Claude Code
pass `CLAUDE_CODE_SESSION_ID`; elsewhere omit it on `start_workflow` and pass back
`begin_step.session_id` on every later call. A sub-agent adds its `agent_id` and gets a stack of
its own.

## Workflow Lifecycle
1. Call `get_workflows` to learn the job and workflow names.
2. Call `start_workflow` with a goal, the names and any `inputs`; follow `begin_step`.
3. Call `finished_step` with the step's outputs (file paths or string values) and a
   `work_summary`; on `needs_work`, run the listed reviews or fix what `feedback` says.
4. On `workflow_complete`, follow `post_workflow_instructions` if any.

Starting a workflow while one is active nests it; `abort_workflow` pops the top one and
`go_to_step` returns to an earlier step.
"""

INSTRUCTIONS_LIST_LIMIT = 2048
ISSUE_HEAD = "## **IMPORTANT: ISSUE DETECTED**\n\nSuggest repairing this immediately to the user."
ISSUE_DETECTED = (
    "\n\n---\n**IMPORTANT: ISSUE DETECTED.** Suggest repairing this immediately to the user.\n\n"
)


@dataclass(frozen=True)
class StartupScan:
    """The project's jobs as the server found them when it started (0.14 builds its
    ``instructions`` and ``issue_detected`` once, from this)."""

    jobs: tuple[tuple[str, tuple[str, ...], str], ...]  # name, workflow names, summary
    issues: tuple[str, ...]  # one issue entry per job.yml that fails to load

    @property
    def issue_detected(self) -> str | None:
        return ISSUE_DETECTED + "\n".join(self.issues) if self.issues else None


def startup_scan(project_root: Path) -> StartupScan:
    """Parse the catalog's job files without the database: a folder name is served by the
    first folder that parses, as in the catalog."""
    from workflows.services import catalog

    jobs: list[tuple[str, tuple[str, ...], str]] = []
    issues: list[str] = []
    seen: set[str] = set()
    for job_file in catalog.catalog_scan(project_root=project_root, generation="0.14"):
        if job_file.dir_name in seen:
            continue
        try:
            job = catalog.job_file_parse(job_file)
        except Exception as exc:
            issues.append(
                f"- **{job_file.dir_name}**: {exc}\n  {dialect.repair_suggestion(job_file.job_dir)}"
            )
            continue
        seen.add(job_file.dir_name)
        jobs.append((job.name, tuple(w.name for w in job.workflows), job.summary))
    return StartupScan(jobs=tuple(jobs), issues=tuple(issues))


def instructions(project_root: Path) -> str:
    """0.14's server instructions: the project's workflows (or its broken job files) first."""
    scan = startup_scan(project_root)
    if scan.issues:
        return f"{ISSUE_HEAD}\n\n" + "\n".join(scan.issues) + f"\n\n{INSTRUCTIONS}"
    if scan.jobs:
        listing = "\n".join(
            f"- **{name}** ({', '.join(workflows)}): {summary}"
            for name, workflows, summary in scan.jobs
        )
        if len(listing) > INSTRUCTIONS_LIST_LIMIT:
            listing = "This project has many jobs; call `get_workflows` to list them."
        return (
            "## Available Workflows\n\nThis project uses DeepWork: `/deepwork` starts one "
            f"of these workflows.\n\n{listing}\n\n{INSTRUCTIONS}"
        )
    return INSTRUCTIONS


def with_issue(answer: Any, issue: str | None) -> Any:
    """``answer`` with 0.14's trailing ``issue_detected`` when the startup scan found broken
    job files."""
    if issue is None:
        return answer
    if isinstance(answer, BaseModel):
        answer = answer.model_dump(mode="json")
    return {**answer, "issue_detected": issue}


# --- The calls into the session service, shaped for the wire (sync, for the database thread).


def start_call(
    state: ServerState,
    *,
    goal: str,
    job_name: str,
    workflow_name: str,
    session_id: str | None,
    inputs: dict[str, str | list[str]] | None,
    agent_id: str | None,
    mixed_check: bool,
) -> dialect.StartWorkflowResponse:
    from workflows.selectors import generations
    from workflows.services import sessions

    view = state.catalog().view()
    if not session_id:
        # The job is looked up first, as 0.14 does: an unknown job says so either way.
        if view.find(job_name) is None and view.error_for(job_name) is None:
            raise NotFound(f"Job not found: {job_name}")
        if platform(state) == "claude":
            raise InvalidInput(dialect.START_NEEDS_SESSION_ID)
        session_id = uuid.uuid4().hex
    key = conversation(state, session_id)
    if mixed_check:
        generations.refuse_nesting_in_agent_stack(agent=state.agent())
    result = sessions.session_start(
        project=state.project(),
        catalog=view,
        conversation=Conversation(key, agent_id or None),
        job_name=job_name,
        workflow_name=workflow_name,
        goal=goal,
        inputs=inputs,
    )
    started_here(state).add(key)
    return shown(state, dialect.started(result))


def finish_call(
    state: ServerState,
    *,
    session_id: str,
    agent_id: str | None,
    outputs: dict[str, str | list[str]],
    work_summary: str | None,
    override_reason: str | None,
) -> dialect.FinishedStepResponse:
    from reviews import services
    from workflows.services import sessions

    checkpoint = sessions.step_checkpoint(
        project=state.project(),
        conversation=Conversation(conversation(state, session_id), agent_id),
        outputs=outputs,
        notes=work_summary,
    )
    outcome = services.step_finish_by_tasks(
        checkpoint=checkpoint,
        override_reason=override_reason,
        reviews_enabled=state.gate is not None,
        honour_091_ids=beside_review_tasks(state),
        commands=state.review_commands(),
    )
    if isinstance(outcome, NeedsWork):
        return dialect.needs_work(outcome)
    return shown(state, dialect.finished(cast(Any, outcome)))


async def schemas_checked_ahead(
    state: ServerState, *, session_id: str, agent_id: str | None, outputs: dict[str, Any]
) -> None:
    """Check the hand-in's ``json_schema`` outputs before ``finish_call``, off the database
    thread: reading, parsing and validating the files is the slow part of a hand-in, and
    every caller shares that thread. Only finding the step takes a short turn on it; the
    finish call then uses the result (``schema_checked_ahead``) if the step is unchanged."""
    from workflows.generations import v0_14 as later

    try:
        conversation_id = conversation(state, session_id)
    except InvalidInput:
        return  # the finish call says so

    def step_and_root() -> tuple[RtStep | None, Path]:
        project = state.project()
        step = later.schema_step(
            project=project, conversation_id=conversation_id, agent_id=agent_id
        )
        return step, Path(project.root_path)

    step, root = await db_sync_to_async(step_and_root)()
    if step is None:
        return
    checked = await asyncio.to_thread(
        later.schema_feedback_ahead, step=step, outputs=outputs, project_root=root
    )
    later.schema_checked_ahead.set(checked)


def abort_call(
    state: ServerState, *, session_id: str, agent_id: str | None, explanation: str
) -> dialect.AbortWorkflowResponse:
    from workflows.services import sessions

    return dialect.aborted(
        sessions.session_abort(
            project=state.project(),
            conversation=Conversation(conversation(state, session_id), agent_id),
            explanation=explanation,
        )
    )


def go_to_step_call(
    state: ServerState, *, session_id: str, agent_id: str | None, step_id: str
) -> dialect.GoToStepResponse:
    from workflows.services import sessions

    return shown(
        state,
        dialect.went_to_step(
            sessions.session_go_to_step(
                project=state.project(),
                conversation=Conversation(conversation(state, session_id), agent_id),
                step_id=step_id,
            )
        ),
    )


def parse_session_job(
    state: ServerState, *, conversation_id: str, job_name: str, yaml_text: str
) -> ParsedSessionJob | InvalidInput:
    """The definition read and checked, no database involved (see ``session_job_parse``), or
    why it cannot be."""
    from workflows.services import session_jobs

    try:
        return session_jobs.session_job_parse(
            project_root=state.project_root,
            platform=platform(state),
            conversation_id=conversation_id,
            job_name=job_name,
            yaml_text=yaml_text,
        )
    except InvalidInput as exc:
        return exc


def register_session_job_call(
    state: ServerState, parsed: ParsedSessionJob | InvalidInput
) -> dict[str, Any]:
    from workflows.services import session_jobs

    try:
        if isinstance(parsed, InvalidInput):
            raise parsed
        registered = session_jobs.session_job_store(project=state.project(), parsed=parsed)
    except InvalidInput as exc:
        return dialect.soft_error(str(exc))
    return {
        "status": "registered",
        "job_name": registered.job_name,
        "job_dir": registered.job_dir,
        "message": f"Session job '{registered.job_name}' registered successfully. It can be "
        f"started with start_workflow(job_name='{registered.job_name}', ...).",
    }


def get_session_job_call(state: ServerState, *, session_id: str, job_name: str) -> dict[str, Any]:
    from workflows.services import session_jobs

    try:
        text = session_jobs.session_job_text(
            project=state.project(),
            conversation_id=conversation(state, session_id),
            job_name=job_name,
        )
    except WorkflowError as exc:
        message = str(exc)
        if state.conversation_scope():
            message = message.replace(conversation(state, session_id), session_id)
        return dialect.soft_error(message)
    return {"job_name": job_name, "job_definition_yaml": text}


def register_session_tools(
    mcp: FastMCP, state: ServerState, prefix: str, issue: str | None = None
) -> None:
    """register_session_job, get_session_job and get_named_schemas (both 0.14 and both)."""

    async def db(name: str, params: dict[str, Any], fn: Callable[[], Any]) -> Any:
        return with_issue(await call(state, name, params, fn), issue)

    @tool(
        mcp,
        name=f"{prefix}register_session_job",
        # Registering a name again replaces its definition.
        annotations=hints.writes("Register a session job", destructive=True, idempotent=True),
        output_schema=LOOSE_OBJECT,
    )
    async def register_session_job(
        job_name: Annotated[str, Field(description="Name for the job (^[a-z][a-z0-9_]*$).")],
        job_definition_yaml: Annotated[
            str, Field(description="The whole job.yml text, in either job format.")
        ],
        session_id: SessionId = None,
    ) -> dict[str, Any]:
        """Register a job definition that only this conversation (session_id) can start, e.g.
        a plan written on the fly. Re-registering a name replaces it; it shadows a project job
        of the same name for this conversation only."""
        if not session_id:
            return dialect.soft_error(dialect.SESSION_ID_REQUIRED_JOBS)
        # Parsing a big definition takes a while: done on a worker thread of its own, so the
        # database thread that every caller shares only stores the result. The session id is
        # read here, where the request's identity is.
        try:
            conversation_id = conversation(state, session_id)
        except InvalidInput as exc:
            parsed: ParsedSessionJob | InvalidInput = exc
        else:
            parsed = await asyncio.to_thread(
                parse_session_job,
                state,
                conversation_id=conversation_id,
                job_name=job_name,
                yaml_text=job_definition_yaml,
            )
        return await db(
            f"{prefix}register_session_job",
            {"job_name": job_name, "session_id": session_id},
            lambda: register_session_job_call(state, parsed),
        )

    @tool(
        mcp,
        name=f"{prefix}get_session_job",
        output_schema=LOOSE_OBJECT,
        annotations=hints.reads("Read a session job"),
    )
    async def get_session_job(
        job_name: Annotated[str, Field(description="The registered job's name.")],
        session_id: SessionId = None,
    ) -> dict[str, Any]:
        """Return the job.yml text this conversation registered under job_name, verbatim."""
        if not session_id:
            return dialect.soft_error(dialect.SESSION_ID_REQUIRED_JOBS)
        return await db(
            f"{prefix}get_session_job",
            {"job_name": job_name, "session_id": session_id},
            lambda: get_session_job_call(state, session_id=session_id, job_name=job_name),
        )

    @tool(
        mcp,
        name=f"{prefix}get_named_schemas",
        annotations=hints.reads("List named schemas"),
    )
    async def get_named_schemas() -> list[dict[str, Any]]:
        """List the project's named DeepSchemas (.deepwork/schemas/<name>/deepschema.yml):
        name, summary and the file patterns each applies to."""
        from workflows.selectors.deepschemas import named_schemas

        # Reading and parsing the schema files is file work: kept off the event loop, which
        # serves every caller.
        answer = await asyncio.to_thread(named_schemas, project_root=state.project_root)
        log_call(state, f"{prefix}get_named_schemas", {})
        return answer


def register(mcp: FastMCP, state: ServerState, prefix: str = "") -> None:
    """DeepWork 0.14's workflow tools with its exact parameters."""
    # Computed once per process, as 0.14 does: fixing a job does not clear it until restart.
    issue = startup_scan(state.project_root).issue_detected
    listed: list[tuple[object, dialect.GetWorkflowsResponse]] = []

    async def db(name: str, params: dict[str, Any], fn: Callable[[], Any]) -> Any:
        return with_issue(await call(state, name, params, fn), issue)

    def workflows() -> dialect.GetWorkflowsResponse:
        """The get_workflows answer for the catalog as it is, built once per catalog view."""
        from workflows.selectors import generations

        view = state.catalog().view()
        if not listed or listed[0][0] is not view:
            agents = generations.workflow_agents(job_pks=[job.pk for job in view.jobs])
            listed[:] = [(view, dialect.workflows(view, agents))]
        return listed[0][1]

    @tool(
        mcp,
        name=f"{prefix}get_workflows",
        annotations=LIST_HINTS,
        output_schema=LOOSE_OBJECT,
    )
    async def get_workflows() -> dialect.GetWorkflowsResponse:
        """List every job and its workflows, each with how to invoke it. Call this first.
        Jobs whose job.yml fails to load are listed under `errors`."""
        return await db(f"{prefix}get_workflows", {}, workflows)

    @tool(
        mcp,
        name=f"{prefix}start_workflow",
        annotations=START_HINTS,
        output_schema=LOOSE_OBJECT,
    )
    async def start_workflow(
        goal: Annotated[str, Field(description="What the user wants to accomplish.")],
        job_name: Annotated[str, Field(description="The job's name as get_workflows lists it.")],
        workflow_name: Annotated[str, Field(description="The workflow within the job.")],
        session_id: SessionId = None,
        inputs: Inputs = None,
        agent_id: AgentId = None,
    ) -> dialect.StartWorkflowResponse:
        """Start a workflow on your stack and get its first step (instructions, inputs,
        expected outputs). Starting while another workflow is active nests the new one."""
        return await db(
            f"{prefix}start_workflow",
            {"job_name": job_name, "workflow_name": workflow_name, "session_id": session_id},
            lambda: start_call(
                state,
                goal=goal,
                job_name=job_name,
                workflow_name=workflow_name,
                session_id=session_id,
                inputs=inputs,
                agent_id=agent_id,
                mixed_check=False,
            ),
        )

    @tool(
        mcp,
        name=f"{prefix}finished_step",
        annotations=finish_hints(open_world=True),
        output_schema=LOOSE_OBJECT,
    )
    async def finished_step(
        outputs: Outputs,
        session_id: SessionId = None,
        work_summary: WorkSummary = None,
        quality_review_override_reason: Override = None,
        agent_id: AgentId = None,
    ) -> Any:
        """Hand in the current step's outputs. `status` says what next: `needs_work` (run the
        listed reviews or fix what `feedback` says, then call again), `next_step` (follow
        `begin_step`) or `workflow_complete`."""
        if not session_id:
            return dialect.soft_error(dialect.SESSION_ID_REQUIRED)
        await schemas_checked_ahead(
            state, session_id=session_id, agent_id=agent_id, outputs=outputs
        )
        return await db(
            f"{prefix}finished_step",
            {"outputs": outputs, "session_id": session_id},
            lambda: finish_call(
                state,
                session_id=session_id,
                agent_id=agent_id,
                outputs=outputs,
                work_summary=work_summary,
                override_reason=quality_review_override_reason,
            ),
        )

    @tool(mcp, name=f"{prefix}abort_workflow", annotations=ABORT_HINTS, output_schema=LOOSE_OBJECT)
    async def abort_workflow(
        explanation: Annotated[str, Field(description="Why the workflow is being aborted.")],
        session_id: SessionId = None,
        agent_id: AgentId = None,
    ) -> Any:
        """Abort the workflow on top of your stack; the one below it, if any, resumes."""
        if not session_id:
            return dialect.soft_error(dialect.SESSION_ID_REQUIRED)
        return await db(
            f"{prefix}abort_workflow",
            {"session_id": session_id},
            lambda: abort_call(
                state, session_id=session_id, agent_id=agent_id, explanation=explanation
            ),
        )

    @tool(mcp, name=f"{prefix}go_to_step", annotations=GO_TO_STEP_HINTS, output_schema=LOOSE_OBJECT)
    async def go_to_step(
        step_id: Annotated[str, Field(description="The earlier (or current) step to return to.")],
        session_id: SessionId = None,
        agent_id: AgentId = None,
    ) -> Any:
        """Return the top workflow of your stack to an earlier step to redo work; progress
        from that step on is invalidated (files are kept)."""
        if not session_id:
            return dialect.soft_error(dialect.SESSION_ID_REQUIRED)
        return await db(
            f"{prefix}go_to_step",
            {"step_id": step_id, "session_id": session_id},
            lambda: go_to_step_call(
                state, session_id=session_id, agent_id=agent_id, step_id=step_id
            ),
        )

    register_session_tools(mcp, state, prefix, issue)


REVIEW_ID_EMPTY = "Validation error: review_id must not be empty."
REVIEW_ID_TRAVERSAL = "Validation error: review_id must not contain path traversal sequences."


def register_review_tools(mcp: FastMCP, state: ServerState, prefix: str = "") -> None:
    """The three review tools in 0.14's format and texts (``reviews.deepreview.agent_tasks``);
    ``mark_review_as_passed`` answers bad ids with 0.14's texts (refusing any path separator,
    which 0.14.0 lets through)."""
    captured = Capture()
    deepreview.register(cast(FastMCP, captured), state, prefix)
    passed = captured.fns[f"{prefix}mark_review_as_passed"]

    def pipeline() -> Any:
        # Imported on first use, as the 0.9.1 review tools do.
        from reviews.deepreview import agent_tasks

        return agent_tasks

    @tool(
        mcp,
        name=f"{prefix}get_review_instructions",
        annotations=deepreview.REVIEW_INSTRUCTIONS_HINTS,
    )
    async def get_review_instructions(
        files: Annotated[
            list[str] | None,
            Field(
                description="Files to review, relative to the project root (catch-all rules "
                "are left out then). Omit to review what changed on this branch plus "
                "uncommitted and untracked files."
            ),
        ] = None,
    ) -> str:
        """Turn the project's `.deepreview` and DeepSchema rules into review tasks for the given
        (or changed) files: a list of agents to run in parallel, each prompt pointing at an
        instructions file. When a review passes, call `mark_review_as_passed` with its id."""
        return cast(
            str,
            await deepreview.off_loop(
                state,
                f"{prefix}get_review_instructions",
                {"files": files},
                lambda: pipeline().get_review_instructions(
                    project_root=state.project_root,
                    files=files,
                    platform=state.platform,
                    commands=state.review_commands(),
                ),
            ),
        )

    @tool(
        mcp,
        name=f"{prefix}get_configured_reviews",
        annotations=deepreview.CONFIGURED_REVIEWS_HINTS,
    )
    async def get_configured_reviews(
        only_rules_matching_files: Annotated[
            list[str] | None,
            Field(
                description="Only list rules matching at least one of these files (catch-all "
                "rules are left out then). Omit to list every rule."
            ),
        ] = None,
    ) -> list[dict[str, str]]:
        """List the review rules of the project's `.deepreview` files and DeepSchemas: name,
        description and defining file with line; files that fail to parse as
        `PARSE_ERROR:<path>` entries."""
        return cast(
            list[dict[str, str]],
            await deepreview.off_loop(
                state,
                f"{prefix}get_configured_reviews",
                {"only_rules_matching_files": only_rules_matching_files},
                lambda: pipeline().get_configured_reviews(
                    project_root=state.project_root,
                    only_rules_matching_files=only_rules_matching_files,
                ),
            ),
        )

    @tool(mcp, name=f"{prefix}mark_review_as_passed", annotations=deepreview.MARK_PASSED_HINTS)
    async def mark_review_as_passed(
        review_id: Annotated[
            str, Field(description="The review id named in the review's instructions file.")
        ],
    ) -> str:
        """Record that a review passed, so it is not asked for again until the reviewed
        content changes. Call it when a review task's reviewer found nothing left to fix."""
        if not review_id.strip():
            return REVIEW_ID_EMPTY
        if ".." in review_id or review_id.startswith("/") or any(c in review_id for c in "/\\\0"):
            return REVIEW_ID_TRAVERSAL
        return cast(str, await passed(review_id=review_id))
