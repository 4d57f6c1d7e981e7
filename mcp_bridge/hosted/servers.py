"""This process's FastMCP apps: one per (project, toolsets), built on first use and kept."""

from __future__ import annotations

import asyncio
import contextvars
import logging
import os
import time
from typing import Any

from starlette.types import ASGIApp

# MCP_PATH: where /mcp is mounted, defined once beside the client configurations that name it.
from deepwork_site.connect import MCP_PATH
from mcp_bridge.hosted.auth import Identity
from mcp_bridge.hosted.config import HostedConfig
from mcp_bridge.hosted.state import hosted_state
from workflows.db import db_sync_to_async

logger = logging.getLogger("deepwork.mcp.hosted")
# Stateless serving opens and closes a transport per request; the SDK logs each at INFO.
logging.getLogger("mcp.server.streamable_http").setLevel(logging.WARNING)


class ToolSchemas:
    """The input schemas a server's ``tools/list`` advertises, by tool name, for the SDK's
    check of a 2026-07-28 call's ``Mcp-Param-*`` headers. Without them the SDK lists every
    tool (and renders every schema) on each call; here they are listed again only when older
    than ``TOOL_SCHEMAS_SECONDS``, so a tool added at run time (``refresh_workflow_tools``)
    is checked from then on (before, the SDK skips the check, as for any tool it cannot find).
    """

    def __init__(self, mcp: Any) -> None:
        self._mcp = mcp
        self._by_name: dict[str, Any] = {}
        self._listed_at: float | None = None

    def get(self, name: str) -> Any:
        return self._by_name.get(name)

    async def fresh(self) -> None:
        now = time.monotonic()
        if self._listed_at is not None and now - self._listed_at < TOOL_SCHEMAS_SECONDS:
            return
        self._listed_at = now
        self._by_name = {tool.name: tool.parameters for tool in await self._mcp.list_tools()}


TOOL_SCHEMAS_SECONDS = 10.0


class Servers:
    """This process's FastMCP apps. Each app's lifespan (the SDK's session manager) runs in a
    task of its own, started on first use and stopped by ``shutdown``: a lifespan must end in
    the task it began in."""

    def __init__(self) -> None:
        self._apps: dict[tuple[int, tuple[str, ...]], ASGIApp] = {}
        self._schemas: dict[tuple[int, tuple[str, ...]], ToolSchemas] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self._lock: asyncio.Lock | None = None
        self._stop: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def _for_this_loop(self) -> None:
        loop = asyncio.get_running_loop()
        if self._loop is not loop:
            self._apps, self._tasks = {}, []
            self._lock, self._stop, self._loop = asyncio.Lock(), asyncio.Event(), loop

    async def app_for(self, identity: Identity, config: HostedConfig) -> ASGIApp:
        self._for_this_loop()
        key = (identity.project.pk, identity.toolsets)
        app = self._apps.get(key)
        if app is not None:
            await self._schemas[key].fresh()
            return app
        assert self._lock is not None
        async with self._lock:
            app = self._apps.get(key)
            if app is None:
                app, schemas = await self._start(identity, config)
                await schemas.fresh()
                self._apps[key], self._schemas[key] = app, schemas
        return app

    async def _start(self, identity: Identity, config: HostedConfig) -> tuple[ASGIApp, ToolSchemas]:
        from mcp_bridge.server import server_for_state

        state = await db_sync_to_async(hosted_state)(identity.project, config)
        mcp = server_for_state(state, toolsets=identity.toolsets)
        schemas = ToolSchemas(mcp)
        mcp._mcp_server.get_tool_input_schema = schemas.get
        # The guard runs in front of the token check (HostedMcp), so the app needs none.
        app = mcp.http_app(path=MCP_PATH, stateless_http=True, host_origin_protection=False)
        ready = asyncio.Event()
        assert self._stop is not None
        stop = self._stop

        async def run() -> None:
            async with app.router.lifespan_context(app):
                ready.set()
                await stop.wait()

        # A fresh context: the lifespan must not carry the identity of the request starting it.
        task = asyncio.get_running_loop().create_task(run(), context=contextvars.Context())
        self._tasks.append(task)
        waiting = asyncio.ensure_future(ready.wait())
        await asyncio.wait({task, waiting}, return_when=asyncio.FIRST_COMPLETED)
        if not ready.is_set():
            waiting.cancel()
            task.result()  # raises what the lifespan raised
        logger.info(
            "Serving /mcp for project %s with toolsets %s in worker %d",
            identity.project.pk,
            ",".join(identity.toolsets),
            os.getpid(),
        )
        return app, schemas

    async def shutdown(self) -> None:
        if self._loop is not asyncio.get_running_loop() or self._stop is None:
            return
        self._stop.set()
        tasks, self._tasks, self._apps = self._tasks, [], {}
        await asyncio.gather(*tasks, return_exceptions=True)
        self._loop = None


_servers = Servers()


async def app_for(identity: Identity, config: HostedConfig) -> ASGIApp:
    """The MCP app serving ``identity``'s project and toolsets in this process."""
    return await _servers.app_for(identity, config)


async def shutdown() -> None:
    """Stop this process's MCP apps (ASGI lifespan shutdown)."""
    await _servers.shutdown()
