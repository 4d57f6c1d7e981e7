"""Workflow sessions: start, finish a step, abort, go back to a step.

Every transition is one transaction that compare-and-sets the session's ``revision``: of two
calls that read the same state, exactly one applies; the other changes nothing and is told what
the session looks like now. Slow work (file checks, reading instructions, reviews) happens
before the transaction, so a failure there leaves no state behind.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.db import IntegrityError, connection, transaction
from django.db.models import Field
from django.utils import timezone

from workflows import events, limits
from workflows.errors import Conflict, InvalidInput, JobBroken, NotFound
from workflows.events import User
from workflows.files import FileTooLarge, NotRegularFile, read_regular_text
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
from workflows.outputs import DeclaredOutput, validate_outputs
from workflows.results import (
    SessionAborted,
    SessionStarted,
    StepAdvanced,
    StepBegun,
    StepInstructions,
    WentToStep,
    WorkflowCompleted,
)
from workflows.selectors import (
    session_head,
    session_resolve,
    stack_for_agent,
    workflow_entries,
)
from workflows.services import step_changes
from workflows.services.agents import agent_ensure, agent_id_clean
from workflows.services.catalog import CatalogView

_SESSIONS = WorkflowSession._meta.db_table
_ABORT_RUNS_SQL = (
    f"UPDATE {StepRun._meta.db_table} SET status = %s, completed_at = %s "
    "WHERE session_id = %s AND status = %s"
)


@dataclass(frozen=True)
class StepCheckpoint:
    """A step hand-in that passed validation, read before any write.

    A quality gate judges it; ``step_advance`` then applies it only if the session is still
    at the same revision.
    """

    project: Project
    agent: Agent
    session: WorkflowSession
    entries: list[list[Step]]
    steps: list[Step]
    outputs: dict[str, str | list[str]]
    notes: str | None
    by: User | None = None  # the person handing in over the API; None when the agent does

    @property
    def project_root(self) -> Path:
        return Path(self.project.root_path)


# Step instructions go whole into the agent's answer; a file past this is a broken job, and a
# huge or sparse file is never read whole.
INSTRUCTIONS_MAX_BYTES = 1024 * 1024


def read_step_instructions(job: Job, step: Step) -> str:
    job_dir = Path(job.job_dir).resolve()
    path = (job_dir / step.instructions_file).resolve()
    if not path.is_relative_to(job_dir):
        raise JobBroken(
            f"Instructions file '{step.instructions_file}' of step '{step.step_id}' is outside "
            "the job folder"
        )
    try:
        return read_regular_text(path, limit=INSTRUCTIONS_MAX_BYTES)
    except FileNotFoundError:
        raise JobBroken(f"Instructions file not found: {step.instructions_file}") from None
    except FileTooLarge as exc:
        raise JobBroken(
            f"Instructions file {step.instructions_file} is {exc.size:,} bytes; the limit is "
            f"{INSTRUCTIONS_MAX_BYTES:,}"
        ) from None
    except NotRegularFile as exc:
        raise JobBroken(
            f"Instructions file {step.instructions_file} could not be read: it is not a regular "
            f"file (it is {exc.kind})"
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise JobBroken(
            f"Instructions file {step.instructions_file} could not be read: {exc}"
        ) from None


def read_entry_instructions(job: Job, entry: list[Step]) -> tuple[StepInstructions, ...]:
    """Each step's instructions, read before any transaction opens."""
    return tuple(
        StepInstructions(step.step_id, read_step_instructions(job, step)) for step in entry
    )


def _begun(
    session: WorkflowSession,
    job: Job,
    entry: list[Step],
    instructions: tuple[StepInstructions, ...],
) -> StepBegun:
    return StepBegun(session=session, job=job, steps=tuple(entry), instructions=instructions)


def _start_runs(
    project: Project, agent: Agent, session: WorkflowSession, entry_index: int, entry: list[Step]
) -> None:
    StepRun.objects.bulk_create(
        StepRun(session=session, step_def=step, step_id=step.step_id, entry_index=entry_index)
        for step in entry
    )
    events.event_record_many(
        kind=Event.Kind.STEP_STARTED,
        project=project,
        session=session,
        agent=agent,
        payloads=(
            events.StepStarted(step_id=step.step_id, entry_index=entry_index) for step in entry
        ),
    )


def _column(name: str) -> Field[Any, Any]:
    field = WorkflowSession._meta.get_field(name)
    # Only the session's own columns are claimed, never a reverse relation.
    assert isinstance(field, Field)
    return field


def claim_session(session: WorkflowSession, **changes: object) -> None:
    """Compare-and-set the session forward; raise ``Conflict`` if another call got there first.

    ``changes`` are plain values for the session's own columns (no expressions, no instances).
    """
    now = timezone.now()
    values = {"updated_at": now, **changes}
    fields = [_column(name) for name in values]
    # One UPDATE ... WHERE revision = <what we read>, written out: it runs on every transition
    # and the ORM's update() costs several times what the database takes for it. Values are
    # prepared by their fields exactly as update() would.
    assignments = ", ".join(f"{connection.ops.quote_name(f.column)} = %s" for f in fields)
    params = [f.get_db_prep_save(values[f.name], connection) for f in fields]
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {_SESSIONS} SET revision = revision + 1, {assignments} "
            "WHERE id = %s AND status = %s AND revision = %s",
            [*params, session.pk, WorkflowSession.Status.ACTIVE.value, session.revision],
        )
        claimed = cursor.rowcount
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


def _new_session_id() -> str:
    return secrets.token_hex(4)


def resolve_workflow(job: Job, workflow_name: str) -> Workflow:
    workflows = list(job.workflows.order_by("position"))
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


def session_start(
    *,
    project: Project,
    agent: Agent | None = None,
    agent_id: str | None = None,
    catalog: CatalogView,
    job_name: str,
    workflow_name: str,
    goal: str,
    instance_id: str | None = None,
    by: User | None = None,
) -> SessionStarted:
    """Start a workflow on top of the agent's stack and return its first step.

    ``by`` is the person starting it over the REST API; it is recorded in the event.
    Give ``agent``, or ``agent_id`` for the named agent, created with the session if new: a
    start that fails leaves no agent behind.
    """
    if (agent is None) == (agent_id is None):
        raise TypeError("session_start needs exactly one of agent and agent_id")
    if agent_id is not None:
        agent_id = agent_id_clean(agent_id)
    limits.JOB_NAME.check("job_name", job_name)
    limits.WORKFLOW_NAME.check("workflow_name", workflow_name)
    limits.GOAL.check("goal", goal)
    limits.INSTANCE_ID.check("instance_id", instance_id)
    found = catalog.find(job_name)
    if found is None:
        broken = catalog.error_for(job_name)
        if broken is not None:
            raise JobBroken(f"Failed to parse job '{job_name}': {broken.error}")
        raise NotFound(f"Job not found: {job_name}")
    job = Job.objects.get(pk=found.pk)
    if job.definition.get("job_format") == "0.14":
        # Its steps have typed outputs and inline instructions 0.9.1's answers cannot carry.
        raise InvalidInput(
            f"Job '{job_name}' is written in DeepWork 0.14's job format; start it the DeepWork "
            "0.14 way (pass session_id to start_workflow, on a server run with --generation "
            "0.14 or both)"
        )
    workflow = resolve_workflow(job, workflow_name)
    entries = workflow_entries(workflow=workflow)
    if not entries:
        raise JobBroken(f"Workflow '{workflow.name}' has no steps")
    first = entries[0]
    instructions = read_entry_instructions(job, first)

    for _ in range(5):
        candidate = _new_session_id()
        try:
            with transaction.atomic():
                if agent_id is not None:
                    agent = agent_ensure(project=project, agent_id=agent_id)
                assert agent is not None
                parent = (
                    WorkflowSession.objects.filter(
                        agent=agent, status=WorkflowSession.Status.ACTIVE
                    )
                    .order_by("-id")
                    .first()
                )
                session = WorkflowSession.objects.create(
                    session_id=candidate,
                    project=project,
                    agent=agent,
                    parent=parent,
                    job=job,
                    workflow=workflow,
                    job_name=job_name,
                    workflow_name=workflow.name,
                    instance_id=instance_id,
                    goal=goal,
                    current_step_id=first[0].step_id,
                )
                events.event_record(
                    kind=Event.Kind.SESSION_STARTED,
                    project=project,
                    session=session,
                    agent=agent,
                    by=by,
                    payload=events.SessionStarted(
                        job=job_name,
                        workflow=workflow.name,
                        goal=goal,
                        parent=parent.session_id if parent else None,
                    ),
                )
                _start_runs(project, agent, session, 0, first)
                step_changes.session_moved(
                    session=session, root=Path(project.root_path), began_entry=0
                )
            break
        except IntegrityError:
            # An 8-hex session id collided with an existing one: draw another. Any other
            # broken constraint is a fault to report, not to retry into "try again".
            if not WorkflowSession.objects.filter(session_id=candidate).exists():
                raise
            continue
    else:
        raise Conflict("Could not allocate a unique session id; try again")
    return SessionStarted(
        begun=_begun(session, job, first, instructions), stack=stack_for_agent(agent=agent)
    )


def _declared_outputs(entry: list[Step]) -> list[DeclaredOutput]:
    return [
        DeclaredOutput(name=output["name"], type=output["type"], required=output["required"])
        for step in entry
        for output in step.outputs
    ]


def step_checkpoint(
    *,
    project: Project,
    agent: Agent,
    outputs: dict[str, str | list[str]],
    notes: str | None = None,
    session_id: str | None = None,
    by: User | None = None,
) -> StepCheckpoint:
    """Resolve the session and validate the hand-in against the current entry's outputs.

    Every member of a concurrent entry is finished together: the hand-in is checked against
    the union of the members' declared outputs.
    """
    limits.check_outputs(outputs)
    limits.NOTES.check("notes", notes)
    session = session_resolve(
        project=project, agent=agent, session_id=session_id, untold_aborts=True
    )
    if session.status != WorkflowSession.Status.ACTIVE:
        session_abort_tell(session=session, then=ABORT_TOLD_NEXT)
        session = session_resolve(project=project, agent=agent, session_id=session_id)
    entries = workflow_entries(workflow=session.workflow)
    if session.current_entry_index >= len(entries):
        raise JobBroken(f"Current step not found: {session.current_step_id}")
    entry = entries[session.current_entry_index]
    validate_outputs(
        declared=_declared_outputs(entry),
        submitted=outputs,
        project_root=Path(project.root_path),
    )
    return StepCheckpoint(
        project=project,
        agent=agent,
        session=session,
        entries=entries,
        steps=entry,
        outputs=outputs,
        notes=notes,
        by=by,
    )


def step_advance(
    *, checkpoint: StepCheckpoint, on_claimed: Callable[[], None] | None = None
) -> StepAdvanced | WorkflowCompleted:
    """Complete the checkpoint's entry and move to the next one (or complete the session).

    Compare-and-sets the session revision read by ``step_checkpoint``: if anything moved the
    session since (another finished_step, an abort, go_to_step), nothing changes here.
    ``on_claimed`` writes what let the hand-in pass (a verdict, an override's delivery) in the
    same transaction, once the claim has succeeded: a hand-in that loses leaves none of it.
    """
    project, agent, session = checkpoint.project, checkpoint.agent, checkpoint.session
    job, entries, entry = session.job, checkpoint.entries, checkpoint.steps
    outputs, notes = checkpoint.outputs, checkpoint.notes
    next_index = session.current_entry_index + 1
    next_entry = None if next_index >= len(entries) else entries[next_index]
    instructions = () if next_entry is None else read_entry_instructions(job, next_entry)
    now = timezone.now()

    with transaction.atomic():
        if next_entry is None:
            claim_session(session, status=WorkflowSession.Status.COMPLETED, completed_at=now)
        else:
            claim_session(
                session,
                current_entry_index=next_index,
                current_step_id=next_entry[0].step_id,
            )
        if on_claimed is not None:
            on_claimed()
        for step in entry:
            own = {o["name"] for o in step.outputs}
            StepRun.objects.filter(
                session=session, step_id=step.step_id, status=StepRun.Status.ACTIVE
            ).update(
                status=StepRun.Status.COMPLETED,
                outputs={name: value for name, value in outputs.items() if name in own},
                notes=notes,
                completed_at=now,
            )
        events.event_record_many(
            kind=Event.Kind.STEP_FINISHED,
            project=project,
            session=session,
            agent=agent,
            by=checkpoint.by,
            payloads=(
                events.StepFinished(step_id=step.step_id, outputs=outputs, notes=notes)
                for step in entry
            ),
        )
        if next_entry is None:
            events.event_record(
                kind=Event.Kind.SESSION_COMPLETED,
                project=project,
                session=session,
                agent=agent,
                payload=events.SessionCompleted(workflow=session.workflow_name),
            )
        else:
            _start_runs(project, agent, session, next_index, next_entry)
        step_changes.session_moved(
            session=session,
            root=checkpoint.project_root,
            finished_entry=next_index - 1,
            began_entry=None if next_entry is None else next_index,
        )

    stack = stack_for_agent(agent=agent)
    if next_entry is None:
        all_outputs: dict[str, str | list[str]] = {}
        for run_outputs in (
            StepRun.objects.filter(session=session, status=StepRun.Status.COMPLETED)
            .order_by("entry_index", "id")
            .values_list("outputs", flat=True)
        ):
            all_outputs.update(run_outputs)
        return WorkflowCompleted(
            workflow_name=session.workflow_name, all_outputs=all_outputs, stack=stack
        )
    return StepAdvanced(begun=_begun(session, job, next_entry, instructions), stack=stack)


class AbortedByPerson(NotFound):
    """The hand-in named (or would have gone to) a session a person aborted; told once."""


ABORT_TOLD_NEXT = (
    "Nothing was handed in. Call finished_step again to go on with the session below it, if "
    "any, or use start_workflow to begin a workflow."
)


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
            f"{session.abort_reason or '(none given)'}. {then}"
        )


def session_abort(
    *,
    project: Project,
    agent: Agent,
    explanation: str,
    session_id: str | None = None,
    by: User | None = None,
) -> SessionAborted:
    """Abort a session; the caller's stack resumes at its new top.

    ``by`` is the person aborting it from the dashboard, admin or API; it is recorded
    with the reason. Without it the agent aborted its own session.
    """
    limits.EXPLANATION.check("explanation", explanation)
    by_person = by.get_username() if by is not None else ""
    if by_person and not explanation.strip():
        raise InvalidInput("A reason is required so the agent and the team know why")
    session = session_head(project=project, agent=agent, session_id=session_id)
    aborted_step = session.current_step_id
    now = timezone.now()
    with transaction.atomic():
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
        with connection.cursor() as cursor:
            cursor.execute(
                _ABORT_RUNS_SQL,
                [
                    StepRun.Status.ABORTED.value,
                    connection.ops.adapt_datetimefield_value(now),
                    session.pk,
                    StepRun.Status.ACTIVE.value,
                ],
            )
        events.event_record(
            kind=Event.Kind.SESSION_ABORTED,
            project=project,
            session=session,
            agent=agent,
            by=by,
            payload=events.SessionAborted(step_id=aborted_step, explanation=explanation),
        )
        # Read before the commit: on SQLite the write lock is still held, so this is the stack
        # exactly as the commit leaves it; elsewhere it is as fresh as a read after it would be.
        stack = stack_for_agent(agent=agent)
    return SessionAborted(
        session=session, step_id=aborted_step, explanation=explanation, stack=stack
    )


def session_go_to_step(
    *,
    project: Project,
    agent: Agent,
    step_id: str,
    session_id: str | None = None,
    by: User | None = None,
) -> WentToStep:
    """Return to an earlier step (or restart the current one), discarding later progress."""
    limits.STEP_ID.check("step_id", step_id)
    session = session_resolve(project=project, agent=agent, session_id=session_id)
    entries = workflow_entries(workflow=session.workflow)
    target = next(
        (i for i, entry in enumerate(entries) if any(s.step_id == step_id for s in entry)), None
    )
    if target is None:
        available = ", ".join(step.step_id for entry in entries for step in entry)
        raise NotFound(
            f"Step '{step_id}' not found in workflow '{session.workflow_name}'. "
            f"Available steps: {available}"
        )
    if target > session.current_entry_index:
        raise InvalidInput(
            f"Cannot go forward to step '{step_id}' (entry index {target} > current "
            f"{session.current_entry_index}). Use finished_step to advance forward."
        )
    entry = entries[target]
    instructions = read_entry_instructions(session.job, entry)
    with transaction.atomic():
        claim_session(session, current_entry_index=target, current_step_id=entry[0].step_id)
        discarded = StepRun.objects.filter(
            session=session,
            entry_index__gte=target,
            status__in=[StepRun.Status.ACTIVE, StepRun.Status.COMPLETED],
        )
        invalidated = list(
            dict.fromkeys(discarded.order_by("entry_index", "id").values_list("step_id", flat=True))
        )
        discarded.update(status=StepRun.Status.INVALIDATED)
        events.event_record(
            kind=Event.Kind.STEP_REOPENED,
            project=project,
            session=session,
            agent=agent,
            by=by,
            payload=events.StepReopened(step_id=entry[0].step_id, invalidated_steps=invalidated),
        )
        _start_runs(project, agent, session, target, entry)
        step_changes.session_moved(
            session=session, root=Path(project.root_path), began_entry=target
        )
    return WentToStep(
        begun=_begun(session, session.job, entry, instructions),
        invalidated_steps=tuple(invalidated),
        stack=stack_for_agent(agent=agent),
    )
