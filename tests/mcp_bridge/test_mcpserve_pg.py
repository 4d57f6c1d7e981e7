"""A stdio ``mcpserve`` on PostgreSQL: one connection per process, and it survives losing it.

Each server connects under an ``application_name`` of its own, so ``pg_stat_activity`` tells its
connections from everyone else's.
"""

from __future__ import annotations

import asyncio
import sys
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from asgiref.sync import sync_to_async
from django.db import OperationalError, close_old_connections, connection
from django.utils import timezone
from fastmcp.client.transports import StdioTransport

from mcp_bridge import dbthread
from mcp_bridge.dbthread import DatabaseThread
from tests.e2e.driver import Driver
from tests.support.processes import MANAGE, child_database_url, child_env
from workflows.models import Agent, StepRun

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(
        connection.vendor != "postgresql", reason="counts PostgreSQL connections (DATABASE_URL)"
    ),
]

WAIT_SECONDS = 30.0


def _server(project: Path, name: str) -> StdioTransport:
    """mcpserve on the test database as ``name``, with the step-files worker on (the suite runs
    it inline) and a heartbeat every 0.2 s."""
    return StdioTransport(
        command=sys.executable,
        args=[MANAGE, "mcpserve", "--path", str(project)],
        env=child_env(
            DATABASE_URL=f"{child_database_url()}?application_name={name}",
            DEEPWORK_STEP_FILES="on",
            DEEPWORK_AGENT_RESPONSIVE_SECONDS="0.6",
        ),
        cwd=str(project),
    )


def _backends(name: str) -> list[int]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pid FROM pg_stat_activity WHERE application_name = %s ORDER BY pid", [name]
        )
        return [pid for (pid,) in cursor.fetchall()]


async def _until(what: str, done: Callable[[], bool]) -> None:
    deadline = time.monotonic() + WAIT_SECONDS
    while not await sync_to_async(done)():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.05)


def _terminate(pid: int) -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_terminate_backend(%s)", [pid])


def _heartbeats_since(moment: object) -> bool:
    return Agent.objects.filter(heartbeat_at__gt=moment).exists()


async def _run_a_step(agent: Driver) -> None:
    await agent.call("get_workflows")
    await agent.call("start_workflow", {"goal": "pg", "job_name": "demo", "workflow_name": "main"})
    await agent.call("finished_step", {"outputs": {"notes.md": "notes.md"}})


async def test_a_stdio_server_uses_one_connection_for_tools_heartbeat_and_step_files(
    demo_project,
):
    name = f"dw-test-{uuid.uuid4().hex[:12]}"
    async with Driver(demo_project, transport=_server(demo_project, name)) as agent:
        await _run_a_step(agent)
        # The step-files worker has looked at the project (it needs the database to store
        # what it saw) and the heartbeat has beaten since: all three have used the database.
        await _until(
            "the step-files look",
            lambda: (
                not StepRun.objects.filter(files_status=StepRun.FilesStatus.PENDING)
                .exclude(status=StepRun.Status.ACTIVE)
                .exists()
            ),
        )
        moment = timezone.now()
        await _until("a heartbeat", lambda: _heartbeats_since(moment))
        await agent.call("abort_workflow", {"explanation": "counted"})
        assert len(await sync_to_async(_backends)(name)) == 1


async def test_a_stdio_server_answers_after_its_connection_is_terminated(demo_project):
    name = f"dw-test-{uuid.uuid4().hex[:12]}"
    async with Driver(demo_project, transport=_server(demo_project, name)) as agent:
        await agent.call("get_workflows")
        [pid] = await sync_to_async(_backends)(name)
        await sync_to_async(_terminate)(pid)
        await _until("the backend to go", lambda: pid not in _backends(name))

        await _run_a_step(agent)
        [new_pid] = await sync_to_async(_backends)(name)
        assert new_pid != pid


def test_the_database_thread_sends_no_health_check_query_before_a_call():
    """Django's health check would send ``SELECT 1`` before the first query of every call;
    the last statement the server saw shows whether it did."""
    database = DatabaseThread()

    def marked() -> int:
        close_old_connections()  # as every database call of the tools does first
        with connection.cursor() as cursor:
            cursor.execute("SELECT 42 /* marker */")
            cursor.execute("SELECT pg_backend_pid()")
            return cursor.fetchone()[0]

    def without_queries() -> None:
        close_old_connections()
        connection.cursor().close()  # where the health check would run

    def last_statement(pid: int) -> str:
        with connection.cursor() as cursor:
            cursor.execute("SELECT query FROM pg_stat_activity WHERE pid = %s", [pid])
            return cursor.fetchone()[0]

    try:
        pid = database.call(marked)
        database.call(without_queries)
        assert last_statement(pid) == "SELECT pg_backend_pid()"
    finally:
        database.call(lambda: connection.close())
        database.executor.shutdown()


def _own_pid() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        return cursor.fetchone()[0]


def _terminated(pid: int) -> None:
    """Terminate backend ``pid`` (from this thread's connection) and wait until it is gone."""
    _terminate(pid)
    deadline = time.monotonic() + WAIT_SECONDS
    with connection.cursor() as cursor:
        while True:
            cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = %s", [pid])
            if cursor.fetchone()[0] == 0:
                return
            assert time.monotonic() < deadline, "the backend did not go"
            time.sleep(0.05)


def _terminated_elsewhere(pid: int) -> None:
    """``_terminated`` from a thread of its own (with its own connection, closed after)."""

    def terminate() -> None:
        try:
            _terminated(pid)
        finally:
            connection.close()

    thread = threading.Thread(target=terminate)
    thread.start()
    thread.join()


@pytest.mark.parametrize("statements_before", [0, 1])
def test_a_call_is_run_again_only_if_nothing_succeeded_before_its_connection_broke(
    monkeypatch, statements_before
):
    """The check before a call would see the server's goodbye; here it is made to miss it (as
    when the server goes while the call starts), so the call itself meets the broken
    connection."""
    monkeypatch.setattr(dbthread, "_server_hung_up", lambda conn: False)
    database = DatabaseThread()
    runs: list[int] = []

    def call() -> int:
        runs.append(1)
        if statements_before and len(runs) == 1:
            with connection.cursor() as cursor:
                cursor.execute("SELECT 1 /* succeeded */")
            _terminated_elsewhere(_own_pid())
        return _own_pid()

    try:
        first = database.call(_own_pid)
        if statements_before:
            with pytest.raises(OperationalError):
                database.executor.submit(call).result()
            assert len(runs) == 1
        else:
            _terminated(first)
            assert database.executor.submit(call).result() != first
            assert len(runs) == 2
    finally:
        database.call(lambda: connection.close())
        database.executor.shutdown()
