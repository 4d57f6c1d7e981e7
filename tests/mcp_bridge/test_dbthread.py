"""``DatabaseThread``: the one thread of a stdio server's database work."""

from __future__ import annotations

import threading

from mcp_bridge.dbthread import DatabaseThread


def test_the_database_thread_serves_calls_while_it_waits_for_their_caller():
    """A review waits on the database thread for the step-files look, and the look needs that
    thread for its queries: waiting must run them, or both sit until the timeout."""
    database = DatabaseThread()
    looked = threading.Event()
    ran_on: list[threading.Thread] = []

    def look() -> None:  # the step-files worker
        database.call(lambda: ran_on.append(threading.current_thread()))
        looked.set()

    def review() -> bool:  # on the database thread
        threading.Thread(target=look).start()
        return database.wait(looked, timeout=10)

    try:
        assert database.executor.submit(review).result(timeout=20) is True
        [thread] = ran_on
        assert thread is not threading.current_thread()
        assert thread.name.startswith("deepwork-db")
    finally:
        database.executor.shutdown()


def test_a_call_after_the_database_thread_has_stopped_runs_on_the_caller():
    database = DatabaseThread()
    database.call(lambda: None)
    database.executor.shutdown()
    assert database.call(threading.current_thread) is threading.current_thread()


def test_a_tool_call_goes_straight_to_the_database_thread_with_its_context():
    """Within ``database_thread_for``, ``db_sync_to_async`` runs on that thread (not through
    asgiref's thread-sensitive machinery) and sees the caller's context variables."""
    import asyncio
    import contextvars

    from asgiref import sync

    from workflows.db import database_thread_for, db_sync_to_async

    database = DatabaseThread()
    caller: contextvars.ContextVar[str] = contextvars.ContextVar("caller", default="")
    seen: list[tuple[str, str]] = []

    def service() -> str:
        seen.append((threading.current_thread().name, caller.get()))
        return "done"

    async def tool() -> str:
        caller.set("agent-1")
        with database_thread_for(database.executor):
            return await db_sync_to_async(service)()

    real = sync.SyncToAsync.__call__

    def not_asgiref(self, *args, **kwargs):
        raise AssertionError("went through asgiref")

    try:
        sync.SyncToAsync.__call__ = not_asgiref  # type: ignore[method-assign]
        assert asyncio.run(tool()) == "done"
    finally:
        sync.SyncToAsync.__call__ = real  # type: ignore[method-assign]
        database.executor.shutdown()
    [(thread, who)] = seen
    assert thread.startswith("deepwork-db")
    assert who == "agent-1"


def test_async_code_a_call_runs_comes_back_to_the_database_thread_without_waiting_for_it():
    """A call on the database thread that runs async code (``async_to_sync``) which calls the
    database again would wait for its own thread if that went to the executor: it goes through
    asgiref, which runs it on the waiting thread."""
    import asyncio

    from asgiref.sync import async_to_sync

    from workflows.db import database_thread_for, db_sync_to_async

    database = DatabaseThread()

    async def again() -> str:
        return await db_sync_to_async(lambda: threading.current_thread().name)()

    def service() -> tuple[str, str]:
        return threading.current_thread().name, async_to_sync(again)()

    async def tool() -> tuple[str, str]:
        with database_thread_for(database.executor):
            return await asyncio.wait_for(db_sync_to_async(service)(), timeout=20)

    try:
        outer, nested = asyncio.run(tool())
    finally:
        database.executor.shutdown(wait=False)  # a thread stuck waiting must not hang the run
    assert outer.startswith("deepwork-db")
    assert nested == outer
