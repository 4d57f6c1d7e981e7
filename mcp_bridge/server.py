"""``create_server``: the FastMCP server an agent talks to, with the ``deepwork`` toolset.

Tools are thin: parse, call one service, shape the answer. Services are sync and
transactional, so each tool runs them in Django's database thread.
"""

from __future__ import annotations

import importlib.metadata
import logging
import threading
from pathlib import Path
from typing import Annotated

import anyio
from channels.db import database_sync_to_async
from fastmcp import Context, FastMCP
from fastmcp.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import Field

from reviews.gate import ClaudeReviewer, CommandReviewer
from reviews.services import GateConfig, step_finish_gated
from workflows.errors import WorkflowError
from workflows.models import Agent, Project
from workflows.schemas import (
    AbortWorkflowResponse,
    FinishedStepResponse,
    GetWorkflowsResponse,
    GoToStepResponse,
    JobInfo,
    JobLoadErrorInfo,
    StartWorkflowResponse,
    WorkflowInfo,
)
from workflows.services import agents as agent_services
from workflows.services import sessions as session_services
from workflows.services.catalog import REPAIR_HINT, Catalog
from workflows.services.projects import project_ensure

logger = logging.getLogger("deepwork.mcp")

SERVER_NAME = "deepwork"


def _server_version() -> str:
    try:
        return importlib.metadata.version("deepwork-server")
    except importlib.metadata.PackageNotFoundError:
        return "0.0.0+unknown"


EXTERNAL_RUNNERS = ("claude",)

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


class ServerState:
    """What one server instance knows: its project, catalog and agent (claimed lazily)."""

    def __init__(
        self,
        *,
        project_root: Path,
        enable_quality_gate: bool,
        quality_gate_timeout: int,
        quality_gate_max_attempts: int,
        external_runner: str | None,
        external_runner_cmd: str | None,
        platform: str | None,
        agent_id: str | None,
    ):
        self.project_root = project_root
        self.enable_quality_gate = enable_quality_gate
        self.quality_gate_timeout = quality_gate_timeout
        self.quality_gate_max_attempts = quality_gate_max_attempts
        self.external_runner = external_runner
        self.platform = platform
        self.gate = self._gate_config(external_runner, external_runner_cmd)
        self.requested_agent_id = agent_id
        self.holder = agent_services.ProcessHolder.for_this_process()
        self._lock = threading.Lock()
        self._project: Project | None = None
        self._catalog: Catalog | None = None
        self._agent: Agent | None = None
        self.last_stack: list = []
        self._workflows_answer: tuple[object, GetWorkflowsResponse] | None = None

    def _gate_config(
        self, external_runner: str | None, external_runner_cmd: str | None
    ) -> GateConfig | None:
        if not self.enable_quality_gate:
            return None
        if external_runner_cmd:
            reviewer = CommandReviewer(external_runner_cmd)
        elif external_runner == "claude":
            reviewer = ClaudeReviewer()
        else:
            reviewer = None
        return GateConfig(
            reviewer=reviewer,
            timeout=self.quality_gate_timeout,
            max_attempts=self.quality_gate_max_attempts,
        )

    def project(self) -> Project:
        with self._lock:
            if self._project is None:
                self._project = project_ensure(root_path=self.project_root)
                self._catalog = Catalog(self._project)
            return self._project

    def catalog(self) -> Catalog:
        self.project()
        assert self._catalog is not None
        return self._catalog

    def agent(self) -> Agent:
        project = self.project()
        with self._lock:
            if self._agent is None:
                self._agent = agent_services.agent_claim(
                    project=project, holder=self.holder, agent_id=self.requested_agent_id
                )
                logger.info("Serving %s as agent %s", self.project_root, self._agent.agent_id)
            return self._agent

    def ready(self) -> bool:
        return self._agent is not None

    def workflows_answer(self, view) -> GetWorkflowsResponse:
        """The get_workflows answer for a catalog view, built once per view."""
        cached = self._workflows_answer
        if cached is not None and cached[0] is view:
            return cached[1]
        answer = GetWorkflowsResponse(
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
                    job_name=error.dir_name,
                    job_dir=error.job_dir,
                    error=error.error + REPAIR_HINT,
                )
                for error in view.errors
            ],
        )
        self._workflows_answer = (view, answer)
        return answer

    def release(self) -> None:
        with self._lock:
            if self._agent is not None:
                agent_services.agent_release(agent=self._agent, holder=self.holder)


def _deepreview():
    # Imported on first use: the .deepreview pipeline (jsonschema, wcmatch) is not needed to
    # start serving, and start-up time is what an agent waits for.
    from reviews import deepreview

    return deepreview


def _fail(tool: str, exc: WorkflowError) -> ToolError:
    # DeepWork 0.9.1's clients see this exact prefix on every tool error.
    return ToolError(f"Error calling tool '{tool}': {exc}")


def _log_call(state: ServerState, tool: str, params: dict, stack: list | None = None) -> None:
    """Log one tool call with the caller's stack, as it stands after the call.

    The stack comes from the tool's own answer (or the last one seen), so logging costs no
    query.
    """
    if stack is not None:
        state.last_stack = stack
    logger.info(
        "tool=%s params=%s stack=%s depth=%d",
        tool,
        params,
        [f"{entry.workflow}:{entry.step}" for entry in state.last_stack],
        len(state.last_stack),
    )


# DeepWork 0.9.1 advertises this loose schema for its dict-returning tools; clients that
# validate structured content against a detailed schema pay for it on every call.
LOOSE_OBJECT = {"additionalProperties": True, "type": "object"}


def create_server(
    project_root: Path | str,
    enable_quality_gate: bool = True,
    quality_gate_timeout: int = 120,
    quality_gate_max_attempts: int = 3,
    external_runner: str | None = None,
    *,
    external_runner_cmd: str | None = None,
    platform: str | None = None,
    agent_id: str | None = None,
    auth=None,
) -> FastMCP:
    """Build the ``deepwork`` MCP server for one project folder."""
    root = Path(project_root).resolve()
    if not root.is_dir():
        raise ValueError(f"Project root is not a directory: {project_root}")
    if external_runner is not None and external_runner not in EXTERNAL_RUNNERS:
        raise ValueError(
            f"Unknown external runner {external_runner!r}; choose one of {EXTERNAL_RUNNERS}"
        )
    state = ServerState(
        project_root=root,
        enable_quality_gate=enable_quality_gate,
        quality_gate_timeout=quality_gate_timeout,
        quality_gate_max_attempts=quality_gate_max_attempts,
        external_runner=external_runner,
        external_runner_cmd=external_runner_cmd,
        platform=platform,
        agent_id=agent_id,
    )
    mcp = FastMCP(
        SERVER_NAME,
        instructions=INSTRUCTIONS,
        version=_server_version(),
        auth=auth,
        mask_error_details=True,
    )
    mcp.deepwork_state = state  # for the mcpserve command (heartbeat, release) and tests

    def run_db(fn):
        return database_sync_to_async(fn)

    def fail(tool: str, params: dict, exc: WorkflowError) -> ToolError:
        _log_call(state, tool, params)
        return _fail(tool, exc)

    async def session_call(tool: str, params: dict, service, prepare=None, **kwargs):
        """Run one session service for the calling agent in the database thread; ``prepare``
        computes further arguments there too."""

        def call():
            try:
                extra = prepare() if prepare is not None else {}
                answer = service(project=state.project(), agent=state.agent(), **kwargs, **extra)
            except WorkflowError as exc:
                raise fail(tool, params, exc) from None
            _log_call(state, tool, params, answer.stack)
            return answer

        return await run_db(call)()

    @mcp.tool(annotations=ToolAnnotations(readOnlyHint=True), output_schema=LOOSE_OBJECT)
    async def get_workflows() -> GetWorkflowsResponse:
        """List every available job and its workflows. Call this first, before starting any
        workflow, to learn the exact job and workflow names. Jobs whose job.yml fails to load
        are listed under `errors` with the reason."""

        def call() -> GetWorkflowsResponse:
            answer = state.workflows_answer(state.catalog().view())
            _log_call(state, "get_workflows", {})
            return answer

        return await run_db(call)()

    @mcp.tool(output_schema=LOOSE_OBJECT)
    async def start_workflow(
        goal: Annotated[str, Field(description="What the user wants to accomplish.")],
        job_name: Annotated[
            str, Field(description="The job's name as get_workflows lists it (or its folder).")
        ],
        workflow_name: Annotated[
            str,
            Field(
                description="The workflow within the job. A job with a single workflow runs "
                "it whatever name is given; otherwise an unknown name lists the available ones."
            ),
        ],
        instance_id: Annotated[
            str | None,
            Field(description="Optional label for this run, e.g. 'acme' or 'q1-2026'."),
        ] = None,
    ) -> StartWorkflowResponse:
        """Start a workflow and get its first step: instructions, expected outputs (with the
        value syntax `finished_step` wants for each) and the reviews it must pass. Starting
        while another workflow is active nests the new one on top of the stack; finishing it
        resumes the one below."""
        params = {"job_name": job_name, "workflow_name": workflow_name, "instance_id": instance_id}

        return await session_call(
            "start_workflow",
            params,
            session_services.session_start,
            prepare=lambda: {"catalog": state.catalog().view()},
            job_name=job_name,
            workflow_name=workflow_name,
            goal=goal,
            instance_id=instance_id,
        )

    @mcp.tool(output_schema=LOOSE_OBJECT)
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
        ctx: Context = None,
    ) -> FinishedStepResponse:
        """Report that the current step is done and hand in its outputs. The answer's
        `status` says what next: `needs_work` (fix what `feedback` says and call again),
        `next_step` (follow `begin_step`) or `workflow_complete` (done; see `all_outputs`)."""
        params = {"outputs": outputs, "session_id": session_id}
        if not state.ready():
            await run_db(state.agent)()

        async def progress(done: float, total: float, message: str) -> None:
            await ctx.report_progress(done, total, message)

        try:
            answer = await step_finish_gated(
                project=state.project(),
                agent=state.agent(),
                gate=state.gate,
                outputs=outputs,
                notes=notes,
                override_reason=quality_review_override_reason,
                session_id=session_id,
                progress=progress,
            )
        except WorkflowError as exc:
            raise fail("finished_step", params, exc) from None
        _log_call(state, "finished_step", params, answer.stack)
        return answer

    @mcp.tool(output_schema=LOOSE_OBJECT)
    async def abort_workflow(
        explanation: Annotated[str, Field(description="Why the workflow is being aborted.")],
        session_id: Annotated[
            str | None,
            Field(description="The session to abort. Defaults to the top of your stack."),
        ] = None,
    ) -> AbortWorkflowResponse:
        """Abort a workflow that cannot be completed. The session is marked aborted with your
        explanation and the workflow below it on the stack, if any, resumes."""
        params = {"session_id": session_id}

        return await session_call(
            "abort_workflow",
            params,
            session_services.session_abort,
            explanation=explanation,
            session_id=session_id,
        )

    @mcp.tool(output_schema=LOOSE_OBJECT)
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
        params = {"step_id": step_id, "session_id": session_id}

        return await session_call(
            "go_to_step",
            params,
            session_services.session_go_to_step,
            step_id=step_id,
            session_id=session_id,
        )

    async def off_loop(tool: str, params: dict, fn):
        # The review pipeline reads files and runs git: keep it off the event loop.
        answer = await anyio.to_thread.run_sync(fn)
        _log_call(state, tool, params)
        return answer

    @mcp.tool(annotations=ToolAnnotations(readOnlyHint=False))
    async def get_review_instructions(
        files: Annotated[
            list[str] | None,
            Field(
                description="Files to review, relative to the project root. Omit to review "
                "what changed on this branch (against main/master) plus uncommitted and "
                "untracked files."
            ),
        ] = None,
    ) -> str:
        """Turn the project's `.deepreview` rules into review tasks for the given (or changed)
        files. Returns a list of tasks (name, description, subagent_type, prompt) to run in
        parallel as sub-agents; each prompt points at an instructions file. When a review
        passes, call `mark_review_as_passed` with its id so it is not asked for again until one
        of its files changes. Works outside any workflow."""
        return await off_loop(
            "get_review_instructions",
            {"files": files},
            lambda: _deepreview().get_review_instructions(
                project_root=state.project_root, files=files, platform=state.platform
            ),
        )

    @mcp.tool(annotations=ToolAnnotations(readOnlyHint=True))
    async def get_configured_reviews(
        only_rules_matching_files: Annotated[
            list[str] | None,
            Field(
                description="Only list rules that match at least one of these files "
                "(relative to the project root). Omit to list every rule."
            ),
        ] = None,
    ) -> list[dict[str, str]]:
        """List the review rules configured in the project's `.deepreview` files: each rule's
        name, description and defining file with line. Files that fail to parse are listed as
        `PARSE_ERROR:<path>` entries. Works outside any workflow."""
        return await off_loop(
            "get_configured_reviews",
            {"only_rules_matching_files": only_rules_matching_files},
            lambda: _deepreview().get_configured_reviews(
                project_root=state.project_root,
                only_rules_matching_files=only_rules_matching_files,
            ),
        )

    @mcp.tool
    async def mark_review_as_passed(
        review_id: Annotated[
            str, Field(description="The review id named in the review's instructions file.")
        ],
    ) -> str:
        """Record that a review from `get_review_instructions` passed, so it is skipped until
        one of its files changes."""
        return await off_loop(
            "mark_review_as_passed",
            {"review_id": review_id},
            lambda: _deepreview().mark_review_as_passed(
                project_root=state.project_root, review_id=review_id
            ),
        )

    return mcp
