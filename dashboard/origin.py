"""Only pages served by this very server may open the live socket.

The socket is authenticated by the session cookie, which browsers also send to other ports
of the same host (cookies ignore ports). Channels' ``AllowedHostsOriginValidator`` compares
host names only, so a page from ``http://localhost:3000`` (a dev server an agent started,
say) could read every event. Here the Origin must match the Host the socket was opened on,
port and all, or be listed in ``CSRF_TRUSTED_ORIGINS``: the server's one same-origin rule
(``deepwork_site.origin``), which hosted ``/mcp`` applies too.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from channels.security.websocket import WebsocketDenier

from deepwork_site.origin import origin_matches_host

__all__ = ["SameOriginWebsocket", "origin_matches_host"]

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


class SameOriginWebsocket:
    """ASGI middleware: deny a WebSocket whose Origin is not this server's own address."""

    def __init__(self, application: ASGIApp) -> None:
        self.application = application

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "websocket":
            headers = dict(scope.get("headers") or [])
            origin = headers.get(b"origin", b"").decode("latin-1")
            host = headers.get(b"host", b"").decode("latin-1")
            secure = scope.get("scheme") in ("wss", "https")
            if not origin_matches_host(origin=origin, host=host, secure=secure):
                return await WebsocketDenier()(scope, receive, send)
        return await self.application(scope, receive, send)
