"""The one way a tool reaches the database: the call runs on the database thread, is retried
while the database is busy, is logged once with the caller's stack, and a refusal becomes the
toolset's own error shape.

Toolsets differ only in that last step (DeepWork's prefixed ``ToolError``, the tracker's
error document, the agents toolset's bare message), so each passes its shape in; the thread,
the retry and the logging are the same for all.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from fastmcp.exceptions import ToolError

from mcp_bridge.state import ServerState, log_call
from workflows.db import BUSY_MESSAGE, DatabaseBusy, db_sync_to_async, retrying_when_busy
from workflows.errors import WorkflowError

logger = logging.getLogger(__name__)

T = TypeVar("T")
R = TypeVar("R")


def refusal_error(message: str) -> ToolError:
    """The tool error that carries a refusal to the caller.

    A refusal (no active workflow, an unknown job, outputs that break a rule) is the answer the
    agent needs, not a fault of the server: FastMCP logs tool errors at ERROR unless told
    otherwise, and the call itself is already in the DEBUG call log.
    """
    return ToolError(message, log_level=logging.DEBUG)


@dataclass(frozen=True)
class Refusal:
    """Why a call did not happen: the engine refused it (``error``), or the database stayed
    busy through every retry (``error`` is None)."""

    message: str
    error: WorkflowError | None = None


async def db_tool_call(
    state: ServerState,
    tool: str,
    params: dict[str, Any],
    fn: Callable[[], T],
    *,
    refused: Callable[[Refusal], R],
    crashed: Callable[[Exception], R] | None = None,
    stack: Callable[[T], list[Any] | None] | None = None,
) -> T | R:
    """``fn()`` on the database thread. ``refused`` shapes (or raises) a refusal; ``crashed``,
    when given, shapes any other failure after logging its trace, else it propagates;
    ``stack`` reads the caller's stack from the answer for the log."""
    try:
        answer = await db_sync_to_async(retrying_when_busy(fn))()
    except WorkflowError as exc:
        log_call(state, tool, params)
        return refused(Refusal(exc.message, exc))
    except DatabaseBusy:
        log_call(state, tool, params)
        return refused(Refusal(BUSY_MESSAGE))
    except Exception as exc:
        if crashed is None:
            raise
        logger.exception("%s failed", tool)
        log_call(state, tool, params)
        return crashed(exc)
    log_call(state, tool, params, stack(answer) if stack is not None else None)
    return answer
