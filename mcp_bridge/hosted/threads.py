"""The threads that run this process's ``/mcp`` database work."""

from __future__ import annotations

from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager

from asgiref.sync import ThreadSensitiveContext
from django.db import DEFAULT_DB_ALIAS, connections

from mcp_bridge.hosted.config import setting
from workflows.db import database_thread_for


class DatabaseThreads:
    """The threads that run this process's MCP database work, each with its own connection.

    Django code called from async code runs on one thread per "thread-sensitive context"; left
    alone, every request of a worker would queue for a single thread. Each request here gets
    the least busy of ``DEEPWORK_MCP_DB_THREADS`` long-lived threads (default 16 on PostgreSQL;
    1 on SQLite, which takes one writer at a time anyway).
    """

    def __init__(self) -> None:
        self._executors: list[ThreadPoolExecutor] = []
        self._busy: list[int] = []

    def _start(self) -> None:
        default = "1" if connections[DEFAULT_DB_ALIAS].vendor == "sqlite" else "16"
        count = max(1, int(setting("DEEPWORK_MCP_DB_THREADS", default)))
        self._executors = [
            ThreadPoolExecutor(max_workers=1, thread_name_prefix="deepwork-mcp-db")
            for _ in range(count)
        ]
        self._busy = [0] * count

    @asynccontextmanager
    async def one(self) -> AsyncIterator[None]:
        if not self._executors:
            self._start()
        chosen = min(range(len(self._busy)), key=self._busy.__getitem__)
        self._busy[chosen] += 1
        executor = self._executors[chosen]
        try:
            with database_thread_for(executor):
                async with ThreadSensitiveContext(executor=executor):
                    yield
        finally:
            self._busy[chosen] -= 1


database_threads = DatabaseThreads()
