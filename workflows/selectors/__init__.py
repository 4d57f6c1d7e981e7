"""The one read layer: every interface (MCP tools, REST, dashboard, live updates, admin) reads
sessions, events and the catalog through these modules.

- ``sessions``: the stack, the session a call targets, session lists, the run a ruling hits.
- ``events``: the outbox, as a feed, a live catch-up and tail, and timelines.
- ``catalog``: projects, their job catalogs, a workflow's entries.
"""

from workflows.selectors.catalog import workflow_entries
from workflows.selectors.sessions import (
    JOB_FIELDS,
    NO_ACTIVE_SESSION,
    session_head,
    session_resolve,
    session_top,
    stack_for_agent,
    stack_of,
    stack_sessions,
)

__all__ = [
    "JOB_FIELDS",
    "NO_ACTIVE_SESSION",
    "session_head",
    "session_resolve",
    "session_top",
    "stack_for_agent",
    "stack_of",
    "stack_sessions",
    "workflow_entries",
]
