"""Who a ``/mcp`` request acts as: its token's identity, the project, the agent and its roles.

Who a token is, which project it may use and which agents it may act as are decided by
``accounts.identity``, as for every interface; here only the request's headers are read, and
what does not change while agents work (projects, agent rows) is kept per process.
"""

from __future__ import annotations

import contextvars
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from accounts.identity import (
    DRIVE,
    identity_agent_id,
    identity_authenticate,
    identity_has_perm,
    identity_project_check,
    identity_still_authorised,
    token_agent_id,
)
from accounts.identity import Identity as TokenIdentity
from accounts.services import api_token_roles_clean
from dag import services as dag_services
from mcp_bridge.hosted.refusals import Refused
from mcp_bridge.toolsets import UnknownToolset, parse_toolsets
from workflows.errors import Forbidden, InvalidInput
from workflows.liveness import responsive_seconds
from workflows.models import Agent, Project
from workflows.selectors.catalog import project_ref_id, project_ref_not_found
from workflows.services import agents as agent_services

AGENT_CACHE_SIZE = 4096
# How often at most a hosted agent's heartbeat is written (``mcpserve`` heartbeats as often).
HEARTBEAT_SECONDS = 20.0


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


request_identity: contextvars.ContextVar[Identity | None] = contextvars.ContextVar(
    "deepwork_hosted_identity", default=None
)


def current_identity() -> Identity:
    identity = request_identity.get()
    if identity is None:
        raise RuntimeError("No hosted MCP request is being served in this context")
    return identity


def scoped_agent_id(identity: Identity, agent_id: str, *, acting: bool) -> str:
    """What a tool argument naming an agent means for the request's token (the one rule of
    ``accounts.identity``)."""
    return identity_agent_id(identity.who, agent_id, acting=acting)


# Served projects by id, with when each was read: a project's row does not change while agents
# work, but a person may remove it or stop hosting it, which counts within PROJECT_TTL seconds
# without a query per request. Only served ones are kept, so a project just hosted is served at
# once.
_projects: dict[int, tuple[float, Project]] = {}
PROJECT_TTL = 5.0


def _project_by_id(pk: int) -> Project | None:
    now = time.monotonic()
    kept = _projects.get(pk)
    if kept is not None and now - kept[0] <= PROJECT_TTL:
        return kept[1]
    project = Project.objects.filter(pk=pk).first()
    if project is not None and project.served_refusal() is None:
        _projects[pk] = (now, project)
    else:
        _projects.pop(pk, None)
    return project


def _served(project: Project) -> Project:
    refusal = project.served_refusal()
    if refusal is not None:
        raise Refused(403, "not_served", refusal)
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
        return _served(bound)
    if bound is not None and ref in (str(bound.pk), bound.root_path):
        return _served(bound)
    ref_id = project_ref_id(ref)
    found = (
        _project_by_id(ref_id)
        if ref_id is not None
        else Project.objects.filter(root_path=ref).first()
    )
    if bound is not None:
        # Refused before "unknown": a bound token learns nothing about other projects.
        raise Refused(
            403,
            "forbidden",
            f"This token may use only project {bound.pk} ({bound.root_path}), not {ref[:200]!r}",
        )
    if found is None:
        raise Refused(404, "not_found", project_ref_not_found(ref))
    try:
        identity_project_check(who, found.pk)
    except Forbidden as exc:
        raise Refused(403, "forbidden", str(exc)) from None
    return _served(found)


# Agents never change identity; the row is found once per process, not on every request.
_agents: OrderedDict[tuple[int, str], Agent] = OrderedDict()


_agents_lock = threading.Lock()


def hosted_agent(project: Project, agent_id: str) -> Agent:
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
            "(deepwork-server token create --user U --mcp, or tick MCP in the admin)",
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
        agent = hosted_agent(project, token_agent_id(token, sub_agent))
    except InvalidInput as exc:
        message = str(exc).replace("A sub-agent name", "X-Deepwork-Agent", 1)
        raise Refused(400, "invalid_agent", message) from None
    _keep_alive(project, agent, wanted, toolsets)
    return Identity(who=who, project=project, toolsets=toolsets, agent=agent)


def still_authorised(token_id: int) -> bool:
    """Whether the token may still use MCP: live, MCP allowed, its user active and allowed."""
    return identity_still_authorised(token_id=token_id, permission=DRIVE)
