"""Reads that shape workflow state for the interfaces (MCP tools, REST, dashboard)."""

from __future__ import annotations

from workflows.errors import NotFound
from workflows.models import Agent, Project, Step, Workflow, WorkflowSession, WorkflowStep
from workflows.schemas import StackEntry

NO_ACTIVE_SESSION = "No active workflow session. Use start_workflow to begin a workflow."


def stack_for_agent(*, agent: Agent) -> list[StackEntry]:
    """The agent's active sessions, bottom to top, as DeepWork's ``stack`` entries."""
    rows = (
        WorkflowSession.objects.filter(agent=agent, status=WorkflowSession.Status.ACTIVE)
        .order_by("id")
        .values_list("job_name", "workflow_name", "current_step_id")
    )
    return [StackEntry(workflow=f"{job}/{workflow}", step=step) for job, workflow, step in rows]


def session_resolve(*, project: Project, agent: Agent, session_id: str | None) -> WorkflowSession:
    """The session a call targets: ``session_id`` anywhere in the project, else the top of
    the caller's own stack."""
    # The job's parsed definition is a large JSON document nothing here reads: leave it behind.
    sessions = WorkflowSession.objects.select_related("job", "workflow").defer("job__definition")
    if session_id is None:
        session = (
            sessions.filter(agent=agent, status=WorkflowSession.Status.ACTIVE)
            .order_by("-id")
            .first()
        )
        if session is None:
            raise NotFound(NO_ACTIVE_SESSION)
        return session
    session = sessions.filter(project=project, session_id=session_id).first()
    if session is None:
        raise NotFound(f"Session '{session_id}' not found in active stack")
    if session.status != WorkflowSession.Status.ACTIVE:
        raise NotFound(
            f"Session '{session_id}' is {session.status}; it is no longer in the active stack "
            "and cannot change"
        )
    return session


def workflow_entries(*, workflow: Workflow) -> list[list[Step]]:
    """The workflow's ordered entries; a concurrent entry holds several steps."""
    entries: list[list[Step]] = []
    nodes = (
        WorkflowStep.objects.filter(workflow=workflow)
        .select_related("step")
        .order_by("entry_index", "position_in_entry")
    )
    for node in nodes:
        while len(entries) <= node.entry_index:
            entries.append([])
        entries[node.entry_index].append(node.step)
    return entries
