"""Agents report on their steps (completed, failed), and a run is cancelled: each in one
transaction over the locked execution, a repeated or late report changing nothing."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.db import transaction
from django.utils import timezone

from dag.plan import json_clean, same_identity
from dag.services.base import (
    OPEN,
    RUNNING,
    USER_PREFIX,
    Advance,
    Report,
    agent_id_clean,
    dag_job,
    error_message_check,
    result_check,
)
from dag.services.scheduling import dag_advance, dag_dispatch
from workflows import events
from workflows.errors import Conflict, Forbidden, InvalidInput, NotFound
from workflows.models import Agent, Event, Project, StepRun, WorkflowSession

if TYPE_CHECKING:
    from datetime import datetime

    from django.contrib.auth.models import User


def locked_execution(*, project: Project, workflow_id: str) -> WorkflowSession:
    job = dag_job(project=project, workflow_id=workflow_id)
    session = (
        WorkflowSession.objects.select_for_update()
        .select_related("project")
        .filter(job=job)
        .first()
    )
    if session is None:
        raise Conflict(f"Workflow {workflow_id!r} has not been executed yet; nothing to report on")
    return session


def reported_run(session: WorkflowSession, step_id: str) -> StepRun:
    run = (
        StepRun.objects.select_related("assigned_agent")
        .filter(session=session, step_id=step_id)
        .first()
    )
    if run is None:
        raise NotFound(f"Workflow {session.session_id!r} has no step {step_id!r}")
    return run


def _no_change(session: WorkflowSession, run: StepRun, agent_id: str) -> Report | None:
    """The answer to a report that must change nothing, or None if it may go ahead.

    A repeated report on a finished step is a no-op that says so; a report from anyone but the
    step's agent is refused, naming the rule; a report on a workflow that already failed (or
    was stopped) is a no-op too, since fail-fast means nothing moves after a failure.
    """
    workflow_id = session.session_id
    holder = run.assigned_agent.agent_id if run.assigned_agent else None
    if run.status in (StepRun.Status.COMPLETED, StepRun.Status.FAILED) and holder == agent_id:
        return Report(
            workflow_id,
            run.step_id,
            session.status,
            Advance(status=session.status),
            already=True,
            note=f"Step {run.step_id!r} was already reported {run.status}; nothing changed",
        )
    if run.status in OPEN:
        raise Conflict(
            f"Step {run.step_id!r} of workflow {workflow_id!r} is not assigned to any agent "
            f"(it is {run.status}); only its assigned agent may report on it"
        )
    if holder != agent_id:
        raise InvalidInput(
            f"Only the agent assigned to step {run.step_id!r} ({holder!r}) may report on it; "
            f"{agent_id!r} is not that agent"
        )
    if session.status != RUNNING:
        return Report(
            workflow_id,
            run.step_id,
            session.status,
            Advance(status=session.status),
            already=True,
            note=f"Workflow {workflow_id!r} is {session.status}; this report changed nothing",
        )
    return None


def dag_report_completion(
    *, project: Project, workflow_id: str, step_id: str, agent_id: str, result: Any = None
) -> Report:
    """The assigned agent finished its step: store the result, then hand out what follows."""
    agent_id = agent_id_clean(agent_id)
    result_check(result)
    with transaction.atomic():
        session = locked_execution(project=project, workflow_id=workflow_id)
        run = reported_run(session, step_id)
        refused = _no_change(session, run, agent_id)
        if refused is not None:
            return refused
        updated = StepRun.objects.filter(pk=run.pk, status=StepRun.Status.ASSIGNED).update(
            status=StepRun.Status.COMPLETED, result=result, completed_at=timezone.now()
        )
        # The session lock serialises every change to this execution.
        assert updated
        events.event_record(
            kind=Event.Kind.DAG_STEP_COMPLETED,
            project=project,
            session=session,
            agent=run.assigned_agent,
            payload=events.DagStepCompleted(
                workflow_id=workflow_id, step_id=step_id, agent_id=agent_id
            ),
        )
        advance = dag_advance(session, released=step_id)
    # The reporter is free again: other workflows' waiting steps may fit it now.
    dag_dispatch(project=project)
    return Report(workflow_id, step_id, advance.status, advance)


def dag_report_failure(
    *, project: Project, workflow_id: str, step_id: str, agent_id: str, error_message: str
) -> Report:
    """The assigned agent could not do its step: the step and the workflow fail (fail-fast)."""
    agent_id = agent_id_clean(agent_id)
    error_message = error_message_check(error_message)
    with transaction.atomic():
        session = locked_execution(project=project, workflow_id=workflow_id)
        run = reported_run(session, step_id)
        refused = _no_change(session, run, agent_id)
        if refused is not None:
            return refused
        now = timezone.now()
        updated = StepRun.objects.filter(pk=run.pk, status=StepRun.Status.ASSIGNED).update(
            status=StepRun.Status.FAILED, error_message=error_message, completed_at=now
        )
        assert updated
        execution_fail(
            now=now,
            project=project,
            session=session,
            workflow_id=workflow_id,
            step_id=step_id,
            failed_by=agent_id,
            error_message=error_message,
            agent=run.assigned_agent,
        )
    return Report(workflow_id, step_id, WorkflowSession.Status.FAILED, Advance(status="failed"))


def execution_fail(
    *,
    now: datetime,
    project: Project,
    session: WorkflowSession,
    workflow_id: str,
    step_id: str,
    failed_by: str,
    error_message: str,
    agent: Agent | None = None,
    by: User | None = None,
    via: str = "",
) -> None:
    """A failed step fails its workflow (fail-fast): the execution's status and both events,
    in the caller's transaction; ``by`` and ``via`` as ``dag_person_report`` takes them."""
    WorkflowSession.objects.filter(pk=session.pk, status=RUNNING).update(
        status=WorkflowSession.Status.FAILED,
        completed_at=now,
        updated_at=now,
        abort_reason=f"Step {step_id!r} failed: {error_message}",
    )
    events.event_record(
        kind=Event.Kind.DAG_STEP_FAILED,
        project=project,
        session=session,
        agent=agent,
        by=by,
        via=via,
        payload=events.DagStepFailed(
            workflow_id=workflow_id,
            step_id=step_id,
            agent_id=failed_by,
            error_message=error_message,
        ),
    )
    events.event_record(
        kind=Event.Kind.SESSION_FAILED,
        project=project,
        session=session,
        by=by,
        via=via,
        payload=events.SessionFailed(
            workflow=session.workflow_name, step_id=step_id, error_message=error_message
        ),
    )


def dag_cancel(
    *,
    project: Project,
    workflow_id: str,
    reason: str,
    agent_id: str | None = None,
    by: User | None = None,
    via: str = "",
) -> str:
    """Stop a running execution for good: it fails with ``reason`` (a DAG workflow runs once,
    so it cannot be resumed). Its creator, the creator's sub-agents or the agent that
    executed it may, or a person (``by``, through ``via``; holding a permission is the
    caller's check).
    Returns the reason stored.

    No step fails: a failed execution without a failed step is how a cancelled one is told
    apart. Steps still held are left as they are; their agents' reports change nothing.
    """
    reason = (reason or "").strip()
    if not reason:
        raise InvalidInput("A reason is required to cancel a run")
    json_clean(reason, "reason")
    if by is None:
        if agent_id is None:
            raise InvalidInput("An agent or a person must cancel the run")
        agent_id = agent_id_clean(agent_id)
    who = f"{USER_PREFIX}{by.get_username()}" if by is not None else agent_id
    with transaction.atomic():
        job = dag_job(project=project, workflow_id=workflow_id)
        # The session row alone is locked: its agent's row is its heartbeat's.
        session = WorkflowSession.objects.select_for_update().filter(job=job).first()
        if session is None:
            raise Conflict(f"Workflow {workflow_id!r} has not been executed yet; no run to cancel")
        trigger = Agent.objects.filter(pk=session.agent_id).values_list("agent_id", flat=True).get()
        allowed = agent_id is not None and (
            same_identity(job.creator_id, agent_id) or agent_id == trigger
        )
        if by is None and not allowed:
            raise Forbidden(
                f"Only the workflow's creator ({job.creator_id!r}), its sub-agents "
                f"({job.creator_id}/<name>), the agent that executed it ({trigger!r}) or a "
                f"person with the permission may cancel its run; {agent_id!r} may not"
            )
        if session.status != RUNNING:
            raise Conflict(
                f"Workflow {workflow_id!r} is already {session.status}; nothing to cancel"
            )
        stored = f"Cancelled by {who}: {reason}"[:20_000]
        now = timezone.now()
        WorkflowSession.objects.filter(pk=session.pk, status=RUNNING).update(
            status=WorkflowSession.Status.FAILED,
            completed_at=now,
            updated_at=now,
            abort_reason=stored,
        )
        events.event_record(
            kind=Event.Kind.SESSION_FAILED,
            project=project,
            session=session,
            agent=(
                Agent.objects.filter(project=project, agent_id=agent_id).first()
                if by is None
                else None
            ),
            by=by,
            via=via,
            payload=events.SessionFailed(
                workflow=session.workflow_name, step_id="", error_message=stored
            ),
        )
    return stored
