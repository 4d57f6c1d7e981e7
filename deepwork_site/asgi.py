"""ASGI entry point: pages, admin, API and static files over HTTP; hosted MCP at ``/mcp``; the
live dashboard socket.

``make run`` serves it with uvicorn. Static files are served in-process because the embedded
default has no separate web server for them.
"""

import os
from collections.abc import Awaitable, Callable
from typing import Any

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "deepwork_site.settings")

# Set Django up before anything below imports models.
django_application = get_asgi_application()

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402
from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler  # noqa: E402

from dashboard import live, routing  # noqa: E402
from dashboard.origin import SameOriginWebsocket  # noqa: E402
from mcp_bridge.hosted import servers as hosted_servers  # noqa: E402
from mcp_bridge.hosted.asgi import HostedMcp, with_mcp  # noqa: E402


async def lifespan(
    scope: dict[str, Any],
    receive: Callable[[], Awaitable[dict[str, Any]]],
    send: Callable[[dict[str, Any]], Awaitable[None]],
) -> None:
    """The dashboard's lifespan, stopping the MCP apps of this process on shutdown too."""

    async def receiving() -> dict[str, Any]:
        message = await receive()
        if message["type"] == "lifespan.shutdown":
            await hosted_servers.shutdown()
        return message

    await live.lifespan(scope, receiving, send)


application = ProtocolTypeRouter(
    {
        # Agents' MCP requests never reach Django: the token is their login (mcp_bridge.hosted).
        "http": with_mcp(ASGIStaticFilesHandler(django_application), HostedMcp()),
        # The session cookie authenticates the socket, so refuse pages from other origins:
        # an unknown host, and another port or scheme of a known one.
        "websocket": AllowedHostsOriginValidator(
            SameOriginWebsocket(AuthMiddlewareStack(URLRouter(routing.websocket_urlpatterns)))
        ),
        "lifespan": lifespan,
    }
)
