"""Loopback HTTP proxy that adds ``Authorization: Bearer <token>`` to every request.

Used only by ``tests/conformance/run.sh``: the MCP conformance CLI cannot send headers, while
``mcpserve --transport http`` (rightly) requires a bearer token. Rather than weakening the
server, the suite talks to this proxy and the proxy talks to the server.

The proxy is deliberately byte-transparent so that it cannot change what is being tested:

* Each request's header block is forwarded as received (request line, ``Host``, ``Origin``,
  order and case), except that any client ``Authorization`` header is replaced by ours. The
  server therefore still judges the client's own ``Host``/``Origin`` (the dns-rebinding
  scenario), and because the token is always valid a 4xx it gives there comes from the
  host/origin guard, not from authentication.
* Request bodies are forwarded according to their framing (``Content-Length`` or chunked), so
  keep-alive connections carrying several requests get the header on each of them.
* Responses are piped back byte for byte as they arrive: SSE streams, chunked encoding and
  status codes reach the client unchanged and unbuffered.

Standard library only. Usage::

    CONFORMANCE_PROXY_TOKEN=... python auth_proxy.py --port 9001 --upstream-port 9000
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import sys

CRLF = b"\r\n"
HEAD_LIMIT = 1 << 20  # header blocks larger than this are refused
COPY_SIZE = 1 << 16


def log(message: str) -> None:
    print(f"auth_proxy: {message}", file=sys.stderr, flush=True)


async def copy_exactly(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
    while n > 0:
        chunk = await reader.read(min(n, COPY_SIZE))
        if not chunk:
            raise asyncio.IncompleteReadError(b"", n)
        writer.write(chunk)
        await writer.drain()
        n -= len(chunk)


async def copy_chunked(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    while True:
        size_line = await reader.readuntil(CRLF)
        writer.write(size_line)
        size = int(size_line.split(b";", 1)[0].strip(), 16)
        if size == 0:
            while True:  # optional trailers, then the final empty line
                line = await reader.readuntil(CRLF)
                writer.write(line)
                if line == CRLF:
                    await writer.drain()
                    return
        await copy_exactly(reader, writer, size + 2)  # data and its CRLF


async def copy_raw(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    while chunk := await reader.read(COPY_SIZE):
        writer.write(chunk)
        await writer.drain()


async def forward_requests(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, auth_line: bytes
) -> None:
    """Client -> server: rewrite each request head, pass bodies through by their framing."""
    while True:
        try:
            head = await reader.readuntil(CRLF + CRLF)
        except asyncio.IncompleteReadError:
            return  # the client closed the connection between requests
        head = head.lstrip(CRLF)  # tolerate stray CRLFs between requests
        if not head:
            continue
        request_line, *header_lines = head[:-4].split(CRLF)
        kept: list[bytes] = []
        content_length = 0
        chunked = upgrade = False
        for line in header_lines:
            name, _, value = line.partition(b":")
            key = name.strip().lower()
            if key == b"authorization":
                continue
            if key == b"content-length":
                content_length = int(value.strip())
            elif key == b"transfer-encoding":
                chunked = b"chunked" in value.lower()
            elif key == b"upgrade":
                upgrade = True
            kept.append(line)
        kept.append(auth_line)
        log(f"{request_line.decode('latin-1')} host={_header(kept, b'host')!r}")
        writer.write(CRLF.join([request_line, *kept]) + CRLF + CRLF)
        if chunked:
            await copy_chunked(reader, writer)
        elif content_length:
            await copy_exactly(reader, writer, content_length)
        await writer.drain()
        if upgrade:  # the connection stops being HTTP: just pipe it
            await copy_raw(reader, writer)
            return


def _header(lines: list[bytes], wanted: bytes) -> str | None:
    for line in lines:
        name, _, value = line.partition(b":")
        if name.strip().lower() == wanted:
            return value.strip().decode("latin-1")
    return None


async def close(writer: asyncio.StreamWriter) -> None:
    writer.close()
    with contextlib.suppress(Exception):
        await writer.wait_closed()


def make_handler(upstream_host: str, upstream_port: int, token: str):
    auth_line = b"Authorization: Bearer " + token.encode("ascii")

    async def handle(client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter):
        try:
            up_reader, up_writer = await asyncio.open_connection(
                upstream_host, upstream_port, limit=HEAD_LIMIT
            )
        except OSError as exc:
            log(f"upstream {upstream_host}:{upstream_port} unreachable: {exc}")
            client_writer.write(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n")
            await close(client_writer)
            return
        tasks = {
            asyncio.create_task(forward_requests(client_reader, up_writer, auth_line)),
            asyncio.create_task(copy_raw(up_reader, client_writer)),
        }
        try:
            # Either side ending (client gone, server closed) ends the pair.
            done, pending = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                exc = task.exception()
                if exc and not isinstance(exc, ConnectionError | asyncio.IncompleteReadError):
                    log(f"connection error: {exc!r}")
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await close(up_writer)
            await close(client_writer)

    return handle


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1", help="Listen address (default: loopback)")
    parser.add_argument("--port", type=int, required=True, help="Listen port")
    parser.add_argument("--upstream-host", default="127.0.0.1")
    parser.add_argument("--upstream-port", type=int, required=True)
    args = parser.parse_args()
    token = os.environ.get("CONFORMANCE_PROXY_TOKEN")
    if not token:
        parser.error("set CONFORMANCE_PROXY_TOKEN to the server's bearer token")
    server = await asyncio.start_server(
        make_handler(args.upstream_host, args.upstream_port, token),
        args.host,
        args.port,
        limit=HEAD_LIMIT,
    )
    log(
        f"listening on {args.host}:{args.port}, "
        f"forwarding to {args.upstream_host}:{args.upstream_port}"
    )
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(main())
