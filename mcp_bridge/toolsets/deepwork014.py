"""The ``deepwork`` toolset by tool generation: DeepWork 0.9.1's, 0.14's, or both on one server.

``mcpserve --generation``:

- ``0.9``: exactly 0.9.1's tools (``toolsets.deepwork``).
- ``0.14``: exactly 0.14.0's tool names and input schemas, answered in its shapes and texts.
- ``both`` (default): 0.9.1's tools with the union of both generations' parameters, plus 0.14's
  ``register_session_job``, ``get_session_job`` and ``get_named_schemas``. Each session's
  generation is decided at ``start_workflow`` and stored with it: ``instance_id`` means 0.9.1;
  ``session_id``, ``inputs`` or ``agent_id`` mean 0.14; none of them means 0.9.1 on the
  ``claude`` platform (a 0.14 Claude client always sends ``session_id``), else 0.14. Later calls
  are routed by what they name: 0.14-only parameters (``work_summary``, ``agent_id``) or a
  ``session_id`` naming a live 0.14 stack go the 0.14 way; everything else is 0.9.1's path,
  unchanged. Sessionless tools (``get_workflows``, the review tools) answer in 0.9.1's wording;
  a review pass counts under 0.9.1's id and 0.14's alike (``deepreview.beside_014_gate``).

A 0.9.1-style start while this server has an active 0.14 stack, or a 0.14-style start while
its 0.9.1 stack is not empty, is refused: the two kinds of stacks never nest.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, NoReturn, cast

from fastmcp import Context, FastMCP
from mcp.types import ToolAnnotations
from pydantic import BaseModel, Field

from mcp_bridge.runner import tool
from mcp_bridge.state import ServerState, log_call
from mcp_bridge.toolsets import deepreview as deepreview_tools
from mcp_bridge.toolsets import deepwork
from mcp_bridge.toolsets.calls import Refusal, db_tool_call
from mcp_bridge.toolsets.deepwork import LOOSE_OBJECT, fail
from workflows.db import db_sync_to_async
from workflows.dialects import deepwork014 as dialect
from workflows.errors import InvalidInput, NotFound, WorkflowError
from workflows.generations import Conversation, v0_14
from workflows.results import NeedsWork
from workflows.selectors import generations
from workflows.selectors.deepschemas import named_schemas
from workflows.services import active, session_jobs, sessions

logger = logging.getLogger("deepwork.mcp")

GENERATIONS = ("0.9", "0.14", "both")
DEFAULT_GENERATION = "both"
TOOL_NAMES_014 = (
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
# Beyond both releases, for either generation's sessions (served in `both`).
REBIND_TOOLS = ("get_active_workflow", "validate_step_outputs")
TOOL_NAMES = deepwork.TOOL_NAMES + SESSION_JOB_TOOLS + REBIND_TOOLS

INSTRUCTIONS_014 = """\
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

BOTH_NOTE = """\
## DeepWork 0.14 clients
This server also speaks DeepWork 0.14: pass `session_id` (your conversation id) and, for
sub-agents, `agent_id` to `start_workflow`, `finished_step`, `abort_workflow` and `go_to_step`;
`inputs` and `work_summary` work as in 0.14, and `register_session_job`, `get_session_job` and
`get_named_schemas` are available."""


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


def instructions_for(generation: str, project_root: Path) -> str:
    if generation == "0.14":
        scan = startup_scan(project_root)
        if scan.issues:
            return f"{ISSUE_HEAD}\n\n" + "\n".join(scan.issues) + f"\n\n{INSTRUCTIONS_014}"
        if scan.jobs:
            listing = "\n".join(
                f"- **{name}** ({', '.join(workflows)}): {summary}"
                for name, workflows, summary in scan.jobs
            )
            if len(listing) > INSTRUCTIONS_LIST_LIMIT:
                listing = "This project has many jobs; call `get_workflows` to list them."
            return (
                "## Available Workflows\n\nThis project uses DeepWork: `/deepwork` starts one "
                f"of these workflows.\n\n{listing}\n\n{INSTRUCTIONS_014}"
            )
        return INSTRUCTIONS_014
    if generation == "both":
        return f"{deepwork.INSTRUCTIONS}\n{BOTH_NOTE}\n"
    return deepwork.INSTRUCTIONS


def _platform(state: ServerState) -> str:
    return state.platform or "claude"


# Conversations this server process started 0.14 workflows for, for the mixed-stack check.
_conversations: dict[str, set[str]] = {}


def _started_here(state: ServerState) -> set[str]:
    # Over /mcp one state serves many tokens: each sees only its own conversations.
    key = f"{id(state)}:{state.conversation_scope()}"
    return _conversations.setdefault(key, set())


class WireCalls:
    """The tools' calls into the one session service and finish pipeline, sync, for the database
    thread: the caller's session_id mapped to its stack, answers shaped for the wire."""

    def __init__(self, state: ServerState, issue: str | None = None) -> None:
        self.state = state
        # 0.14's `issue_detected`, added to every answer while set (--generation 0.14).
        self.issue = issue
        self._answer: tuple[object, dialect.GetWorkflowsResponse] | None = None

    def conversation(self, session_id: str) -> str:
        """The stored conversation id (stack key) of the caller's ``session_id``: as given on
        stdio; over ``/mcp`` under the request's token, so two tokens using the same
        ``session_id`` never share a stack (the raw id is checked first, so errors name it)."""
        if self.state.conversation_scope():
            v0_14.stack_id_clean("session_id", session_id)
        return self.state.conversation_id(session_id)

    def shown(self, answer: Any) -> Any:
        """``answer`` with every ``session_id`` as the caller named it."""
        if not self.state.conversation_scope() or not isinstance(answer, BaseModel):
            return answer
        update: dict[str, Any] = {}
        for name in type(answer).model_fields:
            value = getattr(answer, name)
            if name == "session_id" and isinstance(value, str):
                update[name] = self.state.session_id_shown(value)
            elif isinstance(value, BaseModel):
                update[name] = self.shown(value)
        return answer.model_copy(update=update) if update else answer

    def out(self, answer: Any) -> Any:
        """``answer`` with 0.14's trailing ``issue_detected`` when the startup scan found
        broken job files."""
        if self.issue is None:
            return answer
        if isinstance(answer, BaseModel):
            answer = answer.model_dump(mode="json")
        return {**answer, "issue_detected": self.issue}

    def get_workflows(self) -> dialect.GetWorkflowsResponse:
        view = self.state.catalog().view()
        if self._answer is not None and self._answer[0] is view:
            return self.out(self._answer[1])
        agents = generations.workflow_agents(job_pks=[job.pk for job in view.jobs])
        answer = dialect.workflows(view, agents)
        self._answer = (view, answer)
        return self.out(answer)

    def check_no_091_stack(self) -> None:
        generations.refuse_014_inside_091(agent=self.state.agent())

    def check_no_014_stack(self) -> None:
        project = self.state.project()
        generations.refuse_091_inside_014(
            project=project,
            stacks=[
                (
                    conversation,
                    v0_14.conversation_stack_agent(project=project, conversation_id=conversation),
                )
                for conversation in sorted(_started_here(self.state))
            ],
        )

    def start(
        self,
        *,
        goal: str,
        job_name: str,
        workflow_name: str,
        session_id: str | None,
        inputs: dict[str, str | list[str]] | None,
        agent_id: str | None,
        mixed_check: bool,
    ) -> dialect.StartWorkflowResponse:
        state = self.state
        view = state.catalog().view()
        if not session_id:
            # The job is looked up first, as 0.14 does: an unknown job says so either way.
            if view.find(job_name) is None and view.error_for(job_name) is None:
                raise NotFound(f"Job not found: {job_name}")
            if _platform(state) == "claude":
                raise InvalidInput(dialect.START_NEEDS_SESSION_ID)
            session_id = uuid.uuid4().hex
        conversation = self.conversation(session_id)
        if mixed_check:
            self.check_no_091_stack()
        result = sessions.session_start(
            project=state.project(),
            catalog=view,
            conversation=Conversation(conversation, agent_id or None),
            job_name=job_name,
            workflow_name=workflow_name,
            goal=goal,
            inputs=inputs,
        )
        _started_here(state).add(conversation)
        return self.out(self.shown(dialect.started(result)))

    def finish(
        self,
        *,
        session_id: str,
        agent_id: str | None,
        outputs: dict[str, str | list[str]],
        work_summary: str | None,
        override_reason: str | None,
    ) -> dialect.FinishedStepResponse:
        from reviews import services

        checkpoint = sessions.step_checkpoint(
            project=self.state.project(),
            conversation=Conversation(self.conversation(session_id), agent_id),
            outputs=outputs,
            notes=work_summary,
        )
        outcome = services.step_finish_by_tasks(
            checkpoint=checkpoint,
            override_reason=override_reason,
            reviews_enabled=self.state.gate is not None,
            honour_091_ids=deepreview_tools.beside_014_gate(self.state),
            commands=self.state.review_commands(),
        )
        if isinstance(outcome, NeedsWork):
            return self.out(dialect.needs_work(outcome))
        return self.out(self.shown(dialect.finished(outcome)))

    def abort(
        self, *, session_id: str, agent_id: str | None, explanation: str
    ) -> dialect.AbortWorkflowResponse:
        return self.out(
            dialect.aborted(
                sessions.session_abort(
                    project=self.state.project(),
                    conversation=Conversation(self.conversation(session_id), agent_id),
                    explanation=explanation,
                )
            )
        )

    def go_to_step(
        self, *, session_id: str, agent_id: str | None, step_id: str
    ) -> dialect.GoToStepResponse:
        return self.out(
            self.shown(
                dialect.went_to_step(
                    sessions.session_go_to_step(
                        project=self.state.project(),
                        conversation=Conversation(self.conversation(session_id), agent_id),
                        step_id=step_id,
                    )
                )
            )
        )

    def register_session_job(
        self, *, session_id: str, job_name: str, yaml_text: str
    ) -> dict[str, Any]:
        try:
            registered = session_jobs.session_job_register(
                project=self.state.project(),
                platform=_platform(self.state),
                conversation_id=self.conversation(session_id),
                job_name=job_name,
                yaml_text=yaml_text,
            )
        except InvalidInput as exc:
            return self.out(dialect.soft_error(str(exc)))
        return self.out(
            {
                "status": "registered",
                "job_name": registered.job_name,
                "job_dir": registered.job_dir,
                "message": f"Session job '{job_name}' registered successfully. It can be started "
                f"with start_workflow(job_name='{job_name}', ...).",
            }
        )

    def get_session_job(self, *, session_id: str, job_name: str) -> dict[str, Any]:
        try:
            text = session_jobs.session_job_text(
                project=self.state.project(),
                conversation_id=self.conversation(session_id),
                job_name=job_name,
            )
        except WorkflowError as exc:
            message = str(exc)
            if self.state.conversation_scope():
                message = message.replace(self.conversation(session_id), session_id)
            return self.out(dialect.soft_error(message))
        return self.out({"job_name": job_name, "job_definition_yaml": text})

    def names_091(self, session_id: str | None) -> bool:
        return generations.names_091_session(project=self.state.project(), session_id=session_id)

    def active_workflow(
        self, *, session_id: str | None, agent_id: str | None
    ) -> dialect.ActiveWorkflowResponse:
        from workflows.dialects import deepwork as dialect091

        state = self.state
        if agent_id is None and self.names_091(session_id):
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
                conversation_id=self.conversation(session_id),
                agent_id=agent_id,
            )
            assert found.begun_by_conversation is not None
            current = self.shown(dialect.active_step(found.begun_by_conversation)).model_dump()
            stack = dialect.stack(found.stack)
        session = found.session
        return dialect.ActiveWorkflowResponse(
            generation=session.generation,
            session_id=self.state.session_id_shown(session.conversation_id)
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
        self,
        *,
        outputs: dict[str, str | list[str]],
        session_id: str | None,
        agent_id: str | None,
    ) -> dialect.ValidateStepOutputsResponse:
        state = self.state
        if agent_id is None and self.names_091(session_id):
            result = active.validate_by_agent(
                project=state.project(), agent=state.agent(), outputs=outputs, session_id=session_id
            )
        else:
            if session_id is None:
                raise InvalidInput("agent_id needs the session_id of its conversation")
            result = active.validate_by_conversation(
                project=state.project(),
                conversation_id=self.conversation(session_id),
                agent_id=agent_id,
                outputs=outputs,
            )
        return dialect.ValidateStepOutputsResponse(
            valid=not result.errors, step_id=result.step_id, errors=list(result.errors)
        )

    def live_014(self, session_id: str | None, agent_id: str | None) -> bool:
        if not session_id:
            return False
        try:
            key = v0_14.stack_agent_key(
                v0_14.stack_id_clean("session_id", self.conversation(session_id)), agent_id
            )
        except InvalidInput:
            return False
        return generations.names_014_stack(
            project=self.state.project(), session_id=session_id, stack_agent_key=key
        )


async def _db(state: ServerState, name: str, params: dict[str, Any], fn: Callable[[], Any]) -> Any:
    def refused(refusal: Refusal) -> NoReturn:
        raise fail(name, refusal.error if refusal.error is not None else refusal.message)

    return await db_tool_call(state, name, params, fn, refused=refused)


# --- parameter declarations shared by the 0.14 and the union tools -------------------------

SessionId = Annotated[
    str | None,
    Field(
        description="DeepWork 0.14: your conversation id (CLAUDE_CODE_SESSION_ID on Claude "
        "Code, else the begin_step.session_id start_workflow returned). It names your stack."
    ),
]
AgentId = Annotated[
    str | None,
    Field(description="DeepWork 0.14: a sub-agent's id (CLAUDE_CODE_AGENT_ID); its own stack."),
]
Inputs = Annotated[
    dict[str, str | list[str]] | None,
    Field(
        description="Values of the first step's declared inputs, by argument name: a string, "
        "or for file_path arguments a path or list of paths. They reach every step that "
        "declares them."
    ),
]
Outputs = Annotated[
    dict[str, str | list[str]],
    Field(
        description="Output name -> value: file_path outputs take a path or list of paths "
        "relative to the project root; string outputs take the string itself."
    ),
]
WorkSummary = Annotated[
    str | None,
    Field(description="What you did in this step; checked against its process requirements."),
]
Override = Annotated[
    str | None,
    Field(description="Skips every review of this step when given; say why."),
]


def _session_tools(mcp: FastMCP, state: ServerState, engine: WireCalls, prefix: str) -> None:
    """register_session_job, get_session_job and get_named_schemas (both 0.14 and both)."""

    @tool(mcp, name=f"{prefix}register_session_job", output_schema=LOOSE_OBJECT)
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
        return await _db(
            state,
            f"{prefix}register_session_job",
            {"job_name": job_name, "session_id": session_id},
            lambda: engine.register_session_job(
                session_id=session_id, job_name=job_name, yaml_text=job_definition_yaml
            ),
        )

    @tool(
        mcp,
        name=f"{prefix}get_session_job",
        output_schema=LOOSE_OBJECT,
        annotations=ToolAnnotations(read_only_hint=True),
    )
    async def get_session_job(
        job_name: Annotated[str, Field(description="The registered job's name.")],
        session_id: SessionId = None,
    ) -> dict[str, Any]:
        """Return the job.yml text this conversation registered under job_name, verbatim."""
        if not session_id:
            return dialect.soft_error(dialect.SESSION_ID_REQUIRED_JOBS)
        return await _db(
            state,
            f"{prefix}get_session_job",
            {"job_name": job_name, "session_id": session_id},
            lambda: engine.get_session_job(session_id=session_id, job_name=job_name),
        )

    @tool(
        mcp,
        name=f"{prefix}get_named_schemas",
        annotations=ToolAnnotations(read_only_hint=True),
    )
    async def get_named_schemas() -> list[dict[str, Any]]:
        """List the project's named DeepSchemas (.deepwork/schemas/<name>/deepschema.yml):
        name, summary and the file patterns each applies to."""
        answer = named_schemas(project_root=state.project_root)
        log_call(state, f"{prefix}get_named_schemas", {})
        return answer


def register_014(mcp: FastMCP, state: ServerState, prefix: str = "") -> None:
    """DeepWork 0.14's workflow tools with its exact parameters."""
    # Computed once per process, as 0.14 does: fixing a job does not clear it until restart.
    engine = WireCalls(state, issue=startup_scan(state.project_root).issue_detected)

    @tool(
        mcp,
        name=f"{prefix}get_workflows",
        annotations=ToolAnnotations(read_only_hint=True),
        output_schema=LOOSE_OBJECT,
    )
    async def get_workflows() -> dialect.GetWorkflowsResponse:
        """List every job and its workflows, each with how to invoke it. Call this first.
        Jobs whose job.yml fails to load are listed under `errors`."""
        return await _db(state, f"{prefix}get_workflows", {}, engine.get_workflows)

    @tool(mcp, name=f"{prefix}start_workflow", output_schema=LOOSE_OBJECT)
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
        return await _db(
            state,
            f"{prefix}start_workflow",
            {"job_name": job_name, "workflow_name": workflow_name, "session_id": session_id},
            lambda: engine.start(
                goal=goal,
                job_name=job_name,
                workflow_name=workflow_name,
                session_id=session_id,
                inputs=inputs,
                agent_id=agent_id,
                mixed_check=False,
            ),
        )

    @tool(mcp, name=f"{prefix}finished_step", output_schema=LOOSE_OBJECT)
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
        return await _db(
            state,
            f"{prefix}finished_step",
            {"outputs": outputs, "session_id": session_id},
            lambda: engine.finish(
                session_id=session_id,
                agent_id=agent_id,
                outputs=outputs,
                work_summary=work_summary,
                override_reason=quality_review_override_reason,
            ),
        )

    @tool(mcp, name=f"{prefix}abort_workflow", output_schema=LOOSE_OBJECT)
    async def abort_workflow(
        explanation: Annotated[str, Field(description="Why the workflow is being aborted.")],
        session_id: SessionId = None,
        agent_id: AgentId = None,
    ) -> Any:
        """Abort the workflow on top of your stack; the one below it, if any, resumes."""
        if not session_id:
            return dialect.soft_error(dialect.SESSION_ID_REQUIRED)
        return await _db(
            state,
            f"{prefix}abort_workflow",
            {"session_id": session_id},
            lambda: engine.abort(session_id=session_id, agent_id=agent_id, explanation=explanation),
        )

    @tool(mcp, name=f"{prefix}go_to_step", output_schema=LOOSE_OBJECT)
    async def go_to_step(
        step_id: Annotated[str, Field(description="The earlier (or current) step to return to.")],
        session_id: SessionId = None,
        agent_id: AgentId = None,
    ) -> Any:
        """Return the top workflow of your stack to an earlier step to redo work; progress
        from that step on is invalidated (files are kept)."""
        if not session_id:
            return dialect.soft_error(dialect.SESSION_ID_REQUIRED)
        return await _db(
            state,
            f"{prefix}go_to_step",
            {"step_id": step_id, "session_id": session_id},
            lambda: engine.go_to_step(session_id=session_id, agent_id=agent_id, step_id=step_id),
        )

    _session_tools(mcp, state, engine, prefix)


class _Capture:
    """Stands in for a server to collect 0.9.1's tool functions as ``deepwork.register``
    defines them, so the union tools can hand a 0.9.1 call to them unchanged."""

    def __init__(self) -> None:
        self.fns: dict[str, Callable[..., Awaitable[Any]]] = {}

    def tool(self, fn: Callable[..., Awaitable[Any]], *, name: str, **options: Any) -> None:
        self.fns[name] = fn


REVIEW_ID_EMPTY = "Validation error: review_id must not be empty."
REVIEW_ID_TRAVERSAL = "Validation error: review_id must not contain path traversal sequences."


def register_reviews(mcp: FastMCP, state: ServerState, prefix: str = "") -> None:
    """The three review tools; under ``--generation 0.14`` in 0.14's format and texts
    (``reviews.deepreview.agent_tasks``), and ``mark_review_as_passed`` answers bad ids with 0.14's
    texts (refusing any path separator, which 0.14.0 lets through)."""
    from mcp_bridge.toolsets import deepreview

    if getattr(state.config, "generation", DEFAULT_GENERATION) != "0.14":
        deepreview.register(mcp, state, prefix)
        return
    captured = _Capture()
    deepreview.register(cast(FastMCP, captured), state, prefix)
    passed = captured.fns[f"{prefix}mark_review_as_passed"]

    def pipeline() -> Any:
        # Imported on first use, as the 0.9.1 review tools do.
        from reviews.deepreview import agent_tasks

        return agent_tasks

    @tool(
        mcp,
        name=f"{prefix}get_review_instructions",
        annotations=ToolAnnotations(read_only_hint=False),
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
            await deepreview._off_loop(
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
        annotations=ToolAnnotations(read_only_hint=True),
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
            await deepreview._off_loop(
                state,
                f"{prefix}get_configured_reviews",
                {"only_rules_matching_files": only_rules_matching_files},
                lambda: pipeline().get_configured_reviews(
                    project_root=state.project_root,
                    only_rules_matching_files=only_rules_matching_files,
                ),
            ),
        )

    @tool(mcp, name=f"{prefix}mark_review_as_passed")
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


def register_both(mcp: FastMCP, state: ServerState, prefix: str = "") -> None:
    """0.9.1's tools with both generations' parameters, routed per call; plus the 0.14-only
    session-job and schema tools."""
    engine = WireCalls(state)
    # 0.9.1's own tool functions, registered on a private server: its path runs unchanged.
    legacy = _Capture()
    deepwork.register(cast(FastMCP, legacy), state)
    legacy_fn = legacy.fns

    @tool(
        mcp,
        name=f"{prefix}get_workflows",
        annotations=ToolAnnotations(read_only_hint=True),
        output_schema=LOOSE_OBJECT,
    )
    async def get_workflows() -> Any:
        """List every available job and its workflows. Call this first, before starting any
        workflow, to learn the exact job and workflow names. Jobs whose job.yml fails to load
        are listed under `errors` with the reason."""
        return await legacy_fn["get_workflows"]()

    @tool(mcp, name=f"{prefix}start_workflow", output_schema=LOOSE_OBJECT)
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
        is_014 = any(v is not None for v in (session_id, inputs, agent_id))
        if instance_id is not None and is_014:
            raise fail(
                name,
                "instance_id belongs to DeepWork 0.9.1 calls and session_id, inputs and "
                "agent_id to DeepWork 0.14 calls; a call cannot mix them",
            )
        if instance_id is None and not is_014 and _platform(state) != "claude":
            is_014 = True
        if not is_014:
            if _started_here(state):
                await _db(state, name, {}, engine.check_no_014_stack)
            return await legacy_fn["start_workflow"](
                goal=goal, job_name=job_name, workflow_name=workflow_name, instance_id=instance_id
            )
        return await _db(
            state,
            name,
            {"job_name": job_name, "workflow_name": workflow_name, "session_id": session_id},
            lambda: engine.start(
                goal=goal,
                job_name=job_name,
                workflow_name=workflow_name,
                session_id=session_id,
                inputs=inputs,
                agent_id=agent_id,
                mixed_check=True,
            ),
        )

    async def routes_014(session_id: str | None, agent_id: str | None, only_014: bool) -> bool:
        if only_014:
            return True
        if not session_id:
            # A 0.9.1 call on the top of the stack: answered without a hop to the database
            # thread, which costs more than the rest of a short 0.9.1 call's routing.
            return False
        return bool(await db_sync_to_async(engine.live_014)(session_id, None))

    @tool(mcp, name=f"{prefix}finished_step", output_schema=LOOSE_OBJECT)
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
        work_summary: WorkSummary = None,
        agent_id: AgentId = None,
        ctx: Context = None,  # type: ignore[assignment]  # FastMCP injects it
    ) -> Any:
        """Report that the current step is done and hand in its outputs. The answer's
        `status` says what next: `needs_work` (fix what `feedback` says and call again),
        `next_step` (follow `begin_step`) or `workflow_complete` (done; see `all_outputs`)."""
        name = f"{prefix}finished_step"
        only_014 = work_summary is not None or agent_id is not None
        if not await routes_014(session_id, agent_id, only_014):
            return await legacy_fn["finished_step"](
                outputs=outputs,
                notes=notes,
                quality_review_override_reason=quality_review_override_reason,
                session_id=session_id,
                ctx=ctx,
            )
        if not session_id:
            return dialect.soft_error(dialect.SESSION_ID_REQUIRED)
        return await _db(
            state,
            name,
            {"outputs": outputs, "session_id": session_id},
            lambda: engine.finish(
                session_id=session_id,
                agent_id=agent_id,
                outputs=outputs,
                work_summary=work_summary if work_summary is not None else notes,
                override_reason=quality_review_override_reason,
            ),
        )

    @tool(mcp, name=f"{prefix}abort_workflow", output_schema=LOOSE_OBJECT)
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
        if not await routes_014(session_id, agent_id, agent_id is not None):
            return await legacy_fn["abort_workflow"](explanation=explanation, session_id=session_id)
        if not session_id:
            return dialect.soft_error(dialect.SESSION_ID_REQUIRED)
        return await _db(
            state,
            f"{prefix}abort_workflow",
            {"session_id": session_id},
            lambda: engine.abort(session_id=session_id, agent_id=agent_id, explanation=explanation),
        )

    @tool(mcp, name=f"{prefix}go_to_step", output_schema=LOOSE_OBJECT)
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
        if not await routes_014(session_id, agent_id, agent_id is not None):
            return await legacy_fn["go_to_step"](step_id=step_id, session_id=session_id)
        if not session_id:
            return dialect.soft_error(dialect.SESSION_ID_REQUIRED)
        return await _db(
            state,
            f"{prefix}go_to_step",
            {"step_id": step_id, "session_id": session_id},
            lambda: engine.go_to_step(session_id=session_id, agent_id=agent_id, step_id=step_id),
        )

    _session_tools(mcp, state, engine, prefix)

    @tool(
        mcp,
        name=f"{prefix}get_active_workflow",
        output_schema=LOOSE_OBJECT,
        annotations=ToolAnnotations(read_only_hint=True),
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
        return await _db(
            state,
            f"{prefix}get_active_workflow",
            {"session_id": session_id, "agent_id": agent_id},
            lambda: engine.active_workflow(session_id=session_id, agent_id=agent_id),
        )

    @tool(
        mcp,
        name=f"{prefix}validate_step_outputs",
        output_schema=LOOSE_OBJECT,
        annotations=ToolAnnotations(read_only_hint=True),
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
        return await _db(
            state,
            f"{prefix}validate_step_outputs",
            {"session_id": session_id},
            lambda: engine.validate_outputs(
                outputs=outputs, session_id=session_id, agent_id=agent_id
            ),
        )


def register(mcp: FastMCP, state: ServerState, prefix: str = "") -> None:
    """The deepwork workflow tools of the server's generation (``ServerConfig.generation``)."""
    generation = getattr(state.config, "generation", DEFAULT_GENERATION)
    if generation == "0.9":
        deepwork.register(mcp, state, prefix)
    elif generation == "0.14":
        register_014(mcp, state, prefix)
    else:
        register_both(mcp, state, prefix)
