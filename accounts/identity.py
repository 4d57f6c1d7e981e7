"""Who a request acts as, and what that identity may do: the one place REST, hosted ``/mcp``
and any later interface ask.

A token is one identity wherever it is used:

- **A token allowed MCP is an agent** (``token-<id>-<name>``). It acts only as itself and its
  sub-agents (``token-<id>-<name>/<name>``; a bare name *is* a sub-agent), and, when bound to a
  project, sees and acts on that project only. The same on ``/mcp`` and on the REST API.
- **Any other token is its person's key**: it acts as its user does, with no project
  binding, and may name agents freely, except that no token ever acts as another token's
  agent (that would hand the other token's next call a session it never started).
- **A person signed in** (the dashboard, the admin) keeps the permissions the person has.

Every token carries its user's permissions; the checks here add the token's own limits.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from django.utils.text import slugify

from workflows.errors import Forbidden, InvalidInput

if TYPE_CHECKING:
    from django.contrib.auth.models import User

    from accounts.models import ApiToken

DRIVE = "workflows.drive_session"
ADD_PROJECT = "workflows.add_project"
SUB_AGENT = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
# A token's agent id as ``token_agent_id`` makes it, with any sub-agent after a '/'.
TOKEN_AGENT = re.compile(r"token-(\d+)(?:-[a-z0-9_-]*)?(?:/.*)?", re.DOTALL)
# DeepWork 0.14 stacks kept per token over /mcp: ``dw14:token-<id>:<session_id>[/<agent>]``.
TOKEN_STACK = re.compile(r"dw14:token-(\d+):.*", re.DOTALL)
# What a request names an agent as when it names none, for a person's key.
PERSON_AGENT_PREFIX = "api:"


@dataclass(frozen=True)
class Identity:
    """One caller: a person, acting themselves or through one of their tokens."""

    user: User
    token: ApiToken | None = None

    @property
    def token_id(self) -> int | None:
        return self.token.pk if self.token is not None else None

    @property
    def is_agent(self) -> bool:
        """Whether this identity is an agent of its own (a token allowed MCP), rather than a
        person acting as any agent they name."""
        return self.token is not None and self.token.mcp

    @property
    def agent_id(self) -> str | None:
        """The identity's own agent id: a token agent's, else None (a person)."""
        return token_agent_id(self.token) if self.is_agent and self.token is not None else None

    @property
    def project_id(self) -> int | None:
        """The only project this identity may see and act on, or None: any."""
        return self.token.mcp_project_id if self.token is not None else None

    @property
    def person(self) -> User | None:
        """The person acting, where a person's say (with a permission) counts; None for a
        token agent, which acts as its agent only."""
        return None if self.is_agent else self.user

    def describe(self) -> str:
        if self.token is None:
            return f"user {self.user.get_username()!r}"
        return f"token {self.token.prefix}… ({self.token.name})"


def identity_of_person(*, user: User) -> Identity:
    """A person signed in: their own permissions, every project, acting as any agent they
    name (as the dashboard and the admin always have)."""
    return Identity(user=user)


def identity_authenticate(*, secret: str) -> Identity | None:
    """The identity a bearer secret stands for (a live token of an active user), else None."""
    from accounts.services import api_token_authenticate

    token = api_token_authenticate(secret=secret)
    return None if token is None else Identity(user=token.user, token=token)


# --- Permissions ----------------------------------------------------------------------------

# A person's permission, as last read: (when read, allowed). Read again after the TTL, so a
# withdrawn permission takes effect within seconds on every interface without a query per
# request for each check.
_permissions: dict[tuple[int, str], tuple[float, bool]] = {}
PERMISSION_TTL = 5.0


def identity_has_perm(identity: Identity, permission: str) -> bool:
    now = time.monotonic()
    key = (identity.user.pk, permission)
    found = _permissions.get(key)
    if found is None or now - found[0] > PERMISSION_TTL:
        found = (now, identity.user.has_perm(permission))
        _permissions[key] = found
    return found[1]


def identity_still_authorised(*, token_id: int, permission: str = DRIVE) -> bool:
    """Whether the token may still act as an agent: live, MCP allowed, its user active and
    holding ``permission``. Read fresh (no cache): it ends requests already running."""
    from accounts.models import ApiToken

    token = (
        ApiToken.objects.select_related("user")
        .filter(pk=token_id, revoked_at__isnull=True, mcp=True, user__is_active=True)
        .first()
    )
    return token is not None and token.user.has_perm(permission)


# --- Projects -------------------------------------------------------------------------------


def identity_may_see(identity: Identity, project_id: int) -> bool:
    return identity.project_id is None or identity.project_id == project_id


def identity_project_check(identity: Identity, project_id: int, what: str = "") -> None:
    """``Forbidden`` unless ``identity`` may see and act on project ``project_id``.

    403, not 404: the binding is a limit the token's own user chose, not a secret kept from
    them, and "this token may use only project 2" tells them at once what to fix.
    """
    if not identity_may_see(identity, project_id):
        thing = f"{what} is in project {project_id}" if what else f"not project {project_id}"
        raise Forbidden(
            f"{identity.describe()} may use only project {identity.project_id}; {thing}"
        )


def identity_project_scope(identity: Identity, project_id: int | None) -> int | None:
    """The project a list is limited to: the one asked for (checked), else the bound one."""
    if project_id is not None:
        identity_project_check(identity, project_id)
        return project_id
    return identity.project_id


def identity_project_add_check(identity: Identity) -> None:
    """``Forbidden`` unless ``identity`` may change which folders the server serves (add,
    host or remove a project): a person, signed in or through their own key, never a token
    agent.

    Which folders a server serves is a person's decision about the server, not an agent's
    about its work: a project's files become readable through its sessions, so an agent
    (a program acting on what it reads) must not widen them. A token bound to a project is
    always an agent, and adding a project would also step outside the one project its own
    user limited it to.
    """
    if identity.project_id is not None:
        raise Forbidden(
            f"{identity.describe()} may use only project {identity.project_id}; it cannot add "
            "or remove projects (use a token of yours without MCP, or the admin)"
        )
    identity_person_required(identity, "adding or removing a project", elsewhere="the admin")


# --- Decisions ------------------------------------------------------------------------------


def identity_person_required(
    identity: Identity, decision: str, *, elsewhere: str = "the dashboard"
) -> User:
    """The person making ``decision`` (e.g. "overriding a review"), or ``Forbidden`` for a
    token agent, naming where the person can make it instead (``elsewhere``).

    Overriding or sending back a review, aborting a session, answering a blocker, deciding a
    human step: each is a person's say over an agent's work, and what the agent is told next
    comes from it. A token allowed MCP is an agent (a program acting on what it reads), so
    its token never decides, even on its own work, and never in its person's name. A person's
    key without MCP is that person's own credential, as their signed-in session is.
    """
    if identity.person is None:
        raise Forbidden(
            f"{identity.describe()} is an MCP agent's token; {decision} is a person's "
            f"decision: use a token of yours without MCP, or {elsewhere}"
        )
    return identity.person


def identity_via(identity: Identity) -> str:
    """The credential a person's decision came through, recorded with it: their signed-in
    session, or which of their tokens."""
    if identity.token is None:
        return "signed in"
    return f"API token {identity.token.pk} ({identity.token.name})"


# --- Agents ---------------------------------------------------------------------------------


def token_agent_id(token: ApiToken, sub_agent: str | None = None) -> str:
    """The agent id of ``token`` (``token-<id>-<name>``: a new token never inherits an old
    one's stack), or of its sub-agent ``sub_agent`` (``token-<id>-<name>/<sub_agent>``);
    ``InvalidInput`` for a sub-agent name that breaks the rule."""
    base = f"token-{token.pk}"
    slug = slugify(token.name)[:32]
    if slug:
        base += f"-{slug}"
    if sub_agent is None:
        return base
    if not SUB_AGENT.fullmatch(sub_agent):
        raise InvalidInput(
            "A sub-agent name must be 1 to 64 letters, digits, '.', '_' or '-' and start with "
            f"a letter or digit; got {sub_agent[:80]!r}"
        )
    return f"{base}/{sub_agent}"


def agent_token_id(agent_id: str) -> int | None:
    """The id of the token whose agent (or 0.14 stack) ``agent_id`` is, or None."""
    found = TOKEN_AGENT.fullmatch(agent_id) or TOKEN_STACK.fullmatch(agent_id)
    return int(found[1]) if found is not None else None


def token_scoped_agent_id(*, token_id: int, own: str, agent_id: str, acting: bool) -> str:
    """What an argument naming an agent means for the token agent ``own`` (of token
    ``token_id``): itself, one of its sub-agents (a bare name is one), or, only where the
    caller names another agent rather than itself (``acting`` false), another token's agent
    by its full id. ``Forbidden`` for another token's agent (one token never registers,
    heartbeats, starts or reports as another's), ``InvalidInput`` for anything else."""
    mine = own + "/"
    if agent_id == own or (
        agent_id.startswith(mine) and SUB_AGENT.fullmatch(agent_id[len(mine) :])
    ):
        return agent_id
    found = TOKEN_AGENT.fullmatch(agent_id)
    if found is None and SUB_AGENT.fullmatch(agent_id):
        return mine + agent_id
    if found is not None and int(found[1]) != token_id:
        if not acting:
            return agent_id
        raise Forbidden(
            f"Agent {agent_id[:120]!r} belongs to another API token: this token acts "
            f"only as {own!r} or its sub-agents ({own}/<name>, or just <name>)"
        )
    raise InvalidInput(
        f"This token's agent ids are {own!r}, its sub-agents {own}/<name>, "
        "or just <name> (1 to 64 letters, digits, '.', '_' or '-', starting with a letter or "
        f"digit){'' if acting else ', or another token agent by its full id'}; "
        f"got {agent_id[:120]!r}"
    )


def identity_agent_id(identity: Identity, agent_id: str | None, *, acting: bool) -> str:
    """The agent an argument naming an agent stands for, for ``identity``; None (not given)
    is the identity's own agent when acting. A token agent is held to its own agents; a
    person's key names any agent but another token's when acting."""
    if identity.is_agent:
        assert identity.token is not None
        assert identity.agent_id is not None
        own = identity.agent_id
        if agent_id is None:
            return own
        return token_scoped_agent_id(
            token_id=identity.token.pk, own=own, agent_id=agent_id, acting=acting
        )
    if agent_id is None:
        return PERSON_AGENT_PREFIX + identity.user.get_username()
    if acting and identity.token is not None:
        owner = agent_token_id(agent_id)
        if owner is not None and owner != identity.token.pk:
            raise Forbidden(
                f"Agent {agent_id[:120]!r} belongs to another API token; {identity.describe()} "
                "may not act as it"
            )
    return agent_id


def identity_may_act_as(identity: Identity, agent_id: str) -> bool:
    """Whether ``identity`` may act through the existing agent ``agent_id`` (hand in its
    step, move its session)."""
    if identity.is_agent:
        return _own_agent(identity, agent_id)
    owner = agent_token_id(agent_id)
    return identity.token is None or owner is None or owner == identity.token_id


def _own_agent(identity: Identity, agent_id: str) -> bool:
    own = identity.agent_id
    if own is None:
        return False
    if agent_id == own or agent_id.startswith(own + "/"):
        return True
    # Its 0.14 stacks over /mcp: ``dw14:token-<id>:<session_id>[/<agent>]``.
    stack = TOKEN_STACK.fullmatch(agent_id)
    return stack is not None and int(stack[1]) == identity.token_id


def identity_session_check(identity: Identity, *, project_id: int, agent_id: str) -> None:
    """``Forbidden`` unless ``identity`` may act on a session of project ``project_id`` held
    by agent ``agent_id`` as that agent (finish its step, move it to another step)."""
    identity_project_check(identity, project_id, "the session")
    if not identity_may_act_as(identity, agent_id):
        who = (
            f"acts only as {identity.agent_id!r} and its sub-agents"
            if identity.is_agent
            else "may not act as another API token's agent"
        )
        raise Forbidden(f"The session is agent {agent_id[:120]!r}'s; {identity.describe()} {who}")
