"""Hosted MCP: ``/mcp`` of the web server, where every API token allowed MCP is an agent.

An agent anywhere adds one URL and one token to its MCP configuration. Each request passes,
in order: FastMCP's Host/Origin guard (the one ``mcpserve --transport http`` uses, fed with
``ALLOWED_HOSTS``), the MCP SDK's request body limit, the bearer token (``ApiToken`` with
``mcp`` set, its user allowed to drive sessions), the project (the token's own, or named by
the request), then the FastMCP app of that project and toolsets.

Why stateless: every worker (and machine) behind the same database serves any request. The
MCP SDK's stateless streamable HTTP keeps nothing between requests (no session ids, no
streams to resume), so a handshake-era client's next call may land on another worker; the
2026-07-28 era is sessionless anyway. Everything an agent's calls share (its stack) is in the
database, found through the token.

Per process, one FastMCP server per (project, toolsets) is built on first use and kept; its
tools act through a ``HostedState`` whose agent is the one of the request being served (a
context variable set here, copied by asyncio into the tool's task and by asgiref into the
database thread the request was given, one of a small pool per process).

A request stays authorised only as long as its token: while a request is open (a long tool
call, a stream), the token is checked again every ``DEEPWORK_MCP_RECHECK_SECONDS``; a token
revoked meanwhile ends the request with an error naming the revocation.
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import logging
import os
import threading
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import anyio
from asgiref.sync import ThreadSensitiveContext
from django.conf import settings
from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from accounts.identity import (
    DRIVE,
    identity_agent_id,
    identity_authenticate,
    identity_has_perm,
    identity_project_check,
    identity_session_check,
    identity_still_authorised,
    token_agent_id,
)
from accounts.identity import Identity as TokenIdentity
from accounts.services import api_token_roles_clean
from dag import services as dag_services

# MCP_PATH: where /mcp is mounted, defined once beside the client configurations that name it.
from deepwork_site.connect import MCP_PATH
from deepwork_site.origin import origin_matches_host
from mcp_bridge.state import ServerConfig, ServerState
from mcp_bridge.toolsets import UnknownToolset, parse_toolsets
from reviews.services import REVIEW_TIMEOUT_SECONDS
from workflows.db import DatabaseBusy, db_sync_to_async, retrying_when_busy
from workflows.errors import Forbidden, InvalidInput
from workflows.liveness import responsive_seconds
from workflows.models import Agent, Project
from workflows.outputs import outputs_checked_for_remote_caller
from workflows.selectors.sessions import session_agent_id
from workflows.services import agents as agent_services
from workflows.services.catalog import Catalog

logger = logging.getLogger("deepwork.mcp.hosted")
# Stateless serving opens and closes a transport per request; the SDK logs each at INFO.
logging.getLogger("mcp.server.streamable_http").setLevel(logging.WARNING)

PROJECT_HEADER = "x-deepwork-project"
TOOLSETS_HEADER = "x-deepwork-toolsets"
AGENT_HEADER = "x-deepwork-agent"
ROLES_HEADER = "x-deepwork-roles"
# The SDK refuses larger bodies with 413; a cut-off request's id is read from at most this.
MAX_BODY_KEPT = 4 * 1024 * 1024
AGENT_CACHE_SIZE = 4096
# How often at most a hosted agent's heartbeat is written (``mcpserve`` heartbeats as often).
HEARTBEAT_SECONDS = 20.0


def _setting(name: str, default: str) -> str:
    """A Django setting if defined, else the environment variable of the same name."""
    value = getattr(settings, name, None)
    if value is None:
        value = os.environ.get(name) or default
    return str(value)


@dataclass(frozen=True)
class HostedConfig:
    """How ``/mcp`` serves: read once per process from settings or the environment."""

    toolsets: tuple[str, ...]
    allowed_hosts: tuple[str, ...]
    allowed_origins: tuple[str, ...]
    recheck_seconds: float
    external_runner: str | None
    external_runner_cmd: str | None
    quality_gate_timeout: int

    @classmethod
    def from_settings(cls) -> HostedConfig:
        return cls(
            toolsets=parse_toolsets(_setting("DEEPWORK_MCP_TOOLSETS", "deepwork")),
            allowed_hosts=tuple(_hosts_of(settings.ALLOWED_HOSTS)),
            allowed_origins=tuple(getattr(settings, "CSRF_TRUSTED_ORIGINS", ())),
            recheck_seconds=float(_setting("DEEPWORK_MCP_RECHECK_SECONDS", "5")),
            external_runner=_setting("DEEPWORK_MCP_EXTERNAL_RUNNER", "") or None,
            external_runner_cmd=_setting("DEEPWORK_MCP_EXTERNAL_RUNNER_CMD", "") or None,
            quality_gate_timeout=int(
                _setting("DEEPWORK_MCP_QUALITY_GATE_TIMEOUT", str(REVIEW_TIMEOUT_SECONDS))
            ),
        )


def _hosts_of(django_hosts: list[str]) -> list[str]:
    """Django's ``ALLOWED_HOSTS`` as the guard's patterns: ``.example.com`` is the domain and
    every name under it; ``*`` allows any host."""
    hosts: list[str] = []
    for host in django_hosts:
        if host.startswith("."):
            hosts += [host[1:], f"*{host}"]
        else:
            hosts.append(host)
    return hosts


# --- Identity -------------------------------------------------------------------------------
# Who a token is, which project it may use and which agents it may act as are decided by
# ``accounts.identity``, as for every interface; here only the request's headers are read.


@dataclass
class Identity:
    """Who one request acts as: the token's identity, its project and toolsets, and its
    agent."""

    who: TokenIdentity
    project: Project
    toolsets: tuple[str, ...]
    agent: Agent
    # The caller's stack as the last answer showed it, for the call log.
    last_stack: list[Any] = field(default_factory=list)

    @property
    def token_id(self) -> int:
        token_id = self.who.token_id
        assert token_id is not None  # /mcp serves tokens only
        return token_id

    @property
    def token_agent_id(self) -> str:
        """The token's own agent id; its sub-agents are ``<token_agent_id>/<name>``."""
        agent_id = self.who.agent_id
        assert agent_id is not None  # /mcp serves MCP tokens only
        return agent_id


_identity: contextvars.ContextVar[Identity | None] = contextvars.ContextVar(
    "deepwork_hosted_identity", default=None
)


def current_identity() -> Identity:
    identity = _identity.get()
    if identity is None:
        raise RuntimeError("No hosted MCP request is being served in this context")
    return identity


class Refused(Exception):
    """A request ``/mcp`` will not serve: its HTTP status, a short code and plain words."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


# DeepWork 0.14's stack ids are at most this long (``sessions014.stack_id_clean``).
MAX_CONVERSATION_ID = 100


def scoped_agent_id(identity: Identity, agent_id: str, *, acting: bool) -> str:
    """What a tool argument naming an agent means for the request's token (the one rule of
    ``accounts.identity``)."""
    return identity_agent_id(identity.who, agent_id, acting=acting)


# Projects by id: their rows do not change while agents work (the folder is checked anyway).
_projects: dict[int, Project] = {}


def _project_by_id(pk: int) -> Project | None:
    project = _projects.get(pk)
    if project is None:
        project = Project.objects.filter(pk=pk).first()
        if project is not None:
            _projects[pk] = project
    return project


def _project(who: TokenIdentity, ref: str | None) -> Project:
    bound = _project_by_id(who.project_id) if who.project_id else None
    if not ref:
        if bound is None:
            raise Refused(
                400,
                "project_required",
                "Name the project: add ?project=<id> to the URL or send the header "
                "X-Deepwork-Project with its id or root path (this token is not bound to one)",
            )
        return bound
    if bound is not None and ref in (str(bound.pk), bound.root_path):
        return bound
    found = (
        _project_by_id(int(ref)) if ref.isdigit() else Project.objects.filter(root_path=ref).first()
    )
    if bound is not None:
        # Refused before "unknown": a bound token learns nothing about other projects.
        raise Refused(
            403,
            "forbidden",
            f"This token may use only project {bound.pk} ({bound.root_path}), not {ref[:200]!r}",
        )
    if found is None:
        raise Refused(404, "not_found", f"No project {ref[:200]!r} (give its id or root path)")
    try:
        identity_project_check(who, found.pk)
    except Forbidden as exc:
        raise Refused(403, "forbidden", str(exc)) from None
    return found


# Agents never change identity; the row is found once per process, not on every request.
_agents: OrderedDict[tuple[int, str], Agent] = OrderedDict()


_agents_lock = threading.Lock()


def _agent(project: Project, agent_id: str) -> Agent:
    key = (project.pk, agent_id)
    agent = _agents.get(key)
    if agent is None:
        agent = agent_services.agent_ensure(project=project, agent_id=agent_id)
        with _agents_lock:
            _agents[key] = agent
            if len(_agents) > AGENT_CACHE_SIZE:
                _agents.popitem(last=False)
    return agent


# A hosted agent is alive while it makes requests: per agent, when this process last wrote its
# heartbeat and which roles it gave it. The heartbeat is written at most once per interval
# (as often as ``mcpserve`` heartbeats), so a busy agent costs no write per request.
_alive: dict[int, tuple[float, tuple[str, ...] | None]] = {}


def heartbeat_seconds() -> float:
    return min(HEARTBEAT_SECONDS, responsive_seconds() / 3)


def _keep_alive(
    project: Project, agent: Agent, roles: list[str] | None, toolsets: tuple[str, ...]
) -> None:
    """Renew ``agent``'s lease (throttled) and give it ``roles`` when they changed, as
    ``mcpserve --agent-id --roles`` does for its agent; with the agents toolset, hand out the
    DAG steps that may fit it now.

    Only its requests renew a hosted agent, and it may work on a step for minutes between two,
    so its lease is the long one (``responsive_seconds``); it has no clean exit to announce.
    """
    now = time.monotonic()
    last = _alive.get(agent.pk)
    wanted = tuple(roles) if roles else None
    dispatch = "agents" in toolsets
    if wanted is not None and (last is None or last[1] != wanted):
        dag_services.dag_agent_register(
            project=project,
            agent_id=agent.agent_id,
            roles=list(wanted),
            lease_seconds=responsive_seconds(),
            dispatch=dispatch,
        )
    elif last is None or now - last[0] >= heartbeat_seconds():
        renew = dag_services.dag_agent_renew if dispatch else agent_services.agent_heartbeat
        renew(agent=agent, lease_seconds=responsive_seconds())
    else:
        return
    _alive[agent.pk] = (now, wanted)


def _roles(token_roles: list[str], header: str | None) -> list[str] | None:
    """The roles a request gives its agent: the header's if sent, else the token's."""
    if header is None:
        return list(token_roles or []) or None
    try:
        return api_token_roles_clean(r for r in header.split(",") if r.strip()) or None
    except InvalidInput as exc:
        raise Refused(400, "invalid_roles", f"X-Deepwork-Roles: {exc}") from None


def identify(
    *,
    secret: str | None,
    project_ref: str | None,
    toolsets_ref: str | None,
    sub_agent: str | None,
    default_toolsets: tuple[str, ...],
    roles: str | None = None,
) -> Identity:
    """The identity a request's headers name, or ``Refused`` saying why there is none."""
    if not secret:
        raise Refused(401, "unauthorized", "Send Authorization: Bearer <API token>")
    who = identity_authenticate(secret=secret)
    if who is None or who.token is None:
        raise Refused(
            401, "unauthorized", "The token is unknown or revoked, or its user is inactive"
        )
    token = who.token
    if not who.is_agent:
        raise Refused(
            403,
            "forbidden",
            f"Token {token.prefix}… may not use MCP; make one that may "
            "(manage.py api_token create --mcp, or tick MCP in the admin)",
        )
    if not identity_has_perm(who, DRIVE):
        raise Refused(403, "forbidden", f"This needs the permission '{DRIVE}'")
    try:
        toolsets = parse_toolsets(toolsets_ref) if toolsets_ref else default_toolsets
    except UnknownToolset as exc:
        raise Refused(400, "unknown_toolset", str(exc)) from None
    project = _project(who, project_ref)
    wanted = _roles(token.mcp_roles, roles)
    try:
        agent = _agent(project, token_agent_id(token, sub_agent))
    except InvalidInput as exc:
        message = str(exc).replace("A sub-agent name", "X-Deepwork-Agent", 1)
        raise Refused(400, "invalid_agent", message) from None
    _keep_alive(project, agent, wanted, toolsets)
    return Identity(who=who, project=project, toolsets=toolsets, agent=agent)


def still_authorised(token_id: int) -> bool:
    """Whether the token may still use MCP: live, MCP allowed, its user active and allowed."""
    return identity_still_authorised(token_id=token_id, permission=DRIVE)


# --- The state the tools see ----------------------------------------------------------------


class HostedState(ServerState):
    """A server's state for one project, whose agent is the one of the request in hand."""

    def __init__(self, config: ServerConfig, project: Project) -> None:
        super().__init__(config)
        self._hosted_project = project
        self._hosted_catalog = Catalog(project, generation=config.generation)

    def project(self) -> Project:
        return self._hosted_project

    def catalog(self) -> Catalog:
        return self._hosted_catalog

    def agent(self) -> Agent:
        return current_identity().agent

    def sub_agent(self, name: str) -> Agent:
        """The agent ``name`` under the request's token, with its own stack; created on first
        use."""
        identity = current_identity()
        return _agent(identity.project, self.acting_agent_id(name))

    def acting_agent_id(self, agent_id: str) -> str:
        return scoped_agent_id(current_identity(), agent_id, acting=True)

    def target_agent_id(self, agent_id: str) -> str:
        return scoped_agent_id(current_identity(), agent_id, acting=False)

    def session_check(self, session_id: str | None) -> None:
        # A session named by id is acted on as its agent: one token never moves another's.
        if session_id is None:
            return
        agent_id = session_agent_id(project=self._hosted_project, session_id=session_id)
        if agent_id is not None:
            identity_session_check(
                current_identity().who, project_id=self._hosted_project.pk, agent_id=agent_id
            )

    def conversation_scope(self) -> str:
        return f"token-{current_identity().token_id}:"

    def conversation_id(self, session_id: str) -> str:
        scope = self.conversation_scope()
        if len(scope) + len(session_id) > MAX_CONVERSATION_ID:
            raise InvalidInput(
                f"Over /mcp a session_id may be at most {MAX_CONVERSATION_ID - len(scope)} "
                f"characters (it is kept as {scope}<session_id>); got {len(session_id)}"
            )
        return scope + session_id

    def session_id_shown(self, conversation_id: str) -> str:
        return conversation_id.removeprefix(self.conversation_scope())

    def claimed_agent(self) -> Agent | None:
        # No process holds a hosted agent: it is whoever presents the token.
        return None

    def ready(self) -> bool:
        return True

    def release(self, *, dispatch: bool = False) -> None:
        pass

    @property
    def last_stack(self) -> list[Any]:
        identity = _identity.get()
        return identity.last_stack if identity is not None else []

    @last_stack.setter
    def last_stack(self, stack: list[Any]) -> None:
        identity = _identity.get()
        if identity is not None:
            identity.last_stack = stack


def _build_state(project: Project, config: HostedConfig) -> HostedState:
    root = Path(project.root_path)
    if not root.is_dir():
        raise Refused(
            409,
            "project_unavailable",
            f"Project folder {project.root_path} is not on this server; its agents connect "
            "to a server where it is",
        )
    return HostedState(
        ServerConfig(
            project_root=root,
            external_runner=config.external_runner,
            external_runner_cmd=config.external_runner_cmd,
            quality_gate_timeout=config.quality_gate_timeout,
        ),
        project,
    )


# --- One FastMCP app per (project, toolsets), started on first use ----------------------------


class _ToolSchemas:
    """The input schemas a server's ``tools/list`` advertises, by tool name, for the SDK's
    check of a 2026-07-28 call's ``Mcp-Param-*`` headers. Without them the SDK lists every
    tool (and renders every schema) on each call; here they are listed again only when older
    than ``TOOL_SCHEMAS_SECONDS``, so a tool added at run time (``refresh_workflow_tools``)
    is checked from then on (before, the SDK skips the check, as for any tool it cannot find).
    """

    def __init__(self, mcp: Any) -> None:
        self._mcp = mcp
        self._by_name: dict[str, Any] = {}
        self._listed_at: float | None = None

    def get(self, name: str) -> Any:
        return self._by_name.get(name)

    async def fresh(self) -> None:
        now = time.monotonic()
        if self._listed_at is not None and now - self._listed_at < TOOL_SCHEMAS_SECONDS:
            return
        self._listed_at = now
        self._by_name = {tool.name: tool.parameters for tool in await self._mcp.list_tools()}


TOOL_SCHEMAS_SECONDS = 10.0


class _Servers:
    """This process's FastMCP apps. Each app's lifespan (the SDK's session manager) runs in a
    task of its own, started on first use and stopped by ``shutdown``: a lifespan must end in
    the task it began in."""

    def __init__(self) -> None:
        self._apps: dict[tuple[int, tuple[str, ...]], ASGIApp] = {}
        self._schemas: dict[tuple[int, tuple[str, ...]], _ToolSchemas] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self._lock: asyncio.Lock | None = None
        self._stop: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def _for_this_loop(self) -> None:
        loop = asyncio.get_running_loop()
        if self._loop is not loop:
            self._apps, self._tasks = {}, []
            self._lock, self._stop, self._loop = asyncio.Lock(), asyncio.Event(), loop

    async def app_for(self, identity: Identity, config: HostedConfig) -> ASGIApp:
        self._for_this_loop()
        key = (identity.project.pk, identity.toolsets)
        app = self._apps.get(key)
        if app is not None:
            await self._schemas[key].fresh()
            return app
        assert self._lock is not None
        async with self._lock:
            app = self._apps.get(key)
            if app is None:
                app, schemas = await self._start(identity, config)
                await schemas.fresh()
                self._apps[key], self._schemas[key] = app, schemas
        return app

    async def _start(
        self, identity: Identity, config: HostedConfig
    ) -> tuple[ASGIApp, _ToolSchemas]:
        from mcp_bridge.server import server_for_state

        state = await db_sync_to_async(_build_state)(identity.project, config)
        mcp = server_for_state(state, toolsets=identity.toolsets)
        schemas = _ToolSchemas(mcp)
        mcp._mcp_server.get_tool_input_schema = schemas.get
        # The guard runs in front of the token check (HostedMcp), so the app needs none.
        app = mcp.http_app(path=MCP_PATH, stateless_http=True, host_origin_protection=False)
        ready = asyncio.Event()
        assert self._stop is not None
        stop = self._stop

        async def run() -> None:
            async with app.router.lifespan_context(app):
                ready.set()
                await stop.wait()

        # A fresh context: the lifespan must not carry the identity of the request starting it.
        task = asyncio.get_running_loop().create_task(run(), context=contextvars.Context())
        self._tasks.append(task)
        waiting = asyncio.ensure_future(ready.wait())
        await asyncio.wait({task, waiting}, return_when=asyncio.FIRST_COMPLETED)
        if not ready.is_set():
            waiting.cancel()
            task.result()  # raises what the lifespan raised
        logger.info(
            "Serving /mcp for project %s with toolsets %s in worker %d",
            identity.project.pk,
            ",".join(identity.toolsets),
            os.getpid(),
        )
        return app, schemas

    async def shutdown(self) -> None:
        if self._loop is not asyncio.get_running_loop() or self._stop is None:
            return
        self._stop.set()
        tasks, self._tasks, self._apps = self._tasks, [], {}
        await asyncio.gather(*tasks, return_exceptions=True)
        self._loop = None


_servers = _Servers()


async def shutdown() -> None:
    """Stop this process's MCP apps (ASGI lifespan shutdown)."""
    await _servers.shutdown()


# --- Database threads --------------------------------------------------------------------------


class _DatabaseThreads:
    """The threads that run this process's MCP database work, each with its own connection.

    Django code called from async code runs on one thread per "thread-sensitive context"; left
    alone, every request of a worker would queue for a single thread. Each request here gets
    the least busy of ``DEEPWORK_MCP_DB_THREADS`` long-lived threads (default 16 on PostgreSQL;
    1 on SQLite, which takes one writer at a time anyway).
    """

    def __init__(self) -> None:
        self._executors: list[ThreadPoolExecutor] = []
        self._busy: list[int] = []

    def _start(self) -> None:
        default = "1" if settings.DATABASES["default"]["ENGINE"].endswith("sqlite3") else "16"
        count = max(1, int(_setting("DEEPWORK_MCP_DB_THREADS", default)))
        self._executors = [
            ThreadPoolExecutor(max_workers=1, thread_name_prefix="deepwork-mcp-db")
            for _ in range(count)
        ]
        self._busy = [0] * count

    @asynccontextmanager
    async def one(self) -> AsyncIterator[None]:
        if not self._executors:
            self._start()
        chosen = min(range(len(self._busy)), key=self._busy.__getitem__)
        self._busy[chosen] += 1
        try:
            async with ThreadSensitiveContext(executor=self._executors[chosen]):
                yield
        finally:
            self._busy[chosen] -= 1


_database_threads = _DatabaseThreads()


# --- The ASGI app of /mcp ---------------------------------------------------------------------


def _json_rpc_error(message: str, request_id: Any = None, code: int = -32600) -> bytes:
    body = {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}
    return json.dumps(body).encode()


async def _refuse(send: Send, refusal: Refused) -> None:
    headers = [(b"content-type", b"application/json")]
    if refusal.status == 401:
        headers.append((b"www-authenticate", b'Bearer error="invalid_token"'))
    await send({"type": "http.response.start", "status": refusal.status, "headers": headers})
    await send({"type": "http.response.body", "body": _json_rpc_error(refusal.message)})


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
        await _refuse(send, Refused(401, "unauthorized", REVOKED))
        return
    if streaming:
        error = _json_rpc_error(REVOKED, _request_id(bytes(body)), code=-32001)
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
                await _refuse(
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
        async with _database_threads.one():
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
            app = await _servers.app_for(identity, config)
        except Refused as refusal:
            await _refuse(send, refusal)
            return
        except DatabaseBusy:
            await _refuse(send, Refused(503, "database_busy", "The database is busy; retry"))
            return
        reset = _identity.set(identity)
        try:
            with outputs_checked_for_remote_caller():
                await _serve_while_authorised(
                    app, identity, config.recheck_seconds, scope, receive, send
                )
        finally:
            _identity.reset(reset)


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
