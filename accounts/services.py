"""Writes of accounts: API tokens, and people made from the command line."""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Iterable, Sequence
from datetime import timedelta
from typing import TYPE_CHECKING

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import IntegrityError, transaction
from django.utils import timezone

from accounts.models import ApiToken
from dag.services import MAX_ROLES
from workflows import limits
from workflows.errors import InvalidInput

if TYPE_CHECKING:
    from django.contrib.auth.models import User

    from workflows.models import Project

TOKEN_SCHEME = "dwk_"
PREFIX_LENGTH = len(TOKEN_SCHEME) + 8
# ``last_used_at`` is written at most this often per token: a busy client would otherwise
# turn every read into a write (and, on SQLite, queue behind every agent's transition).
LAST_USED_RESOLUTION = timedelta(minutes=1)


def _hash(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8", "surrogatepass")).hexdigest()


def _may_act_for(person: User | None, user_id: int) -> bool:
    # A token carries all of its user's permissions: minting or revoking one for somebody else
    # is acting as them, which only a superuser may do.
    return person is None or person.is_superuser or person.pk == user_id


def api_token_create(
    *,
    user: User,
    name: str,
    by: User | None = None,
    mcp: bool = False,
    mcp_project: Project | None = None,
    mcp_roles: Sequence[str] = (),
) -> tuple[ApiToken, str]:
    """Make a token for ``user``; returns it with its secret, which is never stored or shown
    again. ``by``, the person asking (None: the server's operator, e.g. the command
    line), must be ``user`` or a superuser. ``mcp`` lets the token connect to ``/mcp`` as an
    agent, bound to ``mcp_project`` when given, with the roles ``mcp_roles``."""
    if not _may_act_for(by, user.pk):
        raise PermissionDenied("Only a superuser may make a token for another user")
    name = name.strip()
    if not name:
        raise InvalidInput("A token name must be 1 to 100 characters")
    limits.TOKEN_NAME.check("The token name", name)
    if not user.is_active:
        raise InvalidInput(f"User '{user.get_username()}' is inactive")
    if mcp_project is not None and not mcp:
        raise InvalidInput("A project binds a token's MCP use: allow MCP to give it one")
    roles = api_token_roles_clean(mcp_roles)
    if roles and not mcp:
        raise InvalidInput("Roles are those of a token's MCP agent: allow MCP to give it some")
    secret = TOKEN_SCHEME + secrets.token_urlsafe(32)
    try:
        with transaction.atomic():
            token = ApiToken.objects.create(
                user=user,
                name=name,
                prefix=secret[:PREFIX_LENGTH],
                key_hash=_hash(secret),
                mcp=mcp,
                mcp_project=mcp_project,
                mcp_roles=roles,
            )
    except IntegrityError:
        raise InvalidInput(
            f"User '{user.get_username()}' already has a live token named '{name}'"
        ) from None
    return token, secret


def api_token_roles_clean(roles: Iterable[object]) -> list[str]:
    """Role names as given (stripped, each once), or ``InvalidInput`` naming the rule: what
    ``register_agent`` of the agents toolset accepts."""
    clean: list[str] = []
    for role in roles:
        if not isinstance(role, str) or not role.strip() or len(role.strip()) > 128:
            raise InvalidInput(f"Roles are names of 1 to 128 characters; got {role!r:.80}")
        if role.strip() not in clean:
            clean.append(role.strip())
    if len(clean) > MAX_ROLES:
        raise InvalidInput(f"{len(clean)} roles; at most {MAX_ROLES} are allowed")
    return clean


def api_token_revoke(*, token: ApiToken, by: User | None = None) -> bool:
    """Revoke ``token`` at once; False if it was already revoked. ``by`` as in
    ``api_token_create``."""
    if not _may_act_for(by, token.user_id):
        raise PermissionDenied("Only a superuser may revoke another user's token")
    now = timezone.now()
    revoked = ApiToken.objects.filter(pk=token.pk, revoked_at__isnull=True).update(revoked_at=now)
    if revoked:
        token.revoked_at = now
    return bool(revoked)


def api_token_authenticate(*, secret: str) -> ApiToken | None:
    """The live token of an active user that ``secret`` belongs to, else None.

    Looked up by the secret's hash (an indexed equality), so no secret is compared in Python
    and none is kept in the database.
    """
    if not secret.startswith(TOKEN_SCHEME) or len(secret) > 128:
        return None
    token = (
        ApiToken.objects.select_related("user")
        .filter(key_hash=_hash(secret), revoked_at__isnull=True)
        .first()
    )
    if token is None or not token.user.is_active:
        return None
    now = timezone.now()
    if token.last_used_at is None or now - token.last_used_at >= LAST_USED_RESOLUTION:
        ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
        token.last_used_at = now
    return token


def user_create(*, username: str, group: str) -> User:
    """Make an active user named ``username`` in the existing ``group``, with no password: a
    token acts for it at once, and it logs in only once someone sets one (changepassword)."""
    user_model = get_user_model()
    user = user_model(username=username)
    try:
        user.full_clean(exclude=["password"])
    except ValidationError as exc:
        raise InvalidInput(f"Username {username!r}: {' '.join(exc.messages)}") from None
    found = Group.objects.filter(name=group).first()
    if found is None:
        raise InvalidInput(f"No group named '{group}': migrate the database first")
    user.set_unusable_password()
    try:
        with transaction.atomic():
            user.save()
            user.groups.add(found)
    except IntegrityError:
        raise InvalidInput(f"A user named '{username}' already exists") from None
    return user
