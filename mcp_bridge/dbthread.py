"""The one database thread of a stdio ``mcpserve``: all of its database work, one connection.

A stdio server serves one agent, whose calls come one at a time, so one thread does every
database call of the process: the tools' (asgiref's thread-sensitive calls, through
``ThreadSensitiveContext``), the heartbeat's and the step-files worker's (``call`` from their
threads). Fifty agents are then fifty PostgreSQL connections, not a hundred and fifty.

That connection lives as long as the process, and Django's health check
(``CONN_HEALTH_CHECKS``) would send a ``SELECT 1`` before every call to learn that it still
works. Here it is checked without a round trip instead: before a call, a connection whose socket
has something to read while idle is one the server closed (a restart, ``pg_terminate_backend``:
PostgreSQL says why, then hangs up), so it is dropped and the call opens a new one; a call that
fails with a broken connection before any of its statements succeeded (the server went away
since) changed nothing, so it is run once more on a new connection.
"""

from __future__ import annotations

import logging
import queue
import select
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

from django.db import DEFAULT_DB_ALIAS, InterfaceError, OperationalError, connections

logger = logging.getLogger("deepwork.mcp")

T = TypeVar("T")


class _Counter:
    """Statements that succeeded on this thread's connection (a Django execute wrapper)."""

    def __init__(self) -> None:
        self.done = 0

    def __call__(
        self, execute: Callable[..., Any], sql: Any, params: Any, many: bool, context: Any
    ) -> Any:
        result = execute(sql, params, many, context)
        self.done += 1
        return result


def _server_hung_up(conn: Any) -> bool:
    """Whether the idle connection's socket has something to read: the server's goodbye."""
    raw = conn.connection
    pgconn = getattr(raw, "pgconn", None)  # psycopg 3; SQLite has no server to lose
    if pgconn is None:
        return False
    try:
        readable, _, _ = select.select([pgconn.socket], [], [], 0)
    except Exception:  # no socket any more: as good as hung up
        return True
    return bool(readable)


class DatabaseThread:
    """One thread running every database call of the process, checked as described above."""

    def __init__(self, name: str = "deepwork-db") -> None:
        self._counter = _Counter()
        self._thread: threading.Thread | None = None
        self._executor = _Executor(self, max_workers=1, thread_name_prefix=name)
        # Calls handed over by other threads (``call``), run by ``_serve_pending``.
        self._pending: queue.SimpleQueue[tuple[Callable[[], Any], Future[Any]]] = (
            queue.SimpleQueue()
        )
        self._handed = threading.Event()

    @property
    def executor(self) -> ThreadPoolExecutor:
        """For ``ThreadSensitiveContext(executor=...)``: the tools' calls run here."""
        return self._executor

    def is_current(self) -> bool:
        return threading.current_thread() is self._thread

    def call(self, fn: Callable[[], T]) -> T:
        """``fn()`` on the database thread, from any other thread; waits for its result.

        Once the executor has shut down (the interpreter is exiting), ``fn`` runs on the
        calling thread instead, with a connection of its own.
        """
        if self.is_current():
            return fn()
        future: Future[T] = Future()
        self._pending.put((fn, future))
        self._handed.set()
        try:
            self._executor.submit(self._serve_pending)
        except RuntimeError:
            # Shut down: nobody will serve the queue. Ours is still there unless a waiting
            # database thread took it meanwhile; if so, its future gets the result.
            self._serve_pending()
        return future.result()

    def wait(self, event: threading.Event, timeout: float) -> bool:
        """On the database thread: wait for ``event`` (set by a thread that may need this one
        meanwhile, through ``call``), serving the calls it hands over. Elsewhere: a plain
        wait."""
        if not self.is_current():
            return event.wait(timeout)
        deadline = time.monotonic() + timeout
        while True:
            self._serve_pending()
            if event.is_set():
                return True
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            self._handed.wait(min(remaining, 0.01))
            self._handed.clear()

    def wake(self) -> None:
        """Have a database thread waiting in ``wait`` look at its event now rather than at its
        next poll: call it after setting that event from another thread."""
        self._handed.set()

    def _serve_pending(self) -> None:
        while True:
            try:
                fn, future = self._pending.get_nowait()
            except queue.Empty:
                return
            if not future.set_running_or_notify_cancel():
                continue
            try:
                result = fn()
            except BaseException as exc:
                future.set_exception(exc)
            else:
                future.set_result(result)

    # --- On the thread itself ----------------------------------------------------------------

    def _started(self) -> None:
        self._thread = threading.current_thread()
        connections[DEFAULT_DB_ALIAS].execute_wrappers.append(self._counter)

    def run_checked(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """``fn`` with the connection checked before and, on a broken one, run once more."""
        conn = connections[DEFAULT_DB_ALIAS]
        _without_health_check(conn)
        if conn.connection is not None and not conn.in_atomic_block and _server_hung_up(conn):
            logger.warning("The database closed this server's connection; reconnecting")
            conn.close()
        done = self._counter.done
        try:
            return fn(*args, **kwargs)
        except (OperationalError, InterfaceError) as exc:
            if self._counter.done != done or conn.in_atomic_block or _usable(conn):
                raise
            # Nothing succeeded before the connection broke: nothing was written.
            logger.warning("The database connection broke (%s); retrying on a new one", exc)
            conn.close()
        _without_health_check(conn)
        return fn(*args, **kwargs)


def _without_health_check(conn: Any) -> None:
    """Checked here instead of by the ``SELECT 1`` Django's health check sends before the
    first query of every call (a new connection turns it back on from the settings)."""
    conn.health_check_enabled = False


def _usable(conn: Any) -> bool:
    return conn.connection is not None and conn.is_usable()


class _Executor(ThreadPoolExecutor):
    """A one-thread executor whose every work item goes through ``run_checked``."""

    def __init__(self, owner: DatabaseThread, **kwargs: Any) -> None:
        super().__init__(initializer=owner._started, **kwargs)
        self._owner = owner

    def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> Future[T]:
        return super().submit(self._owner.run_checked, fn, *args, **kwargs)
