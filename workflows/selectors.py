"""Reads that shape workflow state for the interfaces (MCP tools, REST, dashboard)."""

from __future__ import annotations

from django.db import connection

from workflows.errors import NotFound
from workflows.models import Agent, Project, Step, Workflow, WorkflowSession, WorkflowStep
from workflows.schemas import StackEntry

NO_ACTIVE_SESSION = "No active workflow session. Use start_workflow to begin a workflow."

# Every tool answer carries the stack, and a transition reads its session first: on this path
# building a query through the ORM costs several times what the database takes to answer it, so
# these few fixed queries are written out. Both use wf_session_stack_idx (agent, status, id) or
# the session_id unique index.
_SESSIONS = WorkflowSession._meta.db_table
_ACTIVE = WorkflowSession.Status.ACTIVE.value
_STACK_SQL = (
    f"SELECT job_name, workflow_name, current_step_id FROM {_SESSIONS} "
    "WHERE agent_id = %s AND status = %s ORDER BY id"
)
# What a transition of the session row itself needs (``_claim``, the answer, the event), in
# the model's field order, as ``Model.from_db`` wants it.
_HEAD = {
    "id",
    "session_id",
    "project_id",
    "agent_id",
    "job_name",
    "workflow_name",
    "status",
    "current_entry_index",
    "current_step_id",
    "revision",
}
_HEAD_FIELDS = tuple(f.attname for f in WorkflowSession._meta.concrete_fields if f.attname in _HEAD)
_HEAD_COLUMNS = ", ".join(_HEAD_FIELDS)
_TOP_SQL = (
    f"SELECT {_HEAD_COLUMNS} FROM {_SESSIONS} "
    "WHERE agent_id = %s AND status = %s ORDER BY id DESC LIMIT 1"
)
_BY_ID_SQL = f"SELECT {_HEAD_COLUMNS} FROM {_SESSIONS} WHERE project_id = %s AND session_id = %s"


def stack_for_agent(*, agent: Agent) -> list[StackEntry]:
    """The agent's active sessions, bottom to top, as DeepWork's ``stack`` entries."""
    with connection.cursor() as cursor:
        cursor.execute(_STACK_SQL, [agent.pk, _ACTIVE])
        rows = cursor.fetchall()
    return [StackEntry(workflow=f"{job}/{workflow}", step=step) for job, workflow, step in rows]


def _check_targetable(session: WorkflowSession | None, session_id: str | None) -> WorkflowSession:
    if session_id is None:
        if session is None:
            raise NotFound(NO_ACTIVE_SESSION)
        return session
    if session is None:
        raise NotFound(f"Session '{session_id}' not found in active stack")
    if session.status != WorkflowSession.Status.ACTIVE:
        raise NotFound(
            f"Session '{session_id}' is {session.status}; it is no longer in the active stack "
            "and cannot change"
        )
    return session


def session_head(*, project: Project, agent: Agent, session_id: str | None) -> WorkflowSession:
    """``session_resolve`` for a transition that needs only the session row: its job and
    workflow are not loaded (reading them later costs a query each)."""
    with connection.cursor() as cursor:
        if session_id is None:
            cursor.execute(_TOP_SQL, [agent.pk, _ACTIVE])
        else:
            cursor.execute(_BY_ID_SQL, [project.pk, session_id])
        row = cursor.fetchone()
    session = None if row is None else WorkflowSession.from_db(connection.alias, _HEAD_FIELDS, row)
    return _check_targetable(session, session_id)


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
    else:
        session = sessions.filter(project=project, session_id=session_id).first()
    return _check_targetable(session, session_id)


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
