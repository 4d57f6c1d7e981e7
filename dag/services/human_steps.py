"""Steps people do: a person completes or fails a ready human step (role ``human``, or assigned
to ``user:<username>``) from the dashboard or the REST API."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.db import transaction
from django.utils import timezone

from dag.services.base import (
    HUMAN_ROLE,
    RUNNING,
    USER_PREFIX,
    Advance,
    Report,
    dag_shape,
    error_message_check,
    is_human,
    result_check,
)
from dag.services.reports import execution_fail, locked_execution, reported_run
from dag.services.scheduling import dag_advance, dag_dispatch
from workflows import events
from workflows.errors import Conflict, InvalidInput, NotFound
from workflows.models import Event, Job, StepRun, WorkflowSession

if TYPE_CHECKING:
    from django.contrib.auth.models import User


# --- People as agents ---------------------------------------------------------------------------


def dag_person_report(
    *,
    workflow_id: str,
    step_id: str,
    by: User,
    via: str,
    result: Any = None,
    error_message: str | None = None,
) -> Report:
    """A person completes (or, with ``error_message``, fails) a human step that is ready;
    ``via``, the credential they decided through, is recorded with their events.

    A step assigned to ``user:<name>`` is that person's only. Holding ``dag.decide_human_step``
    is the caller's check (the interfaces make it).
    """
    result_check(result)
    failing = error_message is not None
    if failing:
        error_message = error_message_check(error_message)
    job = Job.objects.filter(source=Job.Source.DEFINED, dir_name=workflow_id).first()
    if job is None:
        raise NotFound(f"Unknown workflow_id {workflow_id!r}: no such workflow")
    project = job.project
    with transaction.atomic():
        session = locked_execution(project=project, workflow_id=workflow_id)
        run = reported_run(session, step_id)
        step = dag_shape(job.pk, workflow_id).steps[step_id]
        if not is_human(step):
            raise InvalidInput(
                f"Step {step_id!r} is an agent's step; only steps with role {HUMAN_ROLE!r} or "
                f"assigned to '{USER_PREFIX}<username>' are done by people"
            )
        owner = step.assigned_agent_id.removeprefix(USER_PREFIX)
        if step.assigned_agent_id.startswith(USER_PREFIX) and owner != by.get_username():
            raise InvalidInput(
                f"Step {step_id!r} is assigned to {owner!r}; only that person may report on it"
            )
        if run.status in (StepRun.Status.COMPLETED, StepRun.Status.FAILED):
            return Report(
                workflow_id,
                step_id,
                session.status,
                Advance(status=session.status),
                already=True,
                note=f"Step {step_id!r} was already reported {run.status}; nothing changed",
            )
        if session.status != RUNNING:
            return Report(
                workflow_id,
                step_id,
                session.status,
                Advance(status=session.status),
                already=True,
                note=f"Workflow {workflow_id!r} is {session.status}; this report changed nothing",
            )
        if run.status != StepRun.Status.READY:
            raise Conflict(f"Step {step_id!r} is still waiting for the steps it depends on")
        now = timezone.now()
        person = f"{USER_PREFIX}{by.get_username()}"
        if failing:
            assert error_message is not None
            StepRun.objects.filter(pk=run.pk, status=StepRun.Status.READY).update(
                status=StepRun.Status.FAILED,
                error_message=error_message,
                assigned_at=now,
                completed_at=now,
            )
            execution_fail(
                now=now,
                project=project,
                session=session,
                workflow_id=workflow_id,
                step_id=step_id,
                failed_by=person,
                error_message=error_message,
                by=by,
                via=via,
            )
            return Report(
                workflow_id, step_id, WorkflowSession.Status.FAILED, Advance(status="failed")
            )
        StepRun.objects.filter(pk=run.pk, status=StepRun.Status.READY).update(
            status=StepRun.Status.COMPLETED, result=result, assigned_at=now, completed_at=now
        )
        events.event_record(
            kind=Event.Kind.DAG_STEP_COMPLETED,
            project=project,
            session=session,
            by=by,
            via=via,
            payload=events.DagStepCompleted(
                workflow_id=workflow_id, step_id=step_id, agent_id=person
            ),
        )
        advance = dag_advance(session, released=step_id)
    # Steps of other workflows that were waiting on agents may be handed out now as well.
    dag_dispatch(project=project)
    return Report(workflow_id, step_id, advance.status, advance)
