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
