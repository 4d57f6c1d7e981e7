"""The event feed over REST, at /api/events: the audit trail, read by polling."""

from __future__ import annotations

from typing import Annotated, Any

from django.http import HttpRequest
from ninja import Router
from ninja.params.functions import Query

from accounts.identity import identity_project_scope
from api.auth import VIEW, TokenAuth, caller
from api.common import MAX_ID, READ_ERRORS
from api.schemas import EventPage, Name
from workflows.selectors.events import events_after

router = Router()


@router.get("", response={200: EventPage, **READ_ERRORS}, tags=["events"], auth=TokenAuth(VIEW))
def list_events(
    request: HttpRequest,
    after: Annotated[int, Query(ge=0, le=MAX_ID, description="Only events with a larger id.")] = 0,
    project: Annotated[int | None, Query(ge=1, le=MAX_ID, description="Project id.")] = None,
    session: Annotated[Name | None, Query(description="Session id.")] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 100,
) -> dict[str, Any]:
    """Events after an id, oldest first: the audit trail and a polling feed."""
    items, has_more = events_after(
        after=after,
        project_id=identity_project_scope(caller(request), project),
        session_id=session,
        limit=limit,
    )
    return {"items": items, "last_id": items[-1]["id"] if items else after, "has_more": has_more}
