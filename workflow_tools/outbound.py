"""The one place the server opens a URL: every outbound HTTP request goes through ``fetch``.

What a remote address names is not trusted, so every request is held to the same rules:

- ``http`` and ``https`` only; any other scheme (``file``, ``ftp``, ...) is refused before
  anything is opened.
- A redirect is followed only within the same origin (scheme, host and port), at most
  ``MAX_REDIRECTS`` times, and only when it keeps the request's meaning (a ``GET``, or a
  ``307``/``308``). A redirect to another origin is refused: the request's headers carry a
  bearer token that belongs to the origin it was configured for.
- One deadline for the whole request (connecting, sending, the headers, the body and every
  redirect), not per read: each socket operation waits at most the time left, so a server
  that drips a byte at a time is cut off when the deadline passes.
- The body is capped; a longer answer is refused with a message naming the limit.
- Nothing here logs a request's headers, and messages name the address without its userinfo
  or query.

The standard library (``http.client``) is used rather than a client library: its parser is
well tried, and the deadline is enforced on the socket itself (a socket class whose every
read and write waits only the time left), which holds for plain and TLS connections alike.
Name resolution is the one step the deadline does not bound.
"""

from __future__ import annotations

import http.client
import socket
import ssl
import time
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

SCHEMES = ("http", "https")
MAX_REDIRECTS = 3
DEFAULT_DEADLINE = 10.0
DEFAULT_MAX_BYTES = 16 * 1024 * 1024
_REDIRECTS = (301, 302, 303, 307, 308)
_CHUNK = 64 * 1024


class OutboundError(Exception):
    """A request that could not be made or was refused; the message says why."""


class OutboundRefused(OutboundError):
    """A request the rules refuse (scheme, redirect, size): retrying will not help."""


class OutboundTimeout(OutboundError):
    """The whole request took longer than its deadline."""


@dataclass(frozen=True)
class Response:
    status: int
    headers: Mapping[str, str]
    body: bytes
    url: str


@dataclass(frozen=True)
class _Target:
    scheme: str
    host: str
    port: int
    path: str  # with the query

    @property
    def origin(self) -> tuple[str, str, int]:
        return (self.scheme, self.host, self.port)


def shown(url: str) -> str:
    """``url`` as messages may name it: no userinfo, no query, no fragment."""
    try:
        parts = urllib.parse.urlsplit(url)
        host = parts.hostname or ""
        port = parts.port
    except ValueError:
        return "<an invalid address>"
    if ":" in host:
        host = f"[{host}]"
    netloc = f"{host}:{port}" if port is not None else host
    return urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def _target(url: str) -> _Target:
    try:
        parts = urllib.parse.urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise OutboundRefused(f"{shown(url)} is not a valid address: {exc}") from None
    scheme = parts.scheme.lower()
    if scheme not in SCHEMES:
        raise OutboundRefused(
            f"{shown(url)}: the scheme {scheme or '(none)'!r} is refused; only http and https "
            "addresses are fetched"
        )
    if not parts.hostname:
        raise OutboundRefused(f"{shown(url)} names no host")
    path = parts.path or "/"
    if parts.query:
        path += "?" + parts.query
    default = 443 if scheme == "https" else 80
    return _Target(scheme, parts.hostname, port if port is not None else default, path)


class _Deadline:
    """Gives each socket operation the time left, and fails once none is."""

    def __init__(self, seconds: float, label: str) -> None:
        self.seconds = seconds
        self.label = label
        self.end = time.monotonic() + seconds

    def left(self) -> float:
        remaining = self.end - time.monotonic()
        if remaining <= 0:
            raise OutboundTimeout(f"{self.label} took longer than {self.seconds:g} s; cut off")
        return remaining


class _DeadlineMixin:
    """Every read and write of the socket waits at most the time left before the deadline."""

    deadline: _Deadline

    def _bound(self) -> None:
        self.settimeout(self.deadline.left())  # type: ignore[attr-defined]

    def recv(self, *args: Any) -> bytes:
        self._bound()
        return super().recv(*args)  # type: ignore[misc]

    def recv_into(self, *args: Any) -> int:
        self._bound()
        return super().recv_into(*args)  # type: ignore[misc]

    def send(self, *args: Any) -> int:
        self._bound()
        return super().send(*args)  # type: ignore[misc]

    def sendall(self, *args: Any) -> None:
        self._bound()
        super().sendall(*args)  # type: ignore[misc]


class _DeadlineSocket(_DeadlineMixin, socket.socket):
    pass


class _DeadlineSSLSocket(_DeadlineMixin, ssl.SSLSocket):
    pass


def _tls_context() -> ssl.SSLContext:
    context = ssl.create_default_context()
    context.sslsocket_class = _DeadlineSSLSocket
    return context


class _Connection(http.client.HTTPConnection):
    """A connection whose socket keeps to the request's deadline (and TLS when asked)."""

    def __init__(self, target: _Target, deadline: _Deadline) -> None:
        super().__init__(target.host, target.port, timeout=deadline.left())
        self.target = target
        self.deadline = deadline

    def connect(self) -> None:
        raw = socket.create_connection((self.host, self.port), timeout=self.deadline.left())
        sock = _DeadlineSocket(raw.family, raw.type, raw.proto, fileno=raw.detach())
        sock.deadline = self.deadline
        if self.target.scheme == "https":
            sock.settimeout(self.deadline.left())
            tls = _tls_context().wrap_socket(sock, server_hostname=self.host)
            tls.deadline = self.deadline  # type: ignore[attr-defined]
            self.sock = tls
        else:
            self.sock = sock


def fetch(
    method: str,
    url: str,
    *,
    headers: Mapping[str, str] | None = None,
    body: bytes | None = None,
    deadline: float = DEFAULT_DEADLINE,
    max_bytes: int = DEFAULT_MAX_BYTES,
    label: str | None = None,
) -> Response:
    """Make one request under the rules above and answer the final response, whatever its
    status (the caller decides what a 4xx or 5xx means). ``label`` names the remote end in
    messages (default: the address). Raises ``OutboundRefused``, ``OutboundTimeout`` or
    ``OutboundError`` with a message that names the address and the reason."""
    label = label or shown(url)
    clock = _Deadline(deadline, label)
    target = _target(url)
    origin = target.origin
    for _hop in range(MAX_REDIRECTS + 1):
        status, answer_headers, raw = _one(method, target, headers, body, clock, max_bytes, label)
        location = answer_headers.get("location")
        if status not in _REDIRECTS or location is None:
            return Response(status, answer_headers, raw, url)
        url = urllib.parse.urljoin(url, location)
        next_target = _target(url)
        if next_target.origin != origin:
            raise OutboundRefused(
                f"{label} redirected ({status}) to another origin, {shown(url)}; not followed, "
                "so nothing sent to it (a token included) reaches that host"
            )
        if method not in ("GET", "HEAD") and status not in (307, 308):
            raise OutboundRefused(
                f"{label} answered a {method} with a redirect ({status}); not followed, "
                "since it would not be re-sent as the same request"
            )
        target = next_target
    raise OutboundRefused(f"{label} redirected more than {MAX_REDIRECTS} times; not followed")


def _one(
    method: str,
    target: _Target,
    headers: Mapping[str, str] | None,
    body: bytes | None,
    clock: _Deadline,
    max_bytes: int,
    label: str,
) -> tuple[int, dict[str, str], bytes]:
    connection = _Connection(target, clock)
    try:
        connection.putrequest(method, target.path, skip_accept_encoding=True)
        for name, value in (headers or {}).items():
            connection.putheader(name, value)
        connection.putheader("Connection", "close")
        if body is not None:
            connection.putheader("Content-Length", str(len(body)))
        connection.endheaders(body)
        response = connection.getresponse()
        answer_headers = {name.lower(): value for name, value in response.getheaders()}
        length = answer_headers.get("content-length", "")
        if length.isdigit() and int(length) > max_bytes:
            raise OutboundRefused(_too_long(label, max_bytes))
        chunks: list[bytes] = []
        size = 0
        while size <= max_bytes:
            chunk = response.read(min(_CHUNK, max_bytes + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > max_bytes:
            raise OutboundRefused(_too_long(label, max_bytes))
        return response.status, answer_headers, b"".join(chunks)
    except OutboundError:
        raise
    except TimeoutError:
        # A socket wait that ran out is the deadline passing (each wait is the time left).
        raise OutboundTimeout(f"{label} took longer than {clock.seconds:g} s; cut off") from None
    except (OSError, http.client.HTTPException, ValueError) as exc:
        if clock.end <= time.monotonic():
            raise OutboundTimeout(
                f"{label} took longer than {clock.seconds:g} s; cut off"
            ) from None
        raise OutboundError(f"{label} could not be reached: {_reason(exc)}") from None
    finally:
        connection.close()


def _too_long(label: str, max_bytes: int) -> str:
    return f"{label} answered more than {max_bytes:,} bytes; refused"


def _reason(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    return text[:300]
