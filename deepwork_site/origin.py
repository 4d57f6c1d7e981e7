"""The one same-origin rule of the server: a browser's ``Origin`` must name the very address
the request reached (scheme, host and port), or be listed in ``CSRF_TRUSTED_ORIGINS`` (the
setting Django's CSRF check uses for forms behind a proxy).

Both the dashboard's live socket and hosted ``/mcp`` use it. Cookies ignore ports, and a page
from another port of the same host (a dev server an agent started, say) is another origin:
matching host names only, or any loopback origin, would let it in.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from django.conf import settings

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
    if (parts.scheme == "https") != secure:
        return False
    page = _address(parts.netloc, parts.scheme)
    served = _address(host, "https" if secure else "http")
    return page is not None and page == served
