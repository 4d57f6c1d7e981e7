"""The ASGI app of ``/mcp``: Host/Origin guard, same-origin rule, body limit, token and
project, then the project's MCP app, for as long as the token stays authorised."""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import parse_qs

import anyio
from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

# MCP_PATH: where /mcp is mounted, defined once beside the client configurations that name it.
from deepwork_site.connect import MCP_PATH
from deepwork_site.origin import origin_matches_host
from mcp_bridge.hosted import servers
from mcp_bridge.hosted.auth import Identity, identify, request_identity, still_authorised
from mcp_bridge.hosted.config import HostedConfig
from mcp_bridge.hosted.refusals import Refused, json_rpc_error, refuse
from mcp_bridge.hosted.threads import database_threads
from workflows.db import DatabaseBusy, db_sync_to_async, retrying_when_busy
from workflows.outputs import outputs_checked_for_remote_caller

logger = logging.getLogger("deepwork.mcp.hosted")

PROJECT_HEADER = "x-deepwork-project"
TOOLSETS_HEADER = "x-deepwork-toolsets"
AGENT_HEADER = "x-deepwork-agent"
ROLES_HEADER = "x-deepwork-roles"
# The SDK refuses larger bodies with 413; a cut-off request's id is read from at most this.
MAX_BODY_KEPT = 4 * 1024 * 1024


def _bearer(headers: Headers) -> str | None:
    scheme, _, secret = headers.get("authorization", "").partition(" ")
    return secret.strip() or None if scheme.lower() == "bearer" else None


def _request_id(body: bytes) -> Any:
    try:
        message = json.loads(body)
    except ValueError:
        return None
    return message.get("id") if isinstance(message, dict) else None


REVOKED = "The API token of this request was revoked (or may no longer use MCP); request ended"


async def _serve_while_authorised(
    app: ASGIApp, identity: Identity, interval: float, scope: Scope, receive: Receive, send: Send
) -> None:
    """``app`` serving the request, ended as soon as a re-check finds the token gone."""
    body = bytearray()
    started = ended = streaming = False
    revoked = False

    async def keeping_body() -> Message:
        message = await receive()
        if message["type"] == "http.request" and len(body) <= MAX_BODY_KEPT:
            body.extend(message.get("body", b""))
        return message

    async def tracking(message: Message) -> None:
        nonlocal started, ended, streaming
        if message["type"] == "http.response.start":
            started = True
            content_type = Headers(raw=message.get("headers", [])).get("content-type", "")
            streaming = content_type.startswith("text/event-stream")
        elif message["type"] == "http.response.body" and not message.get("more_body", False):
            ended = True
        await send(message)

    async with anyio.create_task_group() as group:

        async def watch() -> None:
            nonlocal revoked
            while True:
                await anyio.sleep(interval)
                if not await db_sync_to_async(still_authorised)(identity.token_id):
                    revoked = True
                    group.cancel_scope.cancel()
                    return

        group.start_soon(watch)
        await app(scope, keeping_body, tracking)
        group.cancel_scope.cancel()

    if not revoked or ended:
        return
    logger.warning("Ended a request of agent %s: its token was revoked", identity.agent.agent_id)
    if not started:
        await refuse(send, Refused(401, "unauthorized", REVOKED))
        return
    if streaming:
        error = json_rpc_error(REVOKED, _request_id(bytes(body)), code=-32001)
        event = b"event: message\r\ndata: " + error + b"\r\n\r\n"
        await send({"type": "http.response.body", "body": event, "more_body": True})
    await send({"type": "http.response.body", "body": b"", "more_body": False})


def _same_origin(app: ASGIApp) -> ASGIApp:
    """``app`` behind the server's one same-origin rule: a browser page may call ``/mcp`` only
    from the request's own origin (scheme, host and port) or one in ``CSRF_TRUSTED_ORIGINS``.
    Agents send no Origin and are not concerned."""

    async def checked(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            headers = Headers(scope=scope)
            origin = headers.get("origin")
            host = headers.get("host", "")
            secure = scope.get("scheme") == "https"
            if origin and not origin_matches_host(origin=origin, host=host, secure=secure):
                own = f"{'https' if secure else 'http'}://{host}"
                await refuse(
                    send,
                    Refused(
                        403,
                        "forbidden_origin",
                        f"Origin {origin[:200]!r} is not this server's own ({own[:200]}); a "
                        "browser page may call /mcp only from there or from an origin listed "
                        "in CSRF_TRUSTED_ORIGINS",
                    ),
                )
                return
        await app(scope, receive, send)

    return checked


class HostedMcp:
    """The ASGI app of ``/mcp``: Host/Origin guard, token and project, then the MCP app."""

    def __init__(self) -> None:
        self._config: HostedConfig | None = None
        self._guarded: ASGIApp | None = None

    @property
    def config(self) -> HostedConfig:
        if self._config is None:
            self._config = HostedConfig.from_settings()
        return self._config

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self._guarded is None:
            from fastmcp.server.http import HostOriginGuardMiddleware
            from mcp.server.transport_security import (
                DEFAULT_MAX_REQUEST_BODY_SIZE,
                RequestBodyLimitMiddleware,
            )

            # The guard of `mcpserve --transport http` (strict: every request is checked), then
            # the server's same-origin rule (the guard lets any loopback page in), then the
            # SDK's body limit, here before the token too: an oversized request connects no
            # agent.
            self._guarded = HostOriginGuardMiddleware(
                _same_origin(
                    RequestBodyLimitMiddleware(self._authenticated, DEFAULT_MAX_REQUEST_BODY_SIZE)
                ),
                allowed_hosts=self.config.allowed_hosts,
                allowed_origins=self.config.allowed_origins,
                mode="strict",
            )
        await self._guarded(scope, receive, send)

    async def _authenticated(self, scope: Scope, receive: Receive, send: Send) -> None:
        async with database_threads.one():
            await self._serve(scope, receive, send)

    async def _serve(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = Headers(scope=scope)
        query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
        config = self.config

        def first(name: str, header: str) -> str | None:
            return headers.get(header) or (query.get(name) or [None])[0]

        lookup: Callable[[], Identity] = lambda: identify(  # noqa: E731
            secret=_bearer(headers),
            project_ref=first("project", PROJECT_HEADER),
            toolsets_ref=first("toolsets", TOOLSETS_HEADER),
            sub_agent=headers.get(AGENT_HEADER),
            default_toolsets=config.toolsets,
            roles=headers.get(ROLES_HEADER),
        )
        try:
            identity = await db_sync_to_async(retrying_when_busy(lookup))()
            app = await servers.app_for(identity, config)
        except Refused as refusal:
            await refuse(send, refusal)
            return
        except DatabaseBusy:
            await refuse(send, Refused(503, "database_busy", "The database is busy; retry"))
            return
        reset = request_identity.set(identity)
        try:
            with outputs_checked_for_remote_caller():
                await _serve_while_authorised(
                    app, identity, config.recheck_seconds, scope, receive, send
                )
        finally:
            request_identity.reset(reset)


def with_mcp(
    app: Any, mcp: ASGIApp, path: str = MCP_PATH
) -> Callable[[Scope, Receive, Send], Awaitable[None]]:
    """``app`` for every HTTP request except those to ``path`` (and below), which go to
    ``mcp``."""

    async def route(scope: Scope, receive: Receive, send: Send) -> None:
        request_path = scope.get("path", "")
        if request_path == path or request_path.startswith(path + "/"):
            await mcp(scope, receive, send)
        else:
            await app(scope, receive, send)

    return route
