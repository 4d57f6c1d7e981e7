"""Running the sync services from async code, and telling a busy database from a broken one.

``db_sync_to_async`` is the one bridge from async code (MCP tools, the REST finish) to the
services. Channels' ``database_sync_to_async`` does the same, but importing it pulls in the web
stack, which ``mcpserve`` must not load; this is asgiref alone.

An MCP server hands its tools' database work to threads of its own (one on stdio, a few for
``/mcp``) and says so with ``database_thread_for``: within it, a call goes straight to that
thread's executor. asgiref's thread-sensitive machinery would send it to the same thread, at
about 70 microseconds more per call (a context lookup and a copy of every context variable back
after the call), which is a tenth of an abort's own work.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import logging
import time
from collections.abc import Awaitable, Callable, Iterator
from concurrent.futures import Executor
from contextlib import contextmanager
from functools import wraps
from typing import ParamSpec, TypeVar

from asgiref.sync import sync_to_async
from django.db import OperationalError, close_old_connections

logger = logging.getLogger(__name__)

P = ParamSpec("P")
R = TypeVar("R")
T = TypeVar("T")


_database_executor: contextvars.ContextVar[Executor | None] = contextvars.ContextVar(
    "deepwork_database_executor", default=None
)


@contextmanager
def database_thread_for(executor: Executor) -> Iterator[None]:
    """Within this block (and the tasks it starts), ``db_sync_to_async`` runs on ``executor``,
    a one-thread executor that owns the database connection."""
    token = _database_executor.set(executor)
    try:
        yield
    finally:
        _database_executor.reset(token)


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

    @wraps(fn)
    async def call(*args: P.args, **kwargs: P.kwargs) -> R:
        executor = _database_executor.get()
        if executor is None:
            return await sync_to_async(inner, thread_sensitive=True)(*args, **kwargs)
        context = contextvars.copy_context()
        # Async code that ``fn`` runs (``async_to_sync``) and that calls the database again must
        # come back to this thread through asgiref, which knows the thread is waiting for it:
        # the executor would queue that call behind the wait, forever.
        context.run(_database_executor.set, None)
        return await asyncio.get_running_loop().run_in_executor(
            executor, functools.partial(context.run, inner, *args, **kwargs)
        )

    return call


# Pauses between attempts of a call that found the database busy. The database's own wait
# (SQLite's busy timeout, PostgreSQL's lock timeout) comes first, so these stay short.
BUSY_RETRY_PAUSES = (0.05, 0.2, 0.5)

# PostgreSQL: lock_not_available (a lock timeout), deadlock_detected, serialization_failure.
_PG_BUSY_CODES = frozenset({"55P03", "40P01", "40001"})


# What an agent or a program is told when the database stayed busy: plain words, no lock jargon.
BUSY_MESSAGE = (
    "The database is busy with other work right now and this call changed nothing. "
    "Try the same call again in a few seconds."
)


class DatabaseBusy(Exception):
    """The database stayed locked by other writers through every retry."""


def is_busy(exc: BaseException) -> bool:
    """Whether ``exc`` says another connection holds the lock, not that something is wrong."""
    if not isinstance(exc, OperationalError):
        return False
    cause = exc.__cause__
    code = getattr(cause, "sqlstate", None) or getattr(cause, "pgcode", None)
    if code in _PG_BUSY_CODES:
        return True
    text = str(exc).lower()
    return "database is locked" in text or "database table is locked" in text


def retrying_when_busy(fn: Callable[[], T]) -> Callable[[], T]:
    """``fn`` retried briefly while the database is busy; ``DatabaseBusy`` when it stays so.

    Only for work that holds its whole write in one transaction: a busy error rolled it back,
    so running it again is running it once.
    """

    def call() -> T:
        for pause in (*BUSY_RETRY_PAUSES, None):
            try:
                return fn()
            except OperationalError as exc:
                if not is_busy(exc):
                    raise
                logger.warning("Database busy (%s); %s", exc, "retrying" if pause else "giving up")
                if pause is None:
                    raise DatabaseBusy(str(exc)) from exc
                close_old_connections()
                time.sleep(pause)
        raise AssertionError("unreachable")

    return call
