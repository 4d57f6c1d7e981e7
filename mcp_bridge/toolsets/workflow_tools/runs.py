"""Calls to a workflow source where they belong: the database thread for a local source
(retried while the database is busy), a worker thread for one across the network; and a run's
status or cancellation answered as a tool error when the source cannot."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TypeVar

from fastmcp.exceptions import ToolError

from mcp_bridge.toolsets.calls import refusal_error
from workflow_tools.sources import NotSupported, RunStatus, SourceError, WorkflowSource
from workflows.db import BUSY_MESSAGE, DatabaseBusy, db_sync_to_async, retrying_when_busy
from workflows.errors import WorkflowError

T = TypeVar("T")


async def source_call(source: WorkflowSource, call: Callable[[], T]) -> T:
    """``call`` where its source's calls belong: the database thread (retried while the
    database is busy) for a local source, a worker thread for one across the network."""
    if source.local:
        return await db_sync_to_async(retrying_when_busy(call))()
    return await asyncio.to_thread(call)


async def status_call(
    source: WorkflowSource, call: Callable[[], RunStatus], run_id: str
) -> RunStatus:
    try:
        return await source_call(source, call)
    except NotSupported as exc:
        raise ToolError(
            f"Status and cancellation are not supported for run '{run_id}': {exc}"
        ) from None
    except WorkflowError as exc:
        raise refusal_error(str(exc)) from None
    except SourceError as exc:
        raise ToolError(str(exc)) from None
    except DatabaseBusy:
        raise ToolError(BUSY_MESSAGE) from None
