"""Running sync database work from async tools: Django's database thread, and busy databases.

Services are sync and transactional; tools are async. ``in_db_thread`` is the asgiref
equivalent of Channels' ``database_sync_to_async`` (which would pull Channels into a process
that serves no web page): one shared thread, connections closed when stale before and after.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TypeVar

from asgiref.sync import sync_to_async
from django.db import OperationalError, close_old_connections

logger = logging.getLogger("deepwork.mcp")

T = TypeVar("T")

# Pauses between attempts of a call that found the database busy. The database's own wait
# (SQLite's busy timeout, PostgreSQL's lock timeout) comes first, so these stay short.
BUSY_RETRY_PAUSES = (0.05, 0.2, 0.5)

# PostgreSQL: lock_not_available (a lock timeout), deadlock_detected, serialization_failure.
_PG_BUSY_CODES = frozenset({"55P03", "40P01", "40001"})


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


def _with_connections_closed(fn: Callable[[], T]) -> Callable[[], T]:
    def call() -> T:
        close_old_connections()
        try:
            return fn()
        finally:
            close_old_connections()

    return call


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


async def in_db_thread(fn: Callable[[], T]) -> T:
    """Run ``fn`` in Django's database thread."""
    return await sync_to_async(_with_connections_closed(fn), thread_sensitive=True)()
