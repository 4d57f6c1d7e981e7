"""Old history for a session's agent: ended sessions with a completed run each, copied from a
session already started (its project, job, workflow and first step), dated ``days`` ago."""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone

from workflows.models import Agent, StepRun, WorkflowSession


def add_ended_sessions(
    *, template: WorkflowSession, agent: Agent, count: int, days: int = 2
) -> None:
    """``count`` sessions of ``agent`` that ended ``days`` ago (aborted, the agent told), each
    with a run of the template's first step that ended then."""
    long_ago = timezone.now() - timedelta(days=days)
    first = template.runs.order_by("id").first()
    assert first is not None, "the template session has no step run to copy"
    made = WorkflowSession.objects.bulk_create(
        (
            WorkflowSession(
                session_id=f"old-{agent.pk}-{i}",
                project_id=template.project_id,
                agent=agent,
                job_id=template.job_id,
                workflow_id=template.workflow_id,
                job_name=template.job_name,
                workflow_name=template.workflow_name,
                status=WorkflowSession.Status.ABORTED,
                started_at=long_ago,
                completed_at=long_ago,
            )
            for i in range(count)
        ),
        batch_size=500,
    )
    StepRun.objects.bulk_create(
        (
            StepRun(
                session=session,
                step_def_id=first.step_def_id,
                step_id=first.step_id,
                entry_index=0,
                status=StepRun.Status.COMPLETED,
                started_at=long_ago,
                completed_at=long_ago,
            )
            for session in made
        ),
        batch_size=500,
    )
