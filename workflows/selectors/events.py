"""Reads of the ``Event`` outbox: the REST feed, the live socket's catch-up and tail, and the
dashboard's timelines.

Every read by session filters on the session's key and orders by id, so it walks the
``(session, id)`` index (``wf_event_session_idx``); a read by project walks ``(project, id)``.
"""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime
from typing import Any, Literal

from django.db.models import Q, QuerySet

# pydantic reads this type too (the REST feed's items), and before Python 3.12 it wants this
# TypedDict rather than typing's.
from typing_extensions import TypedDict

from workflows.models import Event, WorkflowSession


class EventRow(TypedDict):
    """One event as every interface hands it out: ids, not rows."""

    id: int
    kind: str
    project_id: int
    session_id: str | None
    agent_id: str | None
    payload: dict[str, Any]
    created_at: datetime


_ROW_FIELDS = (
    "id",
    "kind",
    "project_id",
    "session__session_id",
    "agent__agent_id",
    "payload",
    "created_at",
)


def _rows(events: QuerySet[Event]) -> list[EventRow]:
    return [
        EventRow(
            id=id_,
            kind=kind,
            project_id=project_id,
            session_id=session_id,
            agent_id=agent_id,
            payload=payload,
            created_at=created_at,
        )
        for id_, kind, project_id, session_id, agent_id, payload, created_at in events.values_list(
            *_ROW_FIELDS
        )
    ]


def _matching(*, project_id: int | None, session_id: str | None) -> QuerySet[Event]:
    events = Event.objects.all()
    if project_id is not None:
        events = events.filter(project_id=project_id)
    if session_id is not None:
        # A scalar subquery for the session's key rather than a join on session_id, so the
        # planner walks the (session, id) index.
        events = events.filter(
            session=WorkflowSession.objects.filter(session_id=session_id).values("pk")[:1]
        )
    return events


def events_after(
    *,
    after: int,
    limit: int,
    project_id: int | None = None,
    session_id: str | None = None,
    keep: Literal["oldest", "newest"] = "oldest",
) -> tuple[list[EventRow], bool]:
    """Matching events with an id above ``after``, oldest first, at most ``limit`` of them,
    and whether more match. ``keep`` says which end is kept when more match: the oldest (a
    feed read page by page) or the newest (a socket catching up). One query."""
    events = _matching(project_id=project_id, session_id=session_id).filter(id__gt=after)
    ordered = events.order_by("id" if keep == "oldest" else "-id")
    rows = _rows(ordered[: limit + 1])
    more = len(rows) > limit
    rows = rows[:limit]
    return (rows if keep == "oldest" else rows[::-1]), more


def events_for_tail(*, after: int, missing: Collection[int], limit: int) -> list[EventRow]:
    """Events with an id above ``after`` or among ``missing`` (ids that may still commit), in
    id order. One query."""
    wanted = Q(id__gt=after)
    if missing:
        wanted |= Q(id__in=sorted(missing))
    return _rows(Event.objects.filter(wanted).order_by("id")[:limit])


def outbox_position(*, window: int) -> tuple[int, list[int]]:
    """The newest event id, and the ids missing among the newest ``window`` ones. One query."""
    ids = list(Event.objects.order_by("-id").values_list("id", flat=True)[:window])
    if not ids:
        return 0, []
    present = set(ids)
    return ids[0], [i for i in range(ids[-1], ids[0]) if i not in present]


def newest_event_id() -> int:
    """The newest event id (0 when there is none). A page reads it *before* its other queries
    and hands it to its live socket: an event committed while the page renders is then newer,
    never lost."""
    newest = Event.objects.order_by("-id").values_list("id", flat=True).first()
    return newest or 0


def recent_events(*, limit: int, session: WorkflowSession | None = None) -> list[Event]:
    """The newest ``limit`` events (of ``session``, or of everything), newest first, with the
    project name, session id and agent id they show. One query."""
    events = Event.objects.all() if session is None else Event.objects.filter(session=session)
    return list(
        events.select_related("project", "session", "agent")
        .only(
            "id",
            "kind",
            "payload",
            "created_at",
            "project__name",
            "session__session_id",
            "agent__agent_id",
        )
        .order_by("-id")[:limit]
    )
