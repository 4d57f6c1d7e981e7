"""Rebinding and dry runs for either generation: ``get_active_workflow`` and
``validate_step_outputs`` (beyond both DeepWork releases; served in ``--generation both``).

Both only read: an agent that lost its context finds its run in one call, and an agent about
to hand in learns what ``finished_step`` would refuse, without anything changing.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from workflows.errors import InvalidInput, NotFound
from workflows.generations import Conversation, v0_14
from workflows.models import Agent, Project, StepRun, WorkflowSession
from workflows.results import Stack, StepBegun
from workflows.selectors import session_resolve, stack_for_agent, workflow_entries
from workflows.services import sessions


@dataclass(frozen=True)
class Active:
    """A session's whereabouts: the current step as its generation shows it."""

    session: WorkflowSession
    step_number: int  # 1-based
    total_steps: int
    completed_steps: tuple[str, ...]
    begun_by_agent: StepBegun | None
    begun_by_conversation: v0_14.Begun | None
    stack: Stack


def _completed(session: WorkflowSession) -> tuple[str, ...]:
    return tuple(
        StepRun.objects.filter(session=session, status=StepRun.Status.COMPLETED)
        .order_by("entry_index", "id")
        .values_list("step_id", flat=True)
    )


def _conversation_top(
    project: Project, conversation_id: str, agent_id: str | None, missing: str
) -> WorkflowSession:
    agent = v0_14.conversation_stack_agent(
        project=project, conversation_id=conversation_id, agent_id=agent_id
    )
    session = v0_14.top_session(agent)
    if session is None:
        raise NotFound(missing)
    return session


def active_by_agent(*, project: Project, agent: Agent, session_id: str | None) -> Active:
    """The 0.9.1 session ``session_id`` names, else the top of ``agent``'s stack."""
    session = session_resolve(project=project, agent=agent, session_id=session_id)
    entries = workflow_entries(workflow=session.workflow)
    if session.current_entry_index >= len(entries):
        raise NotFound(f"Current step not found: {session.current_step_id}")
    entry = entries[session.current_entry_index]
    begun = StepBegun(
        session=session,
        job=session.job,
        steps=tuple(entry),
        instructions=sessions.read_entry_instructions(session.job, entry),
    )
    return Active(
        session=session,
        step_number=session.current_entry_index + 1,
        total_steps=len(entries),
        completed_steps=_completed(session),
        begun_by_agent=begun,
        begun_by_conversation=None,
        stack=stack_for_agent(agent=session.agent),
    )


def active_by_conversation(
    *, project: Project, conversation_id: str, agent_id: str | None
) -> Active:
    """The top workflow of a 0.14 stack, with the current step as ``begin_step`` shows it."""
    session = _conversation_top(project, conversation_id, agent_id, v0_14.NO_ACTIVE)
    workflow = v0_14.runtime_workflow_of(session)
    step = v0_14.current_rt_step(session, workflow)
    run = StepRun.objects.filter(
        session=session, step_id=step.key, status=StepRun.Status.ACTIVE
    ).first()
    begun = v0_14.Begun(
        session,
        workflow,
        step,
        run.input_values if run is not None else {},
        v0_14.step_body(session.job, workflow, step),
        Path(project.root_path),
    )
    return Active(
        session=session,
        step_number=session.current_entry_index + 1,
        total_steps=len(workflow.steps),
        completed_steps=tuple(name.rsplit(".", 1)[-1] for name in _completed(session)),
        begun_by_agent=None,
        begun_by_conversation=begun,
        stack=v0_14.conversation_stack(
            project=project, conversation_id=conversation_id, agent_id=agent_id
        ),
    )


@dataclass(frozen=True)
class Validation:
    step_id: str
    errors: tuple[str, ...]


def validate_by_agent(
    *, project: Project, agent: Agent, outputs: dict[str, str | list[str]], session_id: str | None
) -> Validation:
    """``finished_step``'s output checks on a 0.9.1 session, as a dry run."""
    try:
        checkpoint = sessions.step_checkpoint(
            project=project, agent=agent, outputs=outputs, session_id=session_id
        )
    except InvalidInput as exc:
        session = session_resolve(project=project, agent=agent, session_id=session_id)
        return Validation(step_id=session.current_step_id, errors=(str(exc),))
    return Validation(step_id=checkpoint.steps[0].step_id, errors=())


def validate_by_conversation(
    *,
    project: Project,
    conversation_id: str,
    agent_id: str | None,
    outputs: dict[str, str | list[str]],
) -> Validation:
    """``finished_step``'s output and ``json_schema`` checks on a 0.14 stack, as a dry run
    (no review task is written)."""
    session = _conversation_top(project, conversation_id, agent_id, v0_14.NO_ACTIVE_FINISH)
    step = v0_14.current_rt_step(session, v0_14.runtime_workflow_of(session))
    try:
        checkpoint = sessions.step_checkpoint(
            project=project,
            outputs=outputs,
            conversation=Conversation(conversation_id, agent_id),
        )
    except InvalidInput as exc:
        return Validation(step_id=step.name, errors=(str(exc),))
    schema = v0_14.schema_feedback(
        step=checkpoint.step, outputs=outputs, project_root=checkpoint.project_root
    )
    return Validation(step_id=step.name, errors=(schema,) if schema else ())
