"""``tools/list`` for the workflow tools: their ready-made entries appended to FastMCP's
listing of the static tools, cut into pages when a page size is set."""

from __future__ import annotations

import base64
import binascii
import json
import time
import zlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS

from mcp_bridge.toolsets.workflow_tools.provider import (
    LISTED_BESIDE,
    Snapshot,
    WorkflowToolsProvider,
    wire_tools,
)


class ListingMiddleware:
    """Answers ``tools/list`` as FastMCP would, with the workflow tools' entries made once.

    An SDK server middleware, innermost: FastMCP lists (and the SDK checks) the static tools as
    usual, then the workflow tools' cached entries (``wire_tools``) are appended, so a listing
    no longer costs a model round trip per workflow. With a page size, the whole list is cut
    into pages here (MCP cursor pagination); a cursor names its offset and the list it was cut
    from, and one from a list that has changed since is refused (-32602), which tells a client
    to list again from the start.

    So FastMCP's own middleware and transforms see the static tools of a listing only (none of
    this project's act on listings); a call to a workflow tool goes through FastMCP as before.
    """

    def __init__(self, provider: WorkflowToolsProvider, page_size: int | None) -> None:
        self.provider = provider
        self.page_size = page_size
        self._last: tuple[float, Snapshot] | None = None

    def _walked(self, cursor: Any) -> Snapshot | None:
        """The list a walk's next page comes from: the one just listed, when this request
        goes on from it within the watcher's interval. Its pages then form one list, and the
        database is asked once per walk; a cursor from another list is refused anyway."""
        if not cursor or self.page_size is None or self._last is None:
            return None
        listed_at, snapshot = self._last
        if time.monotonic() - listed_at > self.provider.settings.poll_seconds:
            return None
        return snapshot

    async def __call__(self, ctx: Any, call_next: Callable[[Any], Any]) -> Any:
        if ctx.method != "tools/list" or ctx.request_id is None:
            return await call_next(ctx)
        token = LISTED_BESIDE.set(True)
        try:
            result = await call_next(ctx)
        finally:
            LISTED_BESIDE.reset(token)
        if not isinstance(result, dict) or not isinstance(result.get("tools"), list):
            return result
        static: list[dict[str, Any]] = result["tools"]
        tools, snapshot_key = static, 0
        params = ctx.params or {}
        cursor = params.get("cursor") if isinstance(params, Mapping) else None
        if self.provider.settings.enabled:
            snapshot = self._walked(cursor)
            if snapshot is None:
                snapshot = await self.provider.snapshot()
                self.provider._seen = snapshot.fingerprints
                self._last = (time.monotonic(), snapshot)
            entries = wire_tools(snapshot, ctx.protocol_version)
            snapshot_key = snapshot.names_key()
            if entries:
                taken = {entry.get("name") for entry in static}
                tools = static + [entry for entry in entries if entry["name"] not in taken]
        page, next_cursor = paginate(
            tools, cursor, self.page_size, lambda: _list_key(static, snapshot_key)
        )
        # Only this layer pages: whatever cursor the static tools' answer carried is dropped,
        # and the last page (or an unpaged list) has no nextCursor at all, never an empty one,
        # which some clients would send back as "the first page" and loop on.
        answer = {key: value for key, value in result.items() if key != "nextCursor"}
        answer["tools"] = page
        if next_cursor:
            answer["nextCursor"] = next_cursor
        return answer


def _list_key(static: Sequence[Mapping[str, Any]], snapshot_key: int) -> int:
    """Tells one list of tools from another: the static tools' names, in order, then the
    workflow tools' (reckoned once per snapshot, ``snapshot_key``)."""
    text = "\n".join(str(tool.get("name")) for tool in static)
    return zlib.crc32(text.encode(), snapshot_key)


def paginate(
    tools: list[dict[str, Any]], cursor: Any, page_size: int | None, list_key: Callable[[], int]
) -> tuple[list[dict[str, Any]], str | None]:
    """One page of ``tools`` and the cursor of the next (None after the last); ``list_key``
    tells this list from any other.

    Without a page size the cursor is ignored, as a server that does not paginate does."""
    if page_size is None:
        return tools, None
    key = list_key()
    offset = 0
    if cursor:  # an empty one, as FastMCP takes it, asks for the first page
        try:
            state = json.loads(base64.urlsafe_b64decode(str(cursor).encode()))
            offset, their_key = state["o"], state["k"]
            if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
                raise ValueError(offset)
        except (ValueError, TypeError, KeyError, binascii.Error):
            raise MCPError(
                code=INVALID_PARAMS,
                message=f"Invalid cursor {str(cursor)[:100]!r}: use the nextCursor of the "
                "previous page as it was given",
            ) from None
        if their_key != key:
            raise MCPError(
                code=INVALID_PARAMS,
                message="The tool list has changed since this cursor was given; list the "
                "tools again from the first page",
            )
    end = offset + page_size
    if end >= len(tools):
        return tools[offset:], None
    state_text = json.dumps({"o": end, "k": key}, separators=(",", ":"))
    return tools[offset:end], base64.urlsafe_b64encode(state_text.encode()).decode()
