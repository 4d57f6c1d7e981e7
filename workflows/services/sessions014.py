"""DeepWork 0.14 sessions: stacks named by the caller's conversation (and sub-agent) id.

A 0.14 client names its stack with ``session_id`` (its conversation id) and, for a sub-agent,
``agent_id``. Each such stack is held by an ``Agent`` row of its own
(``conversation_stack_agent``), so every stack rule of the engine (one top per agent, the
compare-and-set ``revision``, the live overview) applies to 0.14 stacks unchanged, and 0.9.1
stacks never see 0.14 sessions. Rows are ``WorkflowSession``/``StepRun`` like any other, marked
``generation = "0.14"``; a restarted server continues from them.

Where this differs from 0.14.0 on purpose: ``inputs`` given to ``start_workflow`` reach every
step that declares them, also after ``go_to_step`` (0.14.0 keeps them on the first step only);
an output produced by an earlier step wins over a start input of the same name.

Why long, and temporary: these are the later generation's session rules beside the first
generation's; they fold into one session service over a ``Generation`` strategy, after which
only the stack keying, output checks and step inputs remain here.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import yaml
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from workflows import events, limits
from workflows.errors import InvalidInput, JobBroken, NotFound
from workflows.files import read_regular_text
from workflows.jobdefs.base import RtStep, RtWorkflow
from workflows.jobdefs.parse import runtime_workflow
from workflows.models import Agent, Event, Job, Project, SessionJob, Step, StepRun, WorkflowSession
from workflows.outputs import check_output_path
from workflows.results import Stack
from workflows.selectors import stack_for_agent
from workflows.services.agents import agent_ensure
from workflows.services.catalog import CatalogView
from workflows.services.sessions import (
    claim_session,
    read_step_instructions,
    resolve_workflow,
    session_abort_tell,
)

GENERATION = WorkflowSession.Generation.DEEPWORK_014

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

# Conversation and agent ids become part of an agent key and, in 0.14.0, of file names; path
# characters are refused rather than sanitised.
_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,99}$")
AGENT_PREFIX = "dw14:"

Value = str | list[str]


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


def _top(agent: Agent | None, *, untold_aborts: bool = False) -> WorkflowSession | None:
    if agent is None:
        return None
    live = Q(status=WorkflowSession.Status.ACTIVE)
    if untold_aborts:
        live |= Q(abort_untold=True)
    return (
        WorkflowSession.objects.select_related("job", "workflow")
        .filter(live, agent=agent)
        .order_by("-id")
        .first()
    )


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
class Begun014:
    """A 0.14 step just started: what ``begin_step`` shows."""

    session: WorkflowSession
    workflow: RtWorkflow
    step: RtStep
    input_values: dict[str, Value | None]
    body: str  # the step's instructions, or the sub-workflow delegation sentence
    project_root: Path


@dataclass(frozen=True)
class Started014:
    begun: Begun014
    stack: Stack


@dataclass(frozen=True)
class Checkpoint014:
    """A 0.14 hand-in whose outputs passed validation, read before any write."""

    project: Project
    session: WorkflowSession
    workflow: RtWorkflow
    step: RtStep
    outputs: dict[str, Value]
    work_summary: str | None
    conversation_id: str
    agent_id: str | None

    @property
    def project_root(self) -> Path:
        return Path(self.project.root_path)


@dataclass(frozen=True)
class Advanced014:
    begun: Begun014
    stack: Stack


@dataclass(frozen=True)
class Completed014:
    workflow: RtWorkflow
    all_outputs: dict[str, Value]
    stack: Stack


@dataclass(frozen=True)
class Aborted014:
    session: WorkflowSession
    step_name: str
    explanation: str
    resumed: WorkflowSession | None
    stack: Stack


@dataclass(frozen=True)
class WentToStep014:
    begun: Begun014
    invalidated_steps: tuple[str, ...]
    stack: Stack


# --- helpers ---------------------------------------------------------------------------------


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


def _merged_outputs(session: WorkflowSession) -> dict[str, Value]:
    merged: dict[str, Value] = {}
    for outputs in (
        StepRun.objects.filter(session=session, status=StepRun.Status.COMPLETED)
        .order_by("entry_index", "id")
        .values_list("outputs", flat=True)
    ):
        merged.update(outputs)
    return merged


def _input_values(
    session: WorkflowSession, step: RtStep, merged: dict[str, Value]
) -> dict[str, Value | None]:
    start_inputs: dict[str, Value] = session.inputs or {}
    values: dict[str, Value | None] = {}
    for arg in step.inputs:
        if arg.name in merged:
            values[arg.name] = merged[arg.name]
        else:
            values[arg.name] = start_inputs.get(arg.name)
    return values


def _start_run(
    *, session: WorkflowSession, step: RtStep, index: int, values: dict[str, Value | None]
) -> None:
    step_row = Step.objects.get(job_id=session.job_id, step_id=step.key)
    StepRun.objects.create(
        session=session,
        step_def=step_row,
        step_id=step.key,
        entry_index=index,
        input_values=values,
    )
    events.event_record(
        kind=Event.Kind.STEP_STARTED,
        project=session.project,
        session=session,
        agent=session.agent,
        payload=events.StepStarted(step_id=step.key, entry_index=index),
    )


def runtime_workflow_of(session: WorkflowSession) -> RtWorkflow:
    return runtime_workflow(session.job.definition, session.workflow_name)


def current_rt_step(session: WorkflowSession, workflow: RtWorkflow) -> RtStep:
    index = session.current_entry_index
    if index >= len(workflow.steps) or workflow.steps[index].key != session.current_step_id:
        raise JobBroken(f"Current step not found: {session.current_step_id}")
    return workflow.steps[index]


def _find_job(
    *, project: Project, catalog: CatalogView, conversation_id: str, job_name: str
) -> Job:
    session_job = SessionJob.objects.filter(
        project=project, conversation_id=conversation_id, job_name=job_name
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
    return Job.objects.get(pk=found.pk)


# --- services --------------------------------------------------------------------------------


def session014_start(
    *,
    project: Project,
    catalog: CatalogView,
    conversation_id: str,
    agent_id: str | None,
    job_name: str,
    workflow_name: str,
    goal: str,
    inputs: dict[str, Value] | None = None,
) -> Started014:
    """Push a new workflow on the (conversation, agent) stack and begin its first step."""
    limits.JOB_NAME.check("job_name", job_name)
    limits.WORKFLOW_NAME.check("workflow_name", workflow_name)
    limits.GOAL.check("goal", goal)
    stack_id_clean("session_id", conversation_id)
    if agent_id is not None:
        stack_id_clean("agent_id", agent_id)
    for name, value in (inputs or {}).items():
        for item in [value] if isinstance(value, str) else value:
            limits.GOAL.check(f"inputs.{name}", item)
    job = _find_job(
        project=project, catalog=catalog, conversation_id=conversation_id, job_name=job_name
    )
    workflow_row = resolve_workflow(job, workflow_name)
    workflow = runtime_workflow(job.definition, workflow_row.name)
    if not workflow.steps:
        raise JobBroken(f"Workflow '{workflow.name}' has no steps")
    first = workflow.steps[0]
    body = step_body(job, workflow, first)

    with transaction.atomic():
        agent = conversation_stack_agent(
            project=project, conversation_id=conversation_id, agent_id=agent_id, create=True
        )
        assert agent is not None
        parent = _top(agent)
        if parent is None and agent_id:
            parent = _top(
                conversation_stack_agent(project=project, conversation_id=conversation_id)
            )
        session = WorkflowSession.objects.create(
            session_id=uuid.uuid4().hex,
            project=project,
            agent=agent,
            parent=parent,
            job=job,
            workflow=workflow_row,
            job_name=job_name,
            workflow_name=workflow.name,
            goal=goal,
            current_step_id=first.key,
            generation=GENERATION,
            conversation_id=conversation_id,
            conversation_agent=agent_id or "",
            inputs=dict(inputs or {}),
        )
        events.event_record(
            kind=Event.Kind.SESSION_STARTED,
            project=project,
            session=session,
            agent=agent,
            payload=events.SessionStarted(
                job=job_name,
                workflow=workflow.name,
                goal=goal,
                parent=parent.session_id if parent else None,
            ),
        )
        values = _input_values(session, first, {})
        _start_run(session=session, step=first, index=0, values=values)
    begun = Begun014(session, workflow, first, values, body, Path(project.root_path))
    return Started014(
        begun=begun,
        stack=conversation_stack(
            project=project, conversation_id=conversation_id, agent_id=agent_id
        ),
    )


def session014_top(
    *,
    project: Project,
    conversation_id: str,
    agent_id: str | None,
    missing: str,
    untold_aborts: bool = False,
) -> WorkflowSession:
    """The top of the named stack, or ``NotFound(missing)`` when it is empty. With
    ``untold_aborts``, a session a person aborted on top of it, not yet told, is answered."""
    agent = conversation_stack_agent(
        project=project, conversation_id=conversation_id, agent_id=agent_id
    )
    session = _top(agent, untold_aborts=untold_aborts)
    if session is None:
        raise NotFound(missing)
    return session


def validate014_outputs(*, step: RtStep, outputs: dict[str, Value], project_root: Path) -> None:
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


def step014_checkpoint(
    *,
    project: Project,
    conversation_id: str,
    agent_id: str | None,
    outputs: dict[str, Value],
    work_summary: str | None = None,
) -> Checkpoint014:
    """Resolve the top of the named stack and validate the hand-in; nothing is written."""
    limits.check_outputs(outputs)
    limits.NOTES.check("work_summary", work_summary)
    session = session014_top(
        project=project,
        conversation_id=conversation_id,
        agent_id=agent_id,
        missing=NO_ACTIVE_FINISH,
        untold_aborts=True,
    )
    if session.status != WorkflowSession.Status.ACTIVE:
        session_abort_tell(session=session, then=ABORT_TOLD_NEXT)
        session = session014_top(
            project=project,
            conversation_id=conversation_id,
            agent_id=agent_id,
            missing=NO_ACTIVE_FINISH,
        )
    workflow = runtime_workflow_of(session)
    step = current_rt_step(session, workflow)
    validate014_outputs(step=step, outputs=outputs, project_root=Path(project.root_path))
    return Checkpoint014(
        project=project,
        session=session,
        workflow=workflow,
        step=step,
        outputs=outputs,
        work_summary=work_summary,
        conversation_id=conversation_id,
        agent_id=agent_id,
    )


def step014_advance(
    *, checkpoint: Checkpoint014, on_claimed: Callable[[], None] | None = None
) -> Advanced014 | Completed014:
    """Complete the current step and begin the next (or complete the workflow).

    Compare-and-sets the revision read by the checkpoint: of two hand-ins of one step,
    exactly one advances; the other gets ``Conflict`` and changes nothing. ``on_claimed``
    writes what let the hand-in pass, in the same transaction, once the claim succeeded.
    """
    session, workflow, step = checkpoint.session, checkpoint.workflow, checkpoint.step
    project = checkpoint.project
    index = session.current_entry_index + 1
    following = workflow.steps[index] if index < len(workflow.steps) else None
    body = None if following is None else step_body(session.job, workflow, following)
    now = timezone.now()
    with transaction.atomic():
        if following is None:
            claim_session(session, status=WorkflowSession.Status.COMPLETED, completed_at=now)
        else:
            claim_session(session, current_entry_index=index, current_step_id=following.key)
        if on_claimed is not None:
            on_claimed()
        StepRun.objects.filter(
            session=session, step_id=step.key, status=StepRun.Status.ACTIVE
        ).update(
            status=StepRun.Status.COMPLETED,
            outputs=checkpoint.outputs,
            notes=checkpoint.work_summary,
            completed_at=now,
        )
        events.event_record(
            kind=Event.Kind.STEP_FINISHED,
            project=project,
            session=session,
            agent=session.agent,
            payload=events.StepFinished(
                step_id=step.key, outputs=checkpoint.outputs, notes=checkpoint.work_summary
            ),
        )
        if following is None:
            events.event_record(
                kind=Event.Kind.SESSION_COMPLETED,
                project=project,
                session=session,
                agent=session.agent,
                payload=events.SessionCompleted(workflow=session.workflow_name),
            )
            values: dict[str, Value | None] = {}
        else:
            values = _input_values(session, following, _merged_outputs(session))
            _start_run(session=session, step=following, index=index, values=values)
    stack = conversation_stack(
        project=project, conversation_id=checkpoint.conversation_id, agent_id=checkpoint.agent_id
    )
    if following is None:
        return Completed014(workflow=workflow, all_outputs=_merged_outputs(session), stack=stack)
    assert body is not None
    return Advanced014(
        begun=Begun014(session, workflow, following, values, body, Path(project.root_path)),
        stack=stack,
    )


def session014_abort(
    *, project: Project, conversation_id: str, agent_id: str | None, explanation: str
) -> Aborted014:
    """Abort the top of the named stack (0.14 can target nothing else)."""
    limits.EXPLANATION.check("explanation", explanation)
    session = session014_top(
        project=project, conversation_id=conversation_id, agent_id=agent_id, missing=NO_ACTIVE
    )
    step_name = runtime_workflow_of(session).steps[session.current_entry_index].name
    now = timezone.now()
    with transaction.atomic():
        claim_session(
            session,
            status=WorkflowSession.Status.ABORTED,
            abort_reason=explanation,
            completed_at=now,
        )
        StepRun.objects.filter(session=session, status=StepRun.Status.ACTIVE).update(
            status=StepRun.Status.ABORTED, completed_at=now
        )
        events.event_record(
            kind=Event.Kind.SESSION_ABORTED,
            project=project,
            session=session,
            agent=session.agent,
            payload=events.SessionAborted(step_id=session.current_step_id, explanation=explanation),
        )
    return Aborted014(
        session=session,
        step_name=step_name,
        explanation=explanation,
        resumed=_top(session.agent),
        stack=conversation_stack(
            project=project, conversation_id=conversation_id, agent_id=agent_id
        ),
    )


def session014_go_to_step(
    *, project: Project, conversation_id: str, agent_id: str | None, step_name: str
) -> WentToStep014:
    """Return the top workflow of the named stack to ``step_name`` (an earlier or the current
    step); later progress is invalidated, the start inputs stay available."""
    limits.STEP_ID.check("step_id", step_name)
    session = session014_top(
        project=project, conversation_id=conversation_id, agent_id=agent_id, missing=NO_ACTIVE
    )
    workflow = runtime_workflow_of(session)
    target = workflow.index_of(step_name)
    if target is None:
        available = ", ".join(s.name for s in workflow.steps)
        raise NotFound(
            f"Step '{step_name}' not found in workflow '{workflow.name}'. "
            f"Available steps: {available}"
        )
    if target > session.current_entry_index:
        raise InvalidInput(
            f"Cannot go forward to step '{step_name}' (index {target} > current "
            f"{session.current_entry_index}). Use finished_step to advance forward."
        )
    step = workflow.steps[target]
    body = step_body(session.job, workflow, step)
    invalidated = tuple(s.name for s in workflow.steps[target:])
    with transaction.atomic():
        claim_session(session, current_entry_index=target, current_step_id=step.key)
        StepRun.objects.filter(
            session=session,
            entry_index__gte=target,
            status__in=[StepRun.Status.ACTIVE, StepRun.Status.COMPLETED],
        ).update(status=StepRun.Status.INVALIDATED)
        events.event_record(
            kind=Event.Kind.STEP_REOPENED,
            project=project,
            session=session,
            agent=session.agent,
            payload=events.StepReopened(step_id=step.key, invalidated_steps=list(invalidated)),
        )
        values = _input_values(session, step, _merged_outputs(session))
        _start_run(session=session, step=step, index=target, values=values)
    return WentToStep014(
        begun=Begun014(session, workflow, step, values, body, Path(project.root_path)),
        invalidated_steps=invalidated,
        stack=conversation_stack(
            project=project, conversation_id=conversation_id, agent_id=agent_id
        ),
    )


def schema_feedback(*, checkpoint: Checkpoint014) -> str | None:
    """The ``needs_work`` feedback when a ``file_path`` output fails its ``json_schema``."""
    from workflows import json_schemas

    lines: list[str] = []
    declared = {arg.name: arg for arg in checkpoint.step.outputs}
    for name, value in checkpoint.outputs.items():
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
                text = read_regular_text(
                    checkpoint.project_root / path, limit=MAX_SCHEMA_FILE_BYTES
                )
                data = yaml.safe_load(text)
            except (OSError, UnicodeDecodeError, yaml.YAMLError, ValueError) as exc:
                lines.append(f"- Output '{name}' file '{path}': failed to parse: {exc}")
                continue
            error = json_schemas.best_error(validator, data)
            if error is not None:
                loc = " -> ".join(str(p) for p in error.path) if error.path else "root"
                lines.append(
                    f"- Output '{name}' file '{path}': JSON schema validation failed: "
                    f"Validation error at {loc}: {error.message}"
                )
    if not lines:
        return None
    return (
        f"{JSON_SCHEMA_FAILED}\n\n" + "\n".join(lines) + "\n\nFix these issues and call "
        "finished_step again."
    )
