"""``manage.py mcpserve --path <project>``: serve the DeepWork toolset to an agent.

stdout carries the MCP protocol on the stdio transport: this command logs to stderr only.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import secrets
import stat
import sys
import threading
from contextlib import asynccontextmanager, suppress
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError
from django.db import close_old_connections, connection
from django.db.migrations.executor import MigrationExecutor

from workflows.files import project_makedirs
from workflows.services import agents as agent_services

logger = logging.getLogger("deepwork.mcpserve")

HEARTBEAT_SECONDS = 20
TOKEN_ENV = "DEEPWORK_MCP_TOKEN"
AGENT_ID_ENV = "DEEPWORK_AGENT_ID"


def _migrate_if_needed() -> None:
    """Bring the database schema up to date so a fresh install just works."""
    executor = MigrationExecutor(connection)
    plan = executor.migration_plan(executor.loader.graph.leaf_nodes())
    if plan:
        from django.core.management import call_command

        logger.info("Applying %d database migrations", len(plan))
        call_command("migrate", interactive=False, verbosity=0)


def _heartbeat(state, stop: threading.Event) -> None:
    while not stop.wait(HEARTBEAT_SECONDS):
        agent = state._agent
        if agent is None:
            continue
        try:
            close_old_connections()
            if not agent_services.agent_heartbeat(agent=agent, holder=state.holder):
                logger.warning("Agent %s was taken over by another process", agent.agent_id)
        except Exception:
            logger.exception("Heartbeat failed")
        finally:
            close_old_connections()


# One JSON-RPC message is one line; a hand-in with many output files can be long.
MAX_LINE_BYTES = 256 * 1024 * 1024


def _is_pipe(fd: int) -> bool:
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


class _PipeLines:
    """stdin as the async iterator of text lines that ``mcp.server.stdio`` reads."""

    def __init__(self, reader: asyncio.StreamReader):
        self._reader = reader

    def __aiter__(self) -> _PipeLines:
        return self

    async def __anext__(self) -> str:
        line = await self._reader.readline()
        if not line:
            raise StopAsyncIteration
        return line.decode("utf-8", errors="replace")


class _PipeWriter:
    """stdout as the async text file that ``mcp.server.stdio`` writes and flushes."""

    def __init__(self, writer: asyncio.StreamWriter):
        self._writer = writer

    async def write(self, text: str) -> None:
        self._writer.write(text.encode("utf-8"))

    async def flush(self) -> None:
        await self._writer.drain()


@asynccontextmanager
async def _event_loop_stdio():
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
        yield _PipeLines(reader), _PipeWriter(writer)
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


async def _serve_stdio(mcp) -> None:
    from fastmcp.server.context import reset_transport, set_transport
    from mcp.server.stdio import stdio_server

    # What FastMCP's own run_stdio_async does, with the loop-driven streams.
    token = set_transport("stdio")
    try:
        async with (
            mcp._lifespan_manager(),
            _event_loop_stdio() as (stdin, stdout),
            stdio_server(stdin=stdin, stdout=stdout) as (read_stream, write_stream),
        ):
            await mcp._mcp_server.run(
                read_stream, write_stream, mcp._mcp_server.create_initialization_options()
            )
    finally:
        reset_transport(token)


def _run_stdio(mcp) -> None:
    if sys.platform == "win32" or not (_is_pipe(0) and _is_pipe(1)):
        # A terminal or a file: the SDK's thread-based transport handles those.
        mcp.run(transport="stdio", show_banner=False)
        return
    import anyio

    anyio.run(_serve_stdio, mcp)


class Command(BaseCommand):
    help = "Serve the DeepWork MCP tools for one project (stdio by default)."
    requires_system_checks: list[str] = []
    requires_migrations_checks = False

    def add_arguments(self, parser) -> None:
        parser.add_argument("--path", default=".", help="Project root (default: current folder)")
        parser.add_argument(
            "--no-quality-gate",
            action="store_true",
            help="Skip all quality reviews; steps advance as soon as their outputs check out",
        )
        parser.add_argument(
            "--transport", choices=["stdio", "sse", "http"], default="stdio", help="MCP transport"
        )
        parser.add_argument(
            "--host", default="127.0.0.1", help="Bind address for http/sse (default: loopback)"
        )
        parser.add_argument("--port", type=int, default=8000, help="Port for http/sse")
        parser.add_argument(
            "--external-runner",
            choices=["claude"],
            default=None,
            help="Review step outputs with this CLI instead of the agent's self-review",
        )
        parser.add_argument(
            "--external-runner-cmd",
            default=None,
            metavar="COMMAND",
            help="Review step outputs with any program: the prompt goes to its stdin, a JSON "
            "verdict comes back on stdout (overrides --external-runner)",
        )
        parser.add_argument(
            "--quality-gate-timeout",
            type=int,
            default=240,
            help="Seconds one external review may take, plus 30 s per file beyond five "
            "(default 240)",
        )
        parser.add_argument(
            "--quality-gate-max-attempts",
            type=int,
            default=3,
            help="Failed external reviews of one step before finished_step errors (default 3)",
        )
        parser.add_argument(
            "--platform", default=None, help="Platform name used to format review tasks"
        )
        parser.add_argument(
            "--agent-id",
            default=os.environ.get(AGENT_ID_ENV) or None,
            help=f"Serve as this agent identity (env {AGENT_ID_ENV}); by default a restarted "
            "server adopts the stack its predecessor left",
        )
        parser.add_argument(
            "--token",
            default=os.environ.get(TOKEN_ENV) or None,
            help=f"Bearer token required on http/sse (env {TOKEN_ENV}); generated if absent",
        )

    def handle(self, *args, **options) -> None:
        root = Path(options["path"]).expanduser()
        if not root.is_dir():
            raise CommandError(f"--path must be an existing directory: {options['path']}")
        root = root.resolve()
        if options["quality_gate_timeout"] < 1 or options["quality_gate_max_attempts"] < 1:
            raise CommandError(
                "--quality-gate-timeout and --quality-gate-max-attempts must be >= 1"
            )
        try:
            project_makedirs(root=root, relative=".deepwork/tmp")
        except OSError as exc:
            raise CommandError(f"Cannot create .deepwork/tmp in {root}: {exc}") from None
        _migrate_if_needed()

        from mcp_bridge.server import create_server

        transport = options["transport"]
        auth = None
        if transport != "stdio":
            from fastmcp.server.auth.providers.jwt import StaticTokenVerifier

            token = options["token"]
            if not token:
                token = secrets.token_urlsafe(32)
                logger.warning("No --token given; this server's bearer token is: %s", token)
            auth = StaticTokenVerifier(tokens={token: {"client_id": "deepwork", "scopes": []}})

        mcp = create_server(
            root,
            enable_quality_gate=not options["no_quality_gate"],
            external_runner=options["external_runner"],
            external_runner_cmd=options["external_runner_cmd"],
            quality_gate_timeout=options["quality_gate_timeout"],
            quality_gate_max_attempts=options["quality_gate_max_attempts"],
            platform=options["platform"],
            agent_id=options["agent_id"],
            auth=auth,
        )
        state = mcp.deepwork_state
        # Claim the agent before serving: the process that starts first adopts an orphaned
        # stack, not whichever process happens to receive its first tool call first.
        state.agent()
        stop = threading.Event()
        threading.Thread(target=_heartbeat, args=(state, stop), daemon=True).start()
        # The database thread used by the tools opens its own connection.
        connection.close()
        # manage.py kept the collector off during start-up; everything alive now lives for the
        # whole process, so freeze it out of future collections and turn collection back on.
        gc.freeze()
        gc.enable()
        try:
            if transport == "stdio":
                _run_stdio(mcp)
            else:
                mcp.run(
                    transport=transport,
                    host=options["host"],
                    port=options["port"],
                    show_banner=False,
                    host_origin_protection=True,
                )
        except KeyboardInterrupt:
            pass
        finally:
            stop.set()
            try:
                close_old_connections()
                state.release()
            except Exception:
                logger.exception("Could not release the agent")
