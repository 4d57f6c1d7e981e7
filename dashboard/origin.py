"""Only pages served by this very server may open the live socket.

The socket is authenticated by the session cookie, which browsers also send to other ports
of the same host (cookies ignore ports). Channels' ``AllowedHostsOriginValidator`` compares
host names only, so a page from ``http://localhost:3000`` (a dev server an agent started,
say) could read every event. Here the Origin must match the Host the socket was opened on,
port and all, or be listed in ``CSRF_TRUSTED_ORIGINS`` (the same setting Django's CSRF check
uses for forms behind a proxy).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import urlsplit

from channels.security.websocket import WebsocketDenier
from django.conf import settings

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

DEFAULT_PORTS = {"http": 80, "https": 443, "ws": 80, "wss": 443}


def _address(netloc: str, scheme: str) -> tuple[str, int] | None:
    try:
        parts = urlsplit(f"//{netloc}")
        port = parts.port or DEFAULT_PORTS.get(scheme)
    except ValueError:
        return None
    if not parts.hostname or port is None:
        return None
    return parts.hostname.lower(), port


def origin_matches_host(*, origin: str, host: str, secure: bool) -> bool:
    """Whether ``origin`` (an Origin header) names the server reached at ``host``."""
    if origin in getattr(settings, "CSRF_TRUSTED_ORIGINS", ()):
        return True
    try:
        parts = urlsplit(origin)
    except ValueError:
        return False
    if parts.scheme not in ("http", "https") or parts.path not in ("", "/"):
        return False
    page = _address(parts.netloc, parts.scheme)
    served = _address(host, "https" if secure else "http")
    return page is not None and page == served


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
