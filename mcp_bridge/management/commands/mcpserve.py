"""``manage.py mcpserve --path <project>``: serve MCP toolsets to an agent.

stdout carries the MCP protocol on the stdio transport: this command logs to stderr only.

The entry points run this command before ``django.setup()`` (``deepwork_site.cli``): a stdio
server of the deepwork toolset answers ``tools/list`` first and loads Django on its database
thread meanwhile (``mcp_bridge.startup``), so this module imports nothing that needs the app
registry.
"""

from __future__ import annotations

import gc
import logging
import os
import secrets
import signal
import threading
from argparse import ArgumentParser
from functools import partial
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError
from django.db import close_old_connections, connection

from deepwork_site.process import server_version
from mcp_bridge import startup
from mcp_bridge.dbthread import DatabaseThread
from mcp_bridge.migrate import migrate_if_needed
from mcp_bridge.state import ServerState
from mcp_bridge.toolsets import (
    DEFAULT_TOOLSETS,
    ToolsetsRefused,
    UnknownToolset,
    check_combination,
    parse_toolsets,
    plan_mounts,
)
from mcp_bridge.toolsets.deepwork import DEFAULT_GENERATION, GENERATIONS
from reviews.gate import REVIEW_TIMEOUT_SECONDS
from workflows.errors import InvalidInput, WorkflowError
from workflows.files import project_makedirs
from workflows.roots import project_root_check

logger = logging.getLogger("deepwork.mcpserve")

HEARTBEAT_SECONDS = 20
TOKEN_ENV = "DEEPWORK_MCP_TOKEN"
AGENT_ID_ENV = "DEEPWORK_AGENT_ID"
ALLOWED_HOSTS_ENV = "DEEPWORK_MCP_ALLOWED_HOSTS"
WORKFLOW_SOURCE_ENV = "DEEPWORK_WORKFLOW_SOURCE"
WORKFLOW_SOURCE_TOKEN_ENV = "DEEPWORK_WORKFLOW_SOURCE_TOKEN"
TELEMETRY_ENV = "FASTMCP_TELEMETRY_MODE"


def heartbeat_seconds() -> float:
    """How often a server renews its agent's lease: three times per lease, so one late beat
    on a loaded machine does not cost the agent its DAG steps."""
    from workflows.liveness import process_lease_seconds

    return min(HEARTBEAT_SECONDS, process_lease_seconds() / 3)


def _heartbeat(
    state: ServerState,
    stop: threading.Event,
    dispatch: bool = False,
    database: DatabaseThread | None = None,
) -> None:
    """Renew the server's agent's lease until ``stop``; its database work on ``database`` (the
    stdio server's one database thread), else on this thread's own connection."""
    while not stop.wait(heartbeat_seconds()):
        agent = state.claimed_agent()
        if agent is None:
            continue
        try:
            if database is None:
                _beat_on_own_connection(state, agent, dispatch)
            else:
                database.call(partial(_beat, state, agent, dispatch))
        except Exception:
            logger.exception("Heartbeat failed")


def _beat(state: ServerState, agent: Any, dispatch: bool) -> None:
    from workflows.liveness import process_lease_seconds

    # Serving the agents toolset (``dispatch``): waiting DAG steps may fit this agent, and
    # steps of agents whose lease ran out are handed on.
    if dispatch:
        from dag.services import dag_agent_renew

        renewed = dag_agent_renew(
            agent=agent, lease_seconds=process_lease_seconds(), holder=state.holder
        )
    else:
        from workflows.services.agents import agent_heartbeat

        renewed = agent_heartbeat(
            agent=agent, lease_seconds=process_lease_seconds(), holder=state.holder
        )
    if renewed is None:
        logger.warning("Agent %s was taken over by another process", agent.agent_id)


def _beat_on_own_connection(state: ServerState, agent: Any, dispatch: bool) -> None:
    try:
        close_old_connections()
        _beat(state, agent, dispatch)
    finally:
        close_old_connections()


def _join_agents(state: ServerState, agent_id: str, roles: str | None) -> None:
    """Register this server's agent for DAG steps (with ``--roles``, exactly those roles) and
    hand it any step already waiting for it."""
    from dag import services as dag
    from workflows.errors import WorkflowError
    from workflows.liveness import process_lease_seconds

    project = state.project()
    try:
        names = None if roles is None else [r.strip() for r in roles.split(",") if r.strip()]
        dag.dag_agent_register(
            project=project,
            agent_id=agent_id,
            roles=names,
            lease_seconds=process_lease_seconds(),
            dispatch=True,
        )
    except WorkflowError as exc:
        raise CommandError(f"--roles: {exc.message}") from None


def _collect_from_now_on() -> None:
    """The entry point (``deepwork_site.cli``) kept the garbage collector off during start-up;
    everything alive once the server has started lives for the whole process, so freeze it
    out of future collections and turn collection back on."""
    gc.freeze()
    gc.enable()


def _stop_on_sigterm() -> None:
    """Make SIGTERM end the server the way closing stdin or Ctrl-C does, through the shutdown
    that releases its agent and hands on its DAG steps (by default the process would just
    vanish, leaving the agent responsive until its lease ran out)."""

    def stop(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)


def _env_hosts() -> list[str]:
    value = os.environ.get(ALLOWED_HOSTS_ENV, "")
    return [host.strip() for host in value.split(",") if host.strip()]


class Command(BaseCommand):
    help = "Serve MCP toolsets (DeepWork's by default) for one project (stdio by default)."
    requires_system_checks: list[str] = []
    requires_migrations_checks = False

    def get_version(self) -> str:
        # --version names the server a user installed, not the Django it runs on.
        return f"deepwork-server {server_version()}"

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("--path", default=".", help="Project root (default: current folder)")
        parser.add_argument(
            "--toolsets",
            default=",".join(DEFAULT_TOOLSETS),
            metavar="NAMES",
            help="Comma list of toolsets to serve: deepwork (the workflow tools and the review "
            "tools, as DeepWork 0.9.1 serves them) or deepreview (the review tools only), "
            "tracker, workflow-tools (one tool per published workflow, with the deepwork tools "
            "that carry a started workflow on), agents (multi-agent DAG workflows). "
            "Default: deepwork",
        )
        parser.add_argument(
            "--generation",
            choices=GENERATIONS,
            default=DEFAULT_GENERATION,
            help="DeepWork tool generation of the deepwork toolset: 0.9 (DeepWork 0.9.1's "
            "tools exactly), 0.14 (DeepWork 0.14's tools exactly) or both (the union; each "
            "session answers in the generation it was started in). Default: both",
        )
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
            "--allowed-host",
            action="append",
            default=None,
            metavar="HOST",
            help="For http/sse: a Host header value clients may use besides loopback names, e.g. "
            "the machine's address or name when binding --host 0.0.0.0 (repeatable; '*' "
            f"patterns allowed; env {ALLOWED_HOSTS_ENV}, comma list). Requests naming any other "
            "host are refused with 421 (DNS-rebinding protection)",
        )
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
            default=REVIEW_TIMEOUT_SECONDS,
            help="Seconds one external review may take, plus 30 s per file beyond five "
            f"(default {REVIEW_TIMEOUT_SECONDS})",
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
            "--workflow-source",
            action="append",
            default=None,
            metavar="URL",
            help="workflow-tools: also serve the published workflows listed at URL (another "
            "deepwork-server's /api/projects/<id>/published-workflows, or any list of the same "
            f"shape; repeatable; env {WORKFLOW_SOURCE_ENV})",
        )
        parser.add_argument(
            "--workflow-source-token",
            default=os.environ.get(WORKFLOW_SOURCE_TOKEN_ENV) or None,
            metavar="TOKEN",
            help=f"Bearer token for --workflow-source (env {WORKFLOW_SOURCE_TOKEN_ENV})",
        )
        parser.add_argument(
            "--roles",
            default=None,
            metavar="ROLES",
            help="With --toolsets agents: comma list of roles this agent takes DAG workflow "
            "steps for, e.g. swe,qa; replaces the agent's registered roles",
        )
        parser.add_argument(
            "--token",
            default=os.environ.get(TOKEN_ENV) or None,
            help=f"Bearer token required on http/sse (env {TOKEN_ENV}); generated if absent",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        root = Path(options["path"]).expanduser()
        if not root.is_dir():
            raise CommandError(f"--path must be an existing directory: {options['path']}")
        root = root.resolve()
        try:
            warnings = project_root_check(root)
        except InvalidInput as exc:
            raise CommandError(f"--path {options['path']}: {exc}") from None
        for warning in warnings:
            self.stderr.write(f"Warning: {warning}")
        if options["quality_gate_timeout"] < 1 or options["quality_gate_max_attempts"] < 1:
            raise CommandError(
                "--quality-gate-timeout and --quality-gate-max-attempts must be >= 1"
            )
        try:
            toolsets = parse_toolsets(options["toolsets"])
            check_combination(toolsets, options["generation"])
        except (UnknownToolset, ToolsetsRefused) as exc:
            raise CommandError(f"--toolsets: {exc}") from None
        source_urls = options["workflow_source"] or [
            url for url in [os.environ.get(WORKFLOW_SOURCE_ENV, "").strip()] if url
        ]
        if source_urls and "workflow-tools" not in toolsets:
            raise CommandError("--workflow-source needs the workflow-tools toolset (--toolsets)")
        for url in source_urls:
            if not url.startswith(("http://", "https://")):
                raise CommandError(f"--workflow-source must be an http(s) URL: {url}")
        from mcp_bridge.toolsets.specs import SourceConfig

        workflow_sources = [
            SourceConfig(url, options["workflow_source_token"]) for url in source_urls
        ]
        if options["roles"] is not None and "agents" not in toolsets:
            raise CommandError("--roles needs --toolsets agents (DAG workflow steps)")
        try:
            project_makedirs(root=root, relative=".deepwork/tmp")
        except OSError as exc:
            raise CommandError(f"Cannot create .deepwork/tmp in {root}: {exc}") from None
        transport = options["transport"]
        # Django first, unless the tools can be listed before it (``mcp_bridge.startup``).
        django_first = startup.needs_django_first(
            toolsets=toolsets, generation=options["generation"], transport=transport
        )
        if django_first:
            startup.django_setup()
        else:
            startup.configure_logging()
        # On stdio, one thread does all the process's database work (one connection), from
        # the migration check on; an http/sse server keeps asgiref's thread for its tools.
        database = DatabaseThread() if transport == "stdio" else None

        def prepare_database() -> None:
            migrate_if_needed()
            if database is not None:
                from workflows.services import step_changes

                # The step-files worker's queries too.
                step_changes.use_database_thread(database)

        if database is None:
            prepare_database()
        elif django_first:
            database.call(prepare_database)

        from mcp_bridge.server import create_server

        if TELEMETRY_ENV not in os.environ:
            # FastMCP opens OpenTelemetry spans around every request: no-ops without an SDK,
            # but not free. Its "off" mode still builds each span's attributes and opens two
            # no-op spans a call; "propagation_only" opens none (it only carries a caller's
            # trace context on, if the request names one): 0.05-0.2 ms a call in make bench's
            # cycle. Nothing here exports traces; FASTMCP_TELEMETRY_MODE=native turns them on.
            import fastmcp

            fastmcp.settings.telemetry_mode = "propagation_only"
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
            toolsets=toolsets,
            workflow_sources=workflow_sources,
            generation=options["generation"],
        )
        state: ServerState = mcp.deepwork_state  # type: ignore[attr-defined]

        def claim() -> None:
            # Claim the agent before serving: the process that starts first adopts an
            # orphaned stack, not whichever process happens to receive its first tool call.
            try:
                agent = state.agent()
            except WorkflowError as exc:  # a removed project is served nowhere
                raise CommandError(str(exc)) from None
            if "agents" in toolsets:
                _join_agents(state, agent.agent_id, options["roles"])

        if database is None:
            claim()
            # The database thread used by the tools opens its own connection.
            connection.close()
        elif django_first:
            database.call(claim)
            connection.close()  # in case building the server read anything on this thread
        else:
            engine = [
                name for mount in plan_mounts(toolsets) for name in mount.toolset.engine_modules
            ]

            def start() -> None:
                try:
                    startup.django_setup()
                    prepare_database()
                    claim()
                    startup.load_modules(engine)
                finally:
                    _collect_from_now_on()

            mcp.add_middleware(
                startup.StartupGate(mcp, start=start, submit=database.executor.submit)
            )
        stop = threading.Event()
        threading.Thread(
            target=_heartbeat,
            args=(state, stop, "agents" in toolsets, database),
            daemon=True,
        ).start()
        if django_first:
            _collect_from_now_on()
        from mcp_bridge import runner

        _stop_on_sigterm()
        try:
            if database is not None:
                runner.run_stdio(mcp, database.executor)
            else:
                allowed_hosts = [*_env_hosts(), *(options["allowed_host"] or [])]
                if options["host"] not in ("127.0.0.1", "localhost", "::1") and not allowed_hosts:
                    logger.warning(
                        "Listening on %s, but only requests addressed to localhost are served; "
                        "name the address or host name clients use with --allowed-host",
                        options["host"],
                    )
                runner.run_http(
                    mcp,
                    transport=transport,
                    host=options["host"],
                    port=options["port"],
                    allowed_hosts=allowed_hosts,
                )
        except KeyboardInterrupt:
            pass
        finally:
            # Shutting down already: a SIGTERM now must not cut the release short.
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            stop.set()
            # Gone, not silent: the agent's DAG steps go to others now, not when its lease ends.
            release = partial(state.release, dispatch="agents" in toolsets)
            try:
                if database is None:
                    close_old_connections()
                    release()
                else:
                    database.call(release)
            except Exception:
                logger.exception("Could not release the agent")
