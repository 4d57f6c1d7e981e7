"""Building and serving a FastMCP server: the one module that touches FastMCP and MCP SDK
internals (``_lifespan_manager``, ``_mcp_server.run``, the SDK's message streams, the session
state store, docstring parsing, the tool call's middleware chain and lookup, the conversion of
an answer into a tool result).

On pipes, stdin and stdout are read and written by the event loop itself, and each line is
decoded here rather than in the SDK's transport, so that a line the SDK cannot decode still gets
an answer when it names a request id.
"""

from __future__ import annotations

import asyncio
import functools
import importlib.util
import inspect
import json
import logging
import os
import re
import stat
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator
from concurrent.futures import Executor
from contextlib import asynccontextmanager, contextmanager, suppress
from typing import Any, TypeVar, get_type_hints

import anyio
from fastmcp import FastMCP

from workflows.db import database_thread_for

logger = logging.getLogger("deepwork.mcp")

F = TypeVar("F", bound=Callable[..., Any])

# The output schema of a tool whose answer is any JSON object: DeepWork 0.9.1 advertises this
# loose schema for its dict-returning tools, and clients that validate structured content
# against a detailed schema would pay for that on every call.
LOOSE_OBJECT = {"additionalProperties": True, "type": "object"}

# The key of a tool's `_meta` that tells Claude Code, which otherwise defers MCP tools behind
# its tool search, to keep the tool's schema in the model's context from the first turn.
ALWAYS_LOAD_META = "anthropic/alwaysLoad"


# --- Start-up shortcuts ---------------------------------------------------------------------
# An agent waits for `tools/list` at every start; these keep two libraries out of that wait.


@contextmanager
def described(fn: Callable[..., Any]) -> Iterator[str | None]:
    """``fn`` ready for FastMCP to read as a tool: yields its description, the docstring as
    written (cleaned), with the docstring itself hidden meanwhile.

    FastMCP would hand each docstring to griffe (imported for it, and three parsers tried per
    tool) looking for Google/NumPy/Sphinx sections ours do not have; the text it ends up with
    is the cleaned docstring, which is what callers pass directly.

    The annotations are resolved once, here: our modules postpone them, so each is a string,
    and FastMCP would evaluate every one of them again in each of the half-dozen places that
    reads a tool's type hints.
    """
    description = inspect.getdoc(fn)
    fn.__annotations__ = get_type_hints(fn, include_extras=True)
    fn.__doc__ = None
    try:
        yield description
    finally:
        fn.__doc__ = description


def tool(mcp: FastMCP, **options: Any) -> Callable[[F], F]:
    """``@mcp.tool(**options)``, the function ``described``; a tool declaring an object
    ``output_schema`` has its answer ``serialized_once``."""

    if options.get("name") in getattr(mcp, "always_loaded", ()):
        options["meta"] = {**(options.get("meta") or {}), ALWAYS_LOAD_META: True}

    def register(fn: F) -> F:
        with described(fn) as description:
            # Stand-ins that collect the functions (the union tools hand calls on to 0.9.1's)
            # get them as written: their answers are models, serialized by the tool answering.
            served = fn
            if isinstance(mcp, FastMCP):
                served = serialized_once(fn, options.get("output_schema"))
            mcp.tool(served, description=description, **options)
        return fn

    return register


def _result_type(cls: type) -> bool:
    """FastMCP's and the protocol's own result types, which FastMCP converts in ways of its
    own (passed through, content blocks)."""
    return cls.__module__.partition(".")[0] in ("fastmcp", "mcp", "mcp_types")


def serialized_once(fn: F, output_schema: Any) -> F:
    """``fn`` answering with the ``ToolResult`` FastMCP would make of its answer, with the
    answer model serialized once instead of three times.

    For an answer model FastMCP serializes the model to text (then drops that text), serializes
    it again and parses it back for the structured content, then serializes the parsed value
    for the text. Here the model is serialized once, with the same serializer (the return
    annotation's schema, non-finite floats kept as tokens), and parsed once; the text is that
    serialization. (``ToolResult``'s constructor then serializes and parses the structured
    content once more, on either path.) 0.03-0.26 ms of a call in ``make bench``'s cycle.
    Only for a tool declaring an object output schema whose answer is a model of ours (its
    return annotation a model, or ``Any``); any other answer, and answers FastMCP treats
    differently (non-finite floats, which it refuses), are left to FastMCP.
    """
    from pydantic import BaseModel

    return_type = fn.__annotations__.get("return")
    if (
        not isinstance(output_schema, dict)
        or output_schema.get("type") != "object"
        or output_schema.get("x-fastmcp-wrap-result")
    ):
        return fn
    if return_type is Any:  # serialized as whatever model it is, as FastMCP does
        expected: type = BaseModel
    elif (
        isinstance(return_type, type)
        and issubclass(return_type, BaseModel)
        and not _result_type(return_type)
    ):
        expected = return_type
    else:
        return fn
    serializer: list[Any] = []

    @functools.wraps(fn)
    async def answered(*args: Any, **kwargs: Any) -> Any:
        answer = await fn(*args, **kwargs)
        if not isinstance(answer, expected) or _result_type(type(answer)):
            return answer
        if not serializer:  # built at the first call, not in the wait for tools/list
            import pydantic_core
            from pydantic import TypeAdapter

            adapter = TypeAdapter(return_type)
            # Models defer building their schemas to first use (``mcp_bridge.startup``).
            adapter.rebuild()
            serializer.append(
                pydantic_core.SchemaSerializer(
                    adapter.core_schema, config={"ser_json_inf_nan": "constants"}
                )
            )
        payload = serializer[0].to_json(answer)
        if b"NaN" in payload or b"Infinity" in payload:
            return answer
        from fastmcp.tools import ToolResult
        from mcp_types import TextContent

        return ToolResult(
            content=[TextContent(type="text", text=payload.decode())],
            structured_content=json.loads(payload),
        )

    return answered  # type: ignore[return-value]


class _SessionStateStore:
    """FastMCP's per-session state (``ctx.set_state``, visibility rules) in a plain dict.

    FastMCP reads it on every ``tools/list`` and ``tools/call``; its default store pulls in
    py-key-value and beartype on the first request. Same calls, values kept until their ttl.
    """

    def __init__(self) -> None:
        self._values: dict[str, tuple[Any, float | None]] = {}

    async def get(self, *, key: str) -> Any | None:
        found = self._values.get(key)
        if found is None:
            return None
        value, expires = found
        if expires is not None and expires <= time.monotonic():
            del self._values[key]
            return None
        return value

    async def put(self, *, key: str, value: Any, ttl: float | None = None) -> None:
        self._values[key] = (value, None if ttl is None else time.monotonic() + ttl)

    async def delete(self, *, key: str) -> bool:
        return self._values.pop(key, None) is not None


class Server(FastMCP):
    """FastMCP with the light session-state store, and tool calls that skip building an
    empty middleware chain and, on a server whose tools are fixed, the tool's lookup."""

    # Names of the tools ``tool`` marks as always loaded (set before the toolsets register).
    always_loaded: frozenset[str] = frozenset()
    # Whether the server's tools stay as registered while it serves (no tool added, removed,
    # hidden or shown later): then a call finds its tool by name from the second call on.
    tools_fixed: bool = False

    async def get_tool(self, name: str, version: Any = None) -> Any:
        """FastMCP's ``get_tool``, kept by name on a server whose ``tools_fixed``.

        FastMCP asks every provider again on each call (transforms, visibility, versions, auth
        checks, all async): 0.2 ms of each call in ``make bench``'s cycle, for the same
        answer every time when nothing about the tools can change. A tool not found, or with
        an auth check of its own, is not kept, and a call for a given version is always
        looked up.
        """
        if not self.tools_fixed or version is not None:
            return await super().get_tool(name, version)
        found: dict[str, Any] = self.__dict__.setdefault("_deepwork_found_tools", {})
        tool = found.get(name)
        if tool is None:
            tool = await super().get_tool(name)
            # A tool with an auth check of its own may be found for one caller and not for
            # another (our tools have none; the server's token check happens before this).
            if tool is not None and getattr(tool, "auth", None) is None:
                found[name] = tool
        return tool

    async def call_tool(
        self,
        name: str,
        arguments: dict[str, Any] | None = None,
        *,
        version: Any = None,
        run_middleware: bool = True,
    ) -> Any:
        """FastMCP's ``call_tool``; with no middleware and no extension to run, straight to
        the tool (what FastMCP itself does from inside a middleware chain).

        The chain costs a call its message and context models, three context scopes and the
        composition of nothing around the tool: 0.1-0.2 ms of a 3 ms ``get_workflows`` in
        ``make bench``'s cycle. Lookup, visibility, the tool's run and the error answers are
        FastMCP's either way. The start-up gate is a middleware, so calls it holds take the
        whole chain until it removes itself.
        """
        # An unknown FastMCP without ``_extensions`` takes the whole chain.
        if run_middleware and not self.middleware and not getattr(self, "_extensions", True):
            run_middleware = False
        return await super().call_tool(
            name, arguments, version=version, run_middleware=run_middleware
        )

    @property
    def _state_store(self) -> Any:
        store = self.__dict__.get("_deepwork_state_store")
        if store is None:
            store = self.__dict__["_deepwork_state_store"] = _SessionStateStore()
        return store


# One JSON-RPC message is one line; a hand-in with many output files can be long.
MAX_LINE_BYTES = 256 * 1024 * 1024

# A \ud800-\udfff escape: valid JSON text, but no Unicode scalar value, so pydantic's JSON
# parser (unlike Python's json) refuses the whole line.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


def is_pipe(fd: int) -> bool:
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


class _PipeWriter:
    """stdout as the async text file the SDK's writer would use."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self._writer = writer

    async def write(self, text: str) -> None:
        self._writer.write(text.encode("utf-8"))

    async def flush(self) -> None:
        await self._writer.drain()


@asynccontextmanager
async def _event_loop_stdio() -> AsyncIterator[tuple[asyncio.StreamReader, _PipeWriter]]:
    """stdin and stdout read and written by the event loop itself.

    The MCP SDK's stdio transport hands every read, write and flush to a worker thread: three
    thread round trips per tool call, on top of the one to the database thread. Waking a thread
    costs little on an idle machine and a scheduler time slice on a busy one, so on pipes (how
    every MCP client starts a server) the event loop watches the descriptors instead. Like the
    SDK, it moves the protocol onto private descriptors: fd 0 reads the null device and fd 1
    goes to stderr, so a stray print or a child process can never corrupt the stream.
    """
    loop = asyncio.get_running_loop()
    wire_in, wire_out = os.dup(0), os.dup(1)
    saved_in, saved_out = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)
    read_transport = write_transport = None
    try:
        reader = asyncio.StreamReader(limit=MAX_LINE_BYTES)
        read_transport, _ = await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(wire_in, "rb", buffering=0)
        )
        write_transport, protocol = await loop.connect_write_pipe(
            asyncio.streams.FlowControlMixin, os.fdopen(wire_out, "wb", buffering=0)
        )
        # flush() then waits until the kernel has every byte, as the SDK's flush does.
        write_transport.set_write_buffer_limits(high=0)
        writer = asyncio.StreamWriter(write_transport, protocol, None, loop)
        yield reader, _PipeWriter(writer)
    finally:
        for transport in (read_transport, write_transport):
            if transport is not None:
                transport.close()
        # The loop made the pipes non-blocking; whoever else holds them expects them blocking.
        for fd in (saved_in, saved_out):
            with suppress(OSError):
                os.set_blocking(fd, True)
        os.dup2(saved_in, 0)
        os.dup2(saved_out, 1)
        os.close(saved_in)
        os.close(saved_out)


def refusal(line: str, error: Exception) -> Any | None:
    """The JSON-RPC error answering an undecodable line, or None when it names no request.

    Python's json reads what pydantic's parser refuses (lone surrogates), so the id of a
    request is found even when its parameters cannot be decoded.
    """
    from mcp_types import INVALID_REQUEST, ErrorData, JSONRPCError

    try:
        message = json.loads(line)
    except ValueError:
        return None
    if not isinstance(message, dict) or "method" not in message:
        return None
    request_id = message.get("id")
    if isinstance(request_id, bool) or not isinstance(request_id, int | str):
        return None
    if _SURROGATE_ESCAPE.search(line):
        reason = (
            "a string holds a lone UTF-16 surrogate escape (\\ud800-\\udfff), which is not "
            "valid Unicode; send the text as UTF-8 or as a surrogate pair"
        )
    else:
        reason = _request_error(error)
    return JSONRPCError(
        jsonrpc="2.0",
        id=request_id,
        error=ErrorData(code=INVALID_REQUEST, message=f"Invalid request: {reason}"),
    )


def _request_error(error: Exception) -> str:
    """What is wrong with a line read as a request, in a few words, e.g. "params: Input
    should be an object"."""
    errors = getattr(error, "errors", None)
    if not callable(errors):
        return str(error)
    found = errors()
    # The line has an id and a method, so it meant to be a request: report that reading.
    mine = [e for e in found if e["loc"][:1] == ("JSONRPCRequest",)] or found
    first = mine[0]
    where = ".".join(str(part) for part in first["loc"][1:] if part != "JSONRPCRequest")
    return f"{where}: {first['msg']}" if where else str(first["msg"])


@asynccontextmanager
async def _message_streams(
    reader: asyncio.StreamReader, stdout: _PipeWriter
) -> AsyncIterator[tuple[Any, Any]]:
    """The SDK's ``stdio_server`` streams over our pipes, decoding each line here."""
    from mcp.shared._context_streams import create_context_streams
    from mcp.shared.message import SessionMessage
    from mcp_types import jsonrpc_message_adapter

    read_writer, read_stream = create_context_streams[SessionMessage | Exception](0)
    write_stream, write_reader = create_context_streams[SessionMessage](0)

    async def read_lines() -> None:
        async with read_writer:
            while raw := await reader.readline():
                line = raw.decode("utf-8", errors="replace")
                try:
                    message = jsonrpc_message_adapter.validate_json(line, by_name=False)
                except Exception as exc:
                    answer = refusal(line, exc)
                    if answer is None:
                        logger.warning("Ignored an undecodable message: %.200s", line.strip())
                        await read_writer.send(exc)
                    else:
                        logger.warning("Refused request %r: %s", answer.id, answer.error.message)
                        await write_stream.send(SessionMessage(answer))
                    continue
                await read_writer.send(SessionMessage(message))

    async def write_lines() -> None:
        async with write_reader:
            async for session_message in write_reader:
                text = session_message.message.model_dump_json(by_alias=True, exclude_unset=True)
                await stdout.write(text + "\n")
                await stdout.flush()

    async with anyio.create_task_group() as group:
        group.start_soon(read_lines)
        group.start_soon(write_lines)
        yield read_stream, write_stream


async def _serve_stdio(mcp: FastMCP) -> None:
    from fastmcp.server.context import reset_transport, set_transport

    # What FastMCP's own run_stdio_async does, with the loop-driven streams.
    token = set_transport("stdio")
    try:
        async with (
            mcp._lifespan_manager(),
            _event_loop_stdio() as (stdin, stdout),
            _message_streams(stdin, stdout) as (read_stream, write_stream),
        ):
            await mcp._mcp_server.run(
                read_stream, write_stream, mcp._mcp_server.create_initialization_options()
            )
    finally:
        reset_transport(token)


async def _serve_sdk_stdio(mcp: FastMCP) -> None:
    await mcp.run_stdio_async(show_banner=False)


async def _on_database_thread(
    serve: Callable[[FastMCP], Any], mcp: FastMCP, executor: Executor | None
) -> None:
    """``serve(mcp)`` with the tools' database calls on ``executor``'s one thread."""
    if executor is None:
        await serve(mcp)
        return
    from asgiref.sync import ThreadSensitiveContext

    # Both: our calls go to the thread directly, anything else through asgiref to the same one.
    with database_thread_for(executor):
        async with ThreadSensitiveContext(executor=executor):
            await serve(mcp)


def _loop_options() -> dict[str, Any]:
    """uvloop where it is installed (``uvicorn[standard]`` brings it everywhere but Windows).

    A tool call is a dozen turns of the event loop (reading the line, the SDK's tasks and
    streams, the hop to the database thread and back, writing the answer); libuv's loop takes
    0.1-0.2 ms off each call beside asyncio's, measured in ``make bench``'s cycle.
    """
    return {"use_uvloop": importlib.util.find_spec("uvloop") is not None}


def run_stdio(mcp: FastMCP, database: Executor | None = None) -> None:
    """Serve on stdin/stdout; the tools' database calls on ``database`` (a one-thread
    executor) when given, else on asgiref's thread."""
    if sys.platform == "win32" or not (is_pipe(0) and is_pipe(1)):
        # A terminal or a file: the SDK's thread-based transport handles those.
        anyio.run(
            _on_database_thread, _serve_sdk_stdio, mcp, database, backend_options=_loop_options()
        )
        return
    anyio.run(_on_database_thread, _serve_stdio, mcp, database, backend_options=_loop_options())


def run_http(
    mcp: FastMCP, *, transport: str, host: str, port: int, allowed_hosts: list[str]
) -> None:
    """Serve over HTTP (or SSE) with Host and Origin checked on every request.

    Loopback names are always allowed; ``allowed_hosts`` adds the names and addresses clients
    use to reach a server bound elsewhere (``*`` patterns allowed). Any other Host is refused
    with 421, so a DNS-rebinding page cannot reach the server.
    """
    mcp.run(
        transport=transport,  # type: ignore[arg-type]
        host=host,
        port=port,
        show_banner=False,
        host_origin_protection=True,
        allowed_hosts=allowed_hosts or None,
    )


def client_connection(ctx: Any) -> Any | None:
    """The connection behind the request ``ctx`` serves, on the handshake protocol era only.

    Each request gets its own ``ServerSession`` wrapper; the connection underneath lives as
    long as the client is connected, so a list change can be pushed to it later
    (``await connection.send_tool_list_changed()``). A 2026-07-28 connection has no standing
    channel for that: None.
    """
    if ctx.request_context is None or ctx._is_modern_protocol():
        return None
    return getattr(ctx.session, "_connection", None)
