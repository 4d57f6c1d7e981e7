"""DeepWork 0.14's rules: stacks named by the caller's conversation (and sub-agent) id, typed
step arguments, step inputs carried from the start inputs and earlier outputs, ``json_schema``
checks, and reviews the agent runs itself as review tasks.

A 0.14 client names its stack with ``session_id`` (its conversation id) and, for a sub-agent,
``agent_id``. Each such stack is held by an ``Agent`` row of its own
(``conversation_stack_agent``), so every stack rule of the engine (one top per agent, the
compare-and-set ``revision``, the live overview) applies to 0.14 stacks unchanged, and 0.9.1
stacks never see 0.14 sessions. Rows are ``WorkflowSession``/``StepRun`` like any other, marked
``generation = "0.14"``; a restarted server continues from them.

Where this differs from 0.14.0 on purpose: ``inputs`` given to ``start_workflow`` reach every
step that declares them, also after ``go_to_step`` (0.14.0 keeps them on the first step only);
an output produced by an earlier step wins over a start input of the same name.
"""

from __future__ import annotations

import re
import uuid
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from workflows import yaml_bounded
from workflows.errors import InvalidInput, JobBroken, NotFound, WorkflowError
from workflows.files import read_regular_text
from workflows.generations.base import Conversation, Value
from workflows.generations.v0_9 import read_step_instructions
from workflows.jobdefs.base import RtStep, RtWorkflow
from workflows.jobdefs.parse import runtime_workflow
from workflows.models import Agent, Job, Project, SessionJob, Step, Workflow, WorkflowSession
from workflows.outputs import check_output_path
from workflows.results import Stack
from workflows.selectors import session_top, stack_for_agent
from workflows.services.agents import agent_ensure

NO_ACTIVE_FINISH = (
    "No active workflow session. Provide the session_id from the start_workflow response "
    "(begin_step.session_id). If you want to resume a workflow, just start it again and call "
    "finished_step with quality_review_override_reason until you get back to your prior step."
)
NO_ACTIVE = "No active workflow session. Use start_workflow to begin a workflow."
ABORT_TOLD_NEXT = (
    "Nothing was handed in. Call finished_step again with the same session_id to go on with the "
    "workflow below it, if any, or start one with start_workflow."
)
JSON_SCHEMA_FAILED = "JSON schema validation failed:"
MAX_SCHEMA_FILE_BYTES = 16 * 1024 * 1024
# A handed-in file is bounded as a job file is, except that its values may fill the file.
HANDED_IN_LIMITS = yaml_bounded.Limits(chars=MAX_SCHEMA_FILE_BYTES)
_UNREADABLE: tuple[type[Exception], ...] = (OSError, *yaml_bounded.LOAD_ERRORS)

# Conversation and agent ids become part of an agent key and, in 0.14.0, of file names; path
# characters are refused rather than sanitised.
_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,99}$")
AGENT_PREFIX = "dw14:"


def stack_id_clean(field: str, value: str) -> str:
    """``session_id``/``agent_id`` as given, or ``InvalidInput`` naming the rule."""
    if not _ID.match(value) or ".." in value:
        raise InvalidInput(
            f"{field} must be 1 to 100 characters: letters, digits, '_', '-', '.' or ':', "
            f"starting with a letter or digit, without '..'; got {value[:120]!r}"
        )
    return value


def stack_agent_key(conversation_id: str, agent_id: str | None) -> str:
    key = f"{AGENT_PREFIX}{conversation_id}"
    return f"{key}/{agent_id}" if agent_id else key


def conversation_stack_agent(
    *, project: Project, conversation_id: str, agent_id: str | None = None, create: bool = False
) -> Agent | None:
    """The agent row holding the stack of (``conversation_id``, ``agent_id``) in ``project``.

    ``agent_id`` None is the conversation's main stack. With ``create`` the row is made when
    new (inside the caller's transaction, if any); otherwise None when the stack never existed.
    This is the one place that maps 0.14's stack names to agents, for any interface.
    """
    stack_id_clean("session_id", conversation_id)
    if agent_id is not None:
        stack_id_clean("agent_id", agent_id)
    key = stack_agent_key(conversation_id, agent_id)
    if create:
        return agent_ensure(project=project, agent_id=key)
    return Agent.objects.filter(project=project, agent_id=key).first()


def top_session(agent: Agent | None, *, untold_aborts: bool = False) -> WorkflowSession | None:
    if agent is None:
        return None
    return session_top(agent=agent, untold_aborts=untold_aborts)


def conversation_stack(
    *, project: Project, conversation_id: str, agent_id: str | None = None
) -> Stack:
    """What a 0.14 answer's ``stack`` shows: the main stack, then the sub-agent's own."""
    main = conversation_stack_agent(project=project, conversation_id=conversation_id)
    items: Stack = stack_for_agent(agent=main) if main is not None else ()
    if agent_id:
        sub = conversation_stack_agent(
            project=project, conversation_id=conversation_id, agent_id=agent_id
        )
        if sub is not None:
            items += stack_for_agent(agent=sub)
    return items


# --- results ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Begun:
    """A step just started: what 0.14's ``begin_step`` shows."""

    session: WorkflowSession
    workflow: RtWorkflow
    step: RtStep
    input_values: dict[str, Value | None]
    body: str  # the step's instructions, or the sub-workflow delegation sentence
    project_root: Path


@dataclass(frozen=True)
class Started:
    begun: Begun
    stack: Stack


@dataclass(frozen=True)
class Advanced:
    begun: Begun
    stack: Stack


@dataclass(frozen=True)
class Completed:
    workflow: RtWorkflow
    all_outputs: dict[str, Value]
    stack: Stack


@dataclass(frozen=True)
class Aborted:
    session: WorkflowSession
    step_name: str
    explanation: str
    resumed: WorkflowSession | None
    stack: Stack


@dataclass(frozen=True)
class WentToStep:
    begun: Begun
    invalidated_steps: tuple[str, ...]
    stack: Stack


# --- rules -----------------------------------------------------------------------------------


DELEGATION = (
    "This step delegates to a sub-workflow. Call `start_workflow` with "
    'job_name="{job}" and workflow_name="{workflow}", then follow the instructions it returns '
    "until the sub-workflow completes."
)


def step_body(job: Job, workflow: RtWorkflow, step: RtStep) -> str:
    if step.sub_workflow is not None:
        name, other_job = step.sub_workflow
        return DELEGATION.format(job=other_job or workflow.job_name, workflow=name)
    if step.instructions is not None:
        return step.instructions
    # A 0.9.1-format job: its instructions file, read as the 0.9.1 engine reads it.
    step_row = Step(step_id=step.key, instructions_file=step.instructions_file or "")
    return read_step_instructions(job, step_row)


def runtime_workflow_of(session: WorkflowSession) -> RtWorkflow:
    return runtime_workflow(session.job.definition, session.workflow_name)


def current_rt_step(session: WorkflowSession, workflow: RtWorkflow) -> RtStep:
    index = session.current_entry_index
    if index >= len(workflow.steps) or workflow.steps[index].key != session.current_step_id:
        raise JobBroken(f"Current step not found: {session.current_step_id}")
    return workflow.steps[index]


def check_typed_outputs(*, step: RtStep, outputs: dict[str, Value], project_root: Path) -> None:
    """0.14's output checks, in its order and texts, with this server's path
    rules (files inside the project) on top."""
    declared = {arg.name: arg for arg in step.outputs}
    unknown = sorted(set(outputs) - set(declared))
    if unknown:
        raise InvalidInput(
            f"Unknown output names: {', '.join(unknown)}. "
            f"Declared outputs: {', '.join(sorted(declared))}"
        )
    missing = sorted(n for n, a in declared.items() if a.required and n not in outputs)
    if missing:
        raise InvalidInput(
            f"Missing required outputs: {', '.join(missing)}. "
            "All required outputs must be provided."
        )
    for name, value in outputs.items():
        arg = declared[name]
        if arg.type == "string":
            if not isinstance(value, str):
                raise InvalidInput(
                    f"Output '{name}' is type 'string' and must be a string, got "
                    f"{type(value).__name__}"
                )
            continue
        for path in [value] if isinstance(value, str) else value:
            check_output_path(name, path, project_root)


def schema_feedback(*, step: RtStep, outputs: dict[str, Value], project_root: Path) -> str | None:
    """The ``needs_work`` feedback when a ``file_path`` output fails its ``json_schema``."""
    from workflows import json_schemas

    lines: list[str] = []
    declared = {arg.name: arg for arg in step.outputs}
    for name, value in outputs.items():
        arg = declared[name]
        if arg.type != "file_path" or arg.json_schema is None:
            continue
        try:
            validator = json_schemas.validator(arg.json_schema)
        except json_schemas.SchemaProblem as exc:
            # A job stored before its schema was checked on load: refused, never followed.
            lines.append(f"- Output '{name}': its JSON schema cannot be used: {exc.message}")
            continue
        for path in [value] if isinstance(value, str) else value:
            try:
                text = read_regular_text(project_root / path, limit=MAX_SCHEMA_FILE_BYTES)
                data = yaml_bounded.load(text, name=path, limits=HANDED_IN_LIMITS)
            except _UNREADABLE as exc:
                lines.append(f"- Output '{name}' file '{path}': failed to parse: {exc}")
                continue
            error = json_schemas.best_error(validator, data)
            if error is not None:
                loc = " -> ".join(str(p) for p in error.path) if error.path else "root"
                lines.append(
                    f"- Output '{name}' file '{path}': JSON schema validation failed: "
                    f"Validation error at {loc}: {json_schemas.error_brief(error)}"
                )
    if not lines:
        return None
    return (
        f"{JSON_SCHEMA_FAILED}\n\n" + "\n".join(lines) + "\n\nFix these issues and call "
        "finished_step again."
    )


@dataclass(frozen=True)
class SchemaChecked:
    """``schema_feedback`` of ``outputs`` for ``step``, computed before the hand-in reached
    the database thread (see ``schema_feedback_ahead``)."""

    step: RtStep
    outputs: dict[str, Value]
    project_root: Path
    feedback: str | None


# Set by an interface around its finish call; read by ``output_feedback``, which uses it when
# it was computed for the very step, outputs and folder it is asked about.
schema_checked_ahead: ContextVar[SchemaChecked | None] = ContextVar(
    "schema_checked_ahead", default=None
)


def schema_step(*, project: Project, conversation_id: str, agent_id: str | None) -> RtStep | None:
    """The current step of the conversation's top 0.14 session, when an output of it has a
    ``json_schema`` to check; None otherwise, or when there is no such session (reads only)."""
    try:
        agent = conversation_stack_agent(
            project=project, conversation_id=conversation_id, agent_id=agent_id
        )
        session = top_session(agent)
        if session is None or session.generation != WorkflowSession.Generation.DEEPWORK_014:
            return None
        step = current_rt_step(session, runtime_workflow_of(session))
    except WorkflowError:
        return None
    if any(arg.type == "file_path" and arg.json_schema is not None for arg in step.outputs):
        return step
    return None


def schema_feedback_ahead(
    *, step: RtStep, outputs: dict[str, Value], project_root: Path
) -> SchemaChecked | None:
    """``schema_feedback`` computed with no database: reading, parsing and validating a
    handed-in file is the slow part of a hand-in, so an interface whose callers share one
    database thread runs this first, on a worker, and sets ``schema_checked_ahead``. None when
    the outputs fail the earlier checks (the hand-in then says so itself)."""
    try:
        check_typed_outputs(step=step, outputs=outputs, project_root=project_root)
    except WorkflowError:
        return None
    feedback = schema_feedback(step=step, outputs=outputs, project_root=project_root)
    return SchemaChecked(step, outputs, project_root, feedback)


class LaterGeneration:
    name = WorkflowSession.Generation.DEEPWORK_014.value
    abort_told_next = ABORT_TOLD_NEXT
    reviews_by_agent = True
    records_step_files = False
    carries_inputs = True
    index_word = "index"

    def stack_agent(
        self,
        *,
        project: Project,
        agent: Agent | None,
        conversation: Conversation | None,
        create: bool,
    ) -> Agent | None:
        assert conversation is not None
        return conversation_stack_agent(
            project=project,
            conversation_id=conversation.conversation_id,
            agent_id=conversation.agent_id,
            create=create,
        )

    def stack(self, *, project: Project, agent: Agent, conversation: Conversation | None) -> Stack:
        assert conversation is not None
        return conversation_stack(
            project=project,
            conversation_id=conversation.conversation_id,
            agent_id=conversation.agent_id,
        )

    def parent(
        self, *, project: Project, agent: Agent, conversation: Conversation | None
    ) -> WorkflowSession | None:
        assert conversation is not None
        parent = top_session(agent)
        if parent is None and conversation.agent_id:
            # A sub-agent's first workflow nests in its conversation's main stack.
            parent = top_session(
                conversation_stack_agent(
                    project=project, conversation_id=conversation.conversation_id
                )
            )
        return parent

    def session_fields(
        self,
        *,
        conversation: Conversation | None,
        instance_id: str | None,
        inputs: dict[str, Value] | None,
    ) -> dict[str, Any]:
        assert conversation is not None
        return {
            "session_id": uuid.uuid4().hex,
            "generation": self.name,
            "conversation_id": conversation.conversation_id,
            "conversation_agent": conversation.agent_id or "",
            "inputs": dict(inputs or {}),
        }

    def find_job(
        self, *, project: Project, catalog: Any, conversation: Conversation | None, job_name: str
    ) -> Job:
        assert conversation is not None
        session_job = SessionJob.objects.filter(
            project=project, conversation_id=conversation.conversation_id, job_name=job_name
        ).first()
        if session_job is not None:
            if session_job.job is None:
                raise JobBroken(f"Failed to parse session job '{job_name}': {session_job.error}")
            return session_job.job
        found = catalog.find(job_name)
        if found is None:
            broken = catalog.error_for(job_name)
            if broken is not None:
                raise JobBroken(f"Failed to parse job '{job_name}': {broken.error}")
            raise NotFound(f"Job not found: {job_name}")
        job: Job = Job.objects.get(pk=found.pk)
        return job

    def entries(self, job: Job, workflow: Workflow) -> Any:
        return runtime_workflow(job.definition, workflow.name)

    def current_entry(self, session: WorkflowSession, entries: Any) -> RtStep:
        return current_rt_step(session, entries)

    def step_rows(self, session: WorkflowSession, entry: RtStep) -> list[Step]:
        return [Step.objects.get(job_id=session.job_id, step_id=entry.key)]

    def find_step(self, entries: Any, step_id: str) -> int | None:
        index: int | None = entries.index_of(step_id)
        return index

    def step_names(self, entries: Any) -> list[str]:
        return [s.name for s in entries.steps]

    def entry_keys(self, entry: RtStep) -> list[str]:
        return [entry.key]

    def read_entry(self, job: Job, entries: Any, entry: RtStep) -> str:
        return step_body(job, entries, entry)

    def check_outputs(
        self, *, entry: RtStep, outputs: dict[str, Value], project_root: Path
    ) -> None:
        check_typed_outputs(step=entry, outputs=outputs, project_root=project_root)

    def output_feedback(
        self, *, entry: RtStep, outputs: dict[str, Value], project_root: Path
    ) -> str | None:
        checked = schema_checked_ahead.get()
        if (
            checked is not None
            and checked.step == entry
            and checked.outputs == outputs
            and checked.project_root == project_root
        ):
            return checked.feedback
        return schema_feedback(step=entry, outputs=outputs, project_root=project_root)

    def run_outputs(self, entry: RtStep, key: str, outputs: dict[str, Value]) -> dict[str, Value]:
        return outputs

    def input_values(
        self, session: WorkflowSession, entry: RtStep, produced: dict[str, Value]
    ) -> dict[str, Value | None]:
        start_inputs: dict[str, Value] = session.inputs or {}
        return {
            arg.name: produced[arg.name] if arg.name in produced else start_inputs.get(arg.name)
            for arg in entry.inputs
        }

    def begun(
        self,
        session: WorkflowSession,
        entries: Any,
        entry: RtStep,
        read: str,
        values: dict[str, Value | None],
    ) -> Begun:
        return Begun(session, entries, entry, values, read, Path(session.project.root_path))

    def completed(
        self, session: WorkflowSession, entries: Any, all_outputs: dict[str, Value], stack: Stack
    ) -> Completed:
        return Completed(workflow=entries, all_outputs=all_outputs, stack=stack)

    def aborted(
        self, session: WorkflowSession, explanation: str, step_id: str, stack: Stack
    ) -> Aborted:
        return Aborted(
            session=session,
            step_name=runtime_workflow_of(session).steps[session.current_entry_index].name,
            explanation=explanation,
            resumed=top_session(session.agent),
            stack=stack,
        )

    def invalidated(self, entries: Any, target: int, run_step_ids: list[str]) -> tuple[str, ...]:
        return tuple(s.name for s in entries.steps[target:])

    def started(self, *, begun: Any, stack: Stack) -> Started:
        return Started(begun=begun, stack=stack)

    def advanced(self, *, begun: Any, stack: Stack) -> Advanced:
        return Advanced(begun=begun, stack=stack)

    def went(self, *, begun: Any, invalidated_steps: tuple[str, ...], stack: Stack) -> WentToStep:
        return WentToStep(begun=begun, invalidated_steps=invalidated_steps, stack=stack)


LATER = LaterGeneration()
