"""Workflow sessions of every generation: start, hand in a step, advance, abort, go back.

Every transition is one transaction that compare-and-sets the session's ``revision``: of two
calls that read the same state, exactly one applies; the other changes nothing and is told what
the session looks like now. Slow work (file checks, reading instructions, reviews) happens
before the transaction, so a failure there leaves no state behind.

A call names its stack either by the agent it is (``agent``/``agent_id``, DeepWork 0.9) or by
a ``Conversation`` (DeepWork 0.14); that picks the ``Generation`` whose rules say what a step
is, how outputs are checked and what the answer holds (``workflows.generations``). The
transitions themselves are the same for both.

Why long: five transitions, each one transaction with its claim, runs and events, written out
in full so that each reads top to bottom; what differs per generation is already elsewhere.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone

from workflows import events, limits, rows
from workflows.errors import Conflict, InvalidInput, JobBroken, NotFound, sentence
from workflows.events import User
from workflows.generations import Conversation, Generation, generation_for
from workflows.generations.v0_9 import (
    ABORT_TOLD_NEXT,
    INSTRUCTIONS_MAX_BYTES,
    read_entry_instructions,
    read_step_instructions,
)
from workflows.generations.v0_14 import NO_ACTIVE, NO_ACTIVE_FINISH, stack_id_clean, top_session
from workflows.jobdefs.base import RtStep, RtWorkflow
from workflows.models import (
    Agent,
    Event,
    Job,
    Project,
    Step,
    StepRun,
    Workflow,
    WorkflowSession,
)
from workflows.selectors import (
    NO_ACTIVE_SESSION,
    session_head,
    session_resolve,
    stack_of,
    stack_sessions,
)
from workflows.services import step_changes
from workflows.services.agents import agent_ensure, agent_id_clean
from workflows.services.catalog import CatalogView

Value = str | list[str]

# Read by the interfaces and the tests under these names, whichever generation defines them.
__all__ = [
    "ABORT_TOLD_NEXT",
    "INSTRUCTIONS_MAX_BYTES",
    "AbortedByPerson",
    "StepCheckpoint",
    "claim_session",
    "read_entry_instructions",
    "read_step_instructions",
    "resolve_workflow",
    "session_abort",
    "session_abort_tell",
    "session_go_to_step",
    "session_start",
    "step_advance",
    "step_checkpoint",
]


# Why a running session cannot begin a step, and what the agent can do: the session keeps
# the job definition it started with, so a fix of job.yml never reaches it.
CANNOT_BEGIN = (
    "This session cannot begin that step. Put the file back in place and call again, or call "
    "abort_workflow, fix the job and start the workflow again: this session keeps the job as "
    "it was when it started, so an edit of job.yml does not reach it."
)


def _read_for_session(generation: Generation, job: Job, entries: Sequence[Any], entry: Any) -> Any:
    """The instructions of ``entry`` for a session already running; a job that cannot give
    them says what the agent can do about it."""
    try:
        return generation.read_entry(job, entries, entry)
    except JobBroken as exc:
        raise JobBroken(f"{sentence(exc.message)} {CANNOT_BEGIN}") from None


@dataclass(frozen=True)
class StepCheckpoint:
    """A step hand-in that passed validation, read before any write.

    A quality gate judges it; ``step_advance`` then applies it only if the session is still
    at the same revision. ``entries`` and ``entry`` are in the generation's terms: lists of
    ``Step`` rows under 0.9 (``steps``), a runtime workflow and its typed step under 0.14
    (``workflow``, ``step``).
    """

    project: Project
    agent: Agent
    session: WorkflowSession
    entries: Sequence[Any]
    entry: Any
    outputs: dict[str, Value]
    notes: str | None
    by: User | None = None  # the person handing in over the API; None when the agent does
    conversation: Conversation | None = None

    @property
    def generation(self) -> Generation:
        return generation_for(self.conversation)

    @property
    def project_root(self) -> Path:
        return Path(self.project.root_path)

    @property
    def steps(self) -> list[Step]:
        """The entry's ``Step`` rows (DeepWork 0.9 sessions)."""
        assert isinstance(self.entry, list)
        return self.entry

    @property
    def step(self) -> RtStep:
        """The typed step handed in (DeepWork 0.14 sessions)."""
        assert isinstance(self.entry, RtStep)
        return self.entry

    @property
    def workflow(self) -> RtWorkflow:
        assert isinstance(self.entries, RtWorkflow)
        return self.entries

    @property
    def work_summary(self) -> str | None:
        return self.notes


def _start_runs(
    generation: Generation,
    session: WorkflowSession,
    index: int,
    entry: Any,
    values: dict[str, Value | None],
) -> None:
    rows.insert_models(
        [
            StepRun(
                session=session,
                step_def=step,
                step_id=step.step_id,
                entry_index=index,
                input_values=values,
            )
            for step in generation.step_rows(session, entry)
        ]
    )
    events.event_record_many(
        kind=Event.Kind.STEP_STARTED,
        project=session.project,
        session=session,
        agent=session.agent,
        payloads=(
            events.StepStarted(step_id=key, entry_index=index)
            for key in generation.entry_keys(entry)
        ),
    )


def _produced(session: WorkflowSession) -> dict[str, Value]:
    """Every completed step's outputs, in step order (a later one wins)."""
    merged: dict[str, Value] = {}
    for run_outputs in (
        StepRun.objects.filter(session=session, status=StepRun.Status.COMPLETED)
        .order_by("entry_index", "id")
        .values_list("outputs", flat=True)
    ):
        merged.update(run_outputs)
    return merged


def _values(
    generation: Generation, session: WorkflowSession, entry: Any
) -> dict[str, Value | None]:
    if not generation.carries_inputs:
        return {}
    return generation.input_values(session, entry, _produced(session))


def claim_session(session: WorkflowSession, **changes: object) -> None:
    """Compare-and-set the session forward; raise ``Conflict`` if another call got there first.

    ``changes`` are plain values for the session's own columns (no expressions, no instances).
    """
    values = {"updated_at": timezone.now(), **changes}
    claimed = rows.update_where(
        WorkflowSession,
        values=values,
        extra="revision = revision + 1",
        where="id = %s AND status = %s AND revision = %s",
        params=[session.pk, WorkflowSession.Status.ACTIVE.value, session.revision],
    )
    if claimed == 1:
        for field, value in values.items():
            setattr(session, field, value)
        session.revision += 1
        return
    current = WorkflowSession.objects.get(pk=session.pk)
    if current.status != WorkflowSession.Status.ACTIVE:
        raise Conflict(
            f"Session '{session.session_id}' was {current.status} by another call while this "
            "one ran; nothing was changed"
        )
    raise Conflict(
        f"Session '{session.session_id}' moved on while this call ran: its current step is now "
        f"'{current.current_step_id}'; nothing was changed"
    )


def resolve_workflow(job: Job, workflow_name: str) -> Workflow:
    workflows = rows.select_models(
        Workflow, where="job_id = %s", params=[job.pk], order_by="position, id"
    )
    for workflow in workflows:
        if workflow.name == workflow_name:
            return workflow
    # DeepWork selects a job's only workflow whatever name was given; agents rely on it.
    if len(workflows) == 1:
        return workflows[0]
    available = ", ".join(workflow.name for workflow in workflows)
    raise NotFound(
        f"Workflow '{workflow_name}' not found in job '{job.name}'. "
        f"Available workflows: {available}"
    )


def _check_stack_names(conversation: Conversation | None) -> None:
    if conversation is not None:
        stack_id_clean("session_id", conversation.conversation_id)
        if conversation.agent_id is not None:
            stack_id_clean("agent_id", conversation.agent_id)


def session_start(
    *,
    project: Project,
    agent: Agent | None = None,
    agent_id: str | None = None,
    conversation: Conversation | None = None,
    catalog: CatalogView,
    job_name: str,
    workflow_name: str,
    goal: str,
    instance_id: str | None = None,
    inputs: dict[str, Value] | None = None,
    by: User | None = None,
) -> Any:
    """Start a workflow on top of a stack and return its first step.

    The stack is ``agent``'s, or that of the agent named ``agent_id`` (created with the
    session if new: a start that fails leaves no agent behind), or a ``conversation``'s (the
    later generation's, with ``inputs`` for its steps). ``by`` is the person starting it over
    the REST API; it is recorded in the event.
    """
    generation = generation_for(conversation)
    if conversation is None and (agent is None) == (agent_id is None):
        raise TypeError("session_start needs exactly one of agent and agent_id")
    if agent_id is not None:
        agent_id = agent_id_clean(agent_id)
    limits.JOB_NAME.check("job_name", job_name)
    limits.WORKFLOW_NAME.check("workflow_name", workflow_name)
    limits.GOAL.check("goal", goal)
    limits.INSTANCE_ID.check("instance_id", instance_id)
    _check_stack_names(conversation)
    for name, value in (inputs or {}).items():
        for item in [value] if isinstance(value, str) else value:
            limits.GOAL.check(f"inputs.{name}", item)
    job = generation.find_job(
        project=project, catalog=catalog, conversation=conversation, job_name=job_name
    )
    workflow = resolve_workflow(job, workflow_name)
    entries = generation.entries(job, workflow)
    if not entries:
        raise JobBroken(f"Workflow '{workflow.name}' has no steps")
    first = entries[0]
    read = generation.read_entry(job, entries, first)

    for _ in range(5):
        fields = generation.session_fields(
            conversation=conversation, instance_id=instance_id, inputs=inputs
        )
        try:
            with transaction.atomic():
                if agent_id is not None:
                    agent = agent_ensure(project=project, agent_id=agent_id)
                stack_agent = generation.stack_agent(
                    project=project, agent=agent, conversation=conversation, create=True
                )
                assert stack_agent is not None
                parent = generation.parent(
                    project=project, agent=stack_agent, conversation=conversation
                )
                session = WorkflowSession(
                    project=project,
                    agent=stack_agent,
                    parent=parent,
                    job=job,
                    workflow=workflow,
                    job_name=job_name,
                    workflow_name=workflow.name,
                    goal=goal,
                    current_step_id=generation.entry_keys(first)[0],
                    **fields,
                )
                rows.insert_models([session])
                events.event_record(
                    kind=Event.Kind.SESSION_STARTED,
                    project=project,
                    session=session,
                    agent=stack_agent,
                    by=by,
                    payload=events.SessionStarted(
                        job=job_name,
                        workflow=workflow.name,
                        goal=goal,
                        parent=parent.session_id if parent else None,
                    ),
                )
                values = _values(generation, session, first)
                _start_runs(generation, session, 0, first, values)
                if generation.records_step_files:
                    step_changes.session_moved(
                        session=session, root=Path(project.root_path), began_entry=0
                    )
            break
        except IntegrityError:
            # A short session id collided with an existing one: draw another. Any other
            # broken constraint is a fault to report, not to retry into "try again".
            if not WorkflowSession.objects.filter(session_id=fields["session_id"]).exists():
                raise
            continue
    else:
        raise Conflict("Could not allocate a unique session id; try again")
    return generation.started(
        begun=generation.begun(session, entries, first, read, values),
        stack=generation.stack(project=project, agent=stack_agent, conversation=conversation),
    )


def _target(
    generation: Generation,
    *,
    project: Project,
    agent: Agent | None,
    conversation: Conversation | None,
    session_id: str | None,
    hand_in: bool = False,
    untold_aborts: bool = False,
    head_only: bool = False,
) -> WorkflowSession:
    """The session a call acts on: by ``session_id`` or the top of the named stack."""
    if conversation is None:
        assert agent is not None
        if head_only:
            return session_head(project=project, agent=agent, session_id=session_id)
        return session_resolve(
            project=project, agent=agent, session_id=session_id, untold_aborts=untold_aborts
        )
    stack_agent = generation.stack_agent(
        project=project, agent=None, conversation=conversation, create=False
    )
    session = top_session(stack_agent, untold_aborts=untold_aborts)
    if session is None:
        raise NotFound(NO_ACTIVE_FINISH if hand_in else NO_ACTIVE)
    return session


def step_checkpoint(
    *,
    project: Project,
    agent: Agent | None = None,
    outputs: dict[str, Value],
    notes: str | None = None,
    session_id: str | None = None,
    by: User | None = None,
    conversation: Conversation | None = None,
) -> StepCheckpoint:
    """Resolve the session and validate the hand-in against the current entry's outputs.

    Every member of a concurrent entry is finished together: the hand-in is checked against
    the union of the members' declared outputs. Nothing is written.
    """
    generation = generation_for(conversation)
    limits.check_outputs(outputs)
    limits.NOTES.check("notes" if conversation is None else "work_summary", notes)
    if conversation is not None:
        _check_stack_names(conversation)

    def target(*, untold_aborts: bool = False) -> WorkflowSession:
        return _target(
            generation,
            project=project,
            agent=agent,
            conversation=conversation,
            session_id=session_id,
            hand_in=True,
            untold_aborts=untold_aborts,
        )

    session = target(untold_aborts=True)
    if session.status != WorkflowSession.Status.ACTIVE:
        session_abort_tell(session=session, then=generation.abort_told_next)
        session = target()
    entries = generation.entries(session.job, session.workflow)
    entry = generation.current_entry(session, entries)
    generation.check_outputs(entry=entry, outputs=outputs, project_root=Path(project.root_path))
    return StepCheckpoint(
        project=project,
        agent=session.agent if conversation is not None else agent,  # type: ignore[arg-type]
        session=session,
        entries=entries,
        entry=entry,
        outputs=outputs,
        notes=notes,
        by=by,
        conversation=conversation,
    )


def step_advance(
    *, checkpoint: StepCheckpoint, on_claimed: Callable[[], None] | None = None
) -> Any:
    """Complete the checkpoint's entry and move to the next one (or complete the session).

    Compare-and-sets the session revision read by ``step_checkpoint``: if anything moved the
    session since (another finished_step, an abort, go_to_step), nothing changes here.
    ``on_claimed`` writes what let the hand-in pass (a verdict, an override's delivery) in the
    same transaction, once the claim has succeeded: a hand-in that loses leaves none of it.
    """
    generation = checkpoint.generation
    project, session = checkpoint.project, checkpoint.session
    job, entries, entry = session.job, checkpoint.entries, checkpoint.entry
    outputs, notes = checkpoint.outputs, checkpoint.notes
    next_index = session.current_entry_index + 1
    next_entry = None if next_index >= len(entries) else entries[next_index]
    read = None if next_entry is None else _read_for_session(generation, job, entries, next_entry)
    now = timezone.now()
    values: dict[str, Value | None] = {}

    with transaction.atomic():
        if next_entry is None:
            claim_session(session, status=WorkflowSession.Status.COMPLETED, completed_at=now)
        else:
            claim_session(
                session,
                current_entry_index=next_index,
                current_step_id=generation.entry_keys(next_entry)[0],
            )
        if on_claimed is not None:
            on_claimed()
        finished = []
        for key in generation.entry_keys(entry):
            for run in rows.update_returning(
                StepRun,
                values={
                    "status": StepRun.Status.COMPLETED.value,
                    "outputs": generation.run_outputs(entry, key, outputs),
                    "notes": notes,
                    "completed_at": now,
                },
                where="session_id = %s AND step_id = %s AND status = %s",
                params=[session.pk, key, StepRun.Status.ACTIVE.value],
                returning=("entry_index", "started_at", "completed_at"),
            ):
                finished.append(
                    events.StepFinished(step_id=key, outputs=outputs, notes=notes, **run)
                )
        events.event_record_many(
            kind=Event.Kind.STEP_FINISHED,
            project=project,
            session=session,
            agent=session.agent,
            by=checkpoint.by,
            payloads=finished,
        )
        if next_entry is None:
            events.event_record(
                kind=Event.Kind.SESSION_COMPLETED,
                project=project,
                session=session,
                agent=session.agent,
                payload=events.SessionCompleted(workflow=session.workflow_name),
            )
        else:
            values = _values(generation, session, next_entry)
            _start_runs(generation, session, next_index, next_entry, values)
        if generation.records_step_files:
            step_changes.session_moved(
                session=session,
                root=checkpoint.project_root,
                finished_entry=next_index - 1,
                began_entry=None if next_entry is None else next_index,
            )

    stack = generation.stack(
        project=project, agent=session.agent, conversation=checkpoint.conversation
    )
    if next_entry is None:
        return generation.completed(session, entries, _produced(session), stack)
    return generation.advanced(
        begun=generation.begun(session, entries, next_entry, read, values), stack=stack
    )


class AbortedByPerson(NotFound):
    """The hand-in named (or would have gone to) a session a person aborted; told once."""


def session_abort_tell(*, session: WorkflowSession, then: str) -> None:
    """Tell the agent, once, that a person aborted ``session``: raise ``AbortedByPerson`` with
    who, when and why, followed by ``then`` (what the agent may do next, in its generation's
    words). Claiming the notice is a compare-and-set, so two calls at once tell it once. A
    notice gone stale (the agent has started a session since) is dropped without a word."""
    if session.status != WorkflowSession.Status.ABORTED or not session.abort_untold:
        return
    newer = WorkflowSession.objects.filter(agent_id=session.agent_id, pk__gt=session.pk).exists()
    told = WorkflowSession.objects.filter(pk=session.pk, abort_untold=True).update(
        abort_untold=False
    )
    if told and not newer:
        when = session.completed_at or timezone.now()
        raise AbortedByPerson(
            f"Session '{session.session_id}' ({session.job_name}/{session.workflow_name}) was "
            f"aborted by {session.aborted_by} at {when:%Y-%m-%d %H:%M:%S} UTC. Their reason: "
            f"{sentence(session.abort_reason or '(none given)')} {then}"
        )


def session_abort(
    *,
    project: Project,
    agent: Agent | None = None,
    explanation: str,
    session_id: str | None = None,
    by: User | None = None,
    via: str = "",
    conversation: Conversation | None = None,
) -> Any:
    """Abort a session; the caller's stack resumes at its new top.

    ``by`` is the person aborting it from the dashboard, admin or API; it is recorded
    with the reason, and with ``via``, the credential they used. Without it the agent aborted
    its own session. A ``conversation``'s stack can only have its top aborted.
    """
    generation = generation_for(conversation)
    limits.EXPLANATION.check("explanation", explanation)
    by_person = by.get_username() if by is not None else ""
    if by_person and not explanation.strip():
        raise InvalidInput("A reason is required so the agent and the team know why")
    if conversation is not None:
        _check_stack_names(conversation)
    # An agent aborting the top of its own stack (the usual abort) reads that stack once, in
    # the transaction: its top is the session, the rest is the stack the answer shows.
    own_top = conversation is None and session_id is None and agent is not None
    below: list[WorkflowSession] = []
    if not own_top:
        session = _target(
            generation,
            project=project,
            agent=agent,
            conversation=conversation,
            session_id=session_id,
            head_only=True,
        )
    now = timezone.now()
    with transaction.atomic():
        if own_top:
            assert agent is not None
            below = stack_sessions(project=project, agent=agent)
            if not below:
                raise NotFound(NO_ACTIVE_SESSION)
            session = below.pop()
        aborted_step = session.current_step_id
        # The agent is told of a person's abort only when its next hand-in would have acted on
        # the session: when it is the top of the agent's stack (nothing nested above it).
        untold = bool(by_person) and not (
            WorkflowSession.objects.filter(
                agent_id=session.agent_id, status=WorkflowSession.Status.ACTIVE, pk__gt=session.pk
            ).exists()
        )
        claim_session(
            session,
            status=WorkflowSession.Status.ABORTED,
            abort_reason=explanation,
            aborted_by=by_person,
            completed_at=now,
            abort_untold=untold,
        )
        rows.update_where(
            StepRun,
            values={"status": StepRun.Status.ABORTED.value, "completed_at": now},
            where="session_id = %s AND status = %s",
            params=[session.pk, StepRun.Status.ACTIVE.value],
        )
        events.event_record(
            kind=Event.Kind.SESSION_ABORTED,
            project=project,
            session=session,
            agent=agent if conversation is None else session.agent,
            by=by,
            via=via,
            payload=events.SessionAborted(step_id=aborted_step, explanation=explanation),
        )
        if own_top:
            # Read under this transaction's write lock (SQLite) or in it: what the commit
            # leaves, as a read after the claim would have found it.
            stack = stack_of(below)
        else:
            # Read before the commit: on SQLite the write lock is still held, so this is the
            # stack exactly as the commit leaves it; elsewhere it is as fresh as a read after
            # it would be.
            stack = generation.stack(
                project=project,
                agent=agent if conversation is None else session.agent,  # type: ignore[arg-type]
                conversation=conversation,
            )
    return generation.aborted(session, explanation, aborted_step, stack)


def session_go_to_step(
    *,
    project: Project,
    agent: Agent | None = None,
    step_id: str,
    session_id: str | None = None,
    by: User | None = None,
    conversation: Conversation | None = None,
) -> Any:
    """Return to an earlier step (or restart the current one), discarding later progress.
    Start inputs stay available to the step begun again."""
    generation = generation_for(conversation)
    limits.STEP_ID.check("step_id", step_id)
    if conversation is not None:
        _check_stack_names(conversation)
    session = _target(
        generation, project=project, agent=agent, conversation=conversation, session_id=session_id
    )
    entries = generation.entries(session.job, session.workflow)
    target = generation.find_step(entries, step_id)
    if target is None:
        available = ", ".join(generation.step_names(entries))
        raise NotFound(
            f"Step '{step_id}' not found in workflow '{session.workflow_name}'. "
            f"Available steps: {available}"
        )
    if target > session.current_entry_index:
        raise InvalidInput(
            f"Cannot go forward to step '{step_id}' ({generation.index_word} {target} > current "
            f"{session.current_entry_index}). Use finished_step to advance forward."
        )
    entry = entries[target]
    read = _read_for_session(generation, session.job, entries, entry)
    first_key = generation.entry_keys(entry)[0]
    with transaction.atomic():
        claim_session(session, current_entry_index=target, current_step_id=first_key)
        discarded = StepRun.objects.filter(
            session=session,
            entry_index__gte=target,
            status__in=[StepRun.Status.ACTIVE, StepRun.Status.COMPLETED],
        )
        invalidated = generation.invalidated(
            entries,
            target,
            list(discarded.order_by("entry_index", "id").values_list("step_id", flat=True)),
        )
        discarded.update(status=StepRun.Status.INVALIDATED)
        events.event_record(
            kind=Event.Kind.STEP_REOPENED,
            project=project,
            session=session,
            agent=agent if conversation is None else session.agent,
            by=by,
            payload=events.StepReopened(step_id=first_key, invalidated_steps=list(invalidated)),
        )
        values = _values(generation, session, entry)
        _start_runs(generation, session, target, entry, values)
        if generation.records_step_files:
            step_changes.session_moved(
                session=session, root=Path(project.root_path), began_entry=target
            )
    return generation.went(
        begun=generation.begun(session, entries, entry, read, values),
        invalidated_steps=invalidated,
        stack=generation.stack(
            project=project,
            agent=agent if conversation is None else session.agent,  # type: ignore[arg-type]
            conversation=conversation,
        ),
    )
