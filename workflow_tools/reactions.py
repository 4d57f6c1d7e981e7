"""What the workflow tools do when another context's events are written: the DAG scheduler does
not know its workflows are served as tools, so their tool names are freed here, as a reaction
to its events.

Light on purpose: every server registers the reaction at start (``WorkflowToolsConfig.ready``),
including one that serves no workflow tools, so nothing of the toolset's machinery (sources,
JSON Schema, the HTTP client) is imported here.
"""

from __future__ import annotations

from collections.abc import Sequence

from dag.plan import DAG_SOURCE_KEY
from workflow_tools.models import WorkflowToolName, workflow_key
from workflows.models import Event, WorkflowSession

# The events the reaction hears: a DAG workflow deleted, or a session started (a DAG
# workflow's execution among them).
DAG_EVENT_KINDS = (Event.Kind.DAG_DELETED, Event.Kind.SESSION_STARTED)


def workflow_tool_name_release(*, project_id: int, key: str) -> None:
    """Free the tool name of a workflow that can never be listed again (a DAG workflow once
    it ran or was deleted), so a later workflow of the same name gets it without the id."""
    WorkflowToolName.objects.filter(project_id=project_id, workflow_key=key).delete()


def workflow_tool_names_on_dag_events(
    *, events: Sequence[Event], session: WorkflowSession | None
) -> None:
    """A DAG workflow is a tool only until it is executed (it runs once) or deleted: then its
    tool name is freed for another workflow. Called by the event writer inside the scheduler's
    own transaction, so the name goes if and only if the execution or deletion commits.

    An execution is the one kind of session that starts ``running`` (a DeepWork session starts
    ``active``), and its session id is the workflow id."""
    for event in events:
        if event.kind == Event.Kind.DAG_DELETED:
            workflow_id = event.payload["workflow_id"]
        elif session is not None and session.status == WorkflowSession.Status.RUNNING:
            workflow_id = session.session_id
        else:
            continue
        workflow_tool_name_release(
            project_id=event.project_id, key=workflow_key(DAG_SOURCE_KEY, workflow_id)
        )
