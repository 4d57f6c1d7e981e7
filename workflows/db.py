"""The one bridge from async code (MCP tools, the REST finish) to the sync services.

Channels' ``database_sync_to_async`` does the same, but importing it pulls in the web stack,
which ``mcpserve`` must not load; this is asgiref alone.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from functools import wraps
from typing import ParamSpec, TypeVar

from asgiref.sync import sync_to_async
from django.db import close_old_connections

P = ParamSpec("P")
R = TypeVar("R")


def db_sync_to_async(fn: Callable[P, R]) -> Callable[P, Awaitable[R]]:
    """``fn`` run on the thread that owns the database connection, with stale connections
    closed before and after (as a request would), awaitable from async code."""

    @wraps(fn)
    def inner(*args: P.args, **kwargs: P.kwargs) -> R:
        close_old_connections()
        try:
            return fn(*args, **kwargs)
        finally:
            close_old_connections()

    return sync_to_async(inner, thread_sensitive=True)
