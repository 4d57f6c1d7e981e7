"""Reads of accounts (API tokens). Sessions, events and the catalog are read
through ``workflows.selectors`` and ``reviews.selectors``, as every interface reads them."""

from __future__ import annotations

from typing import TYPE_CHECKING

from accounts.models import ApiToken
from workflows.errors import InvalidInput, NotFound

if TYPE_CHECKING:
    from django.contrib.auth.models import User


def api_token_find(*, ref: str) -> ApiToken:
    """A token by id or by its whole visible prefix, as listed (for the management command).

    Never by a part of a prefix: an empty or short one would pick whatever single token
    happens to match, and revoking is what the command does with it.
    """
    tokens = ApiToken.objects.select_related("user")
    ref = ref.strip()
    if ref.isdigit() and len(ref) < 19:
        matches = list(tokens.filter(pk=int(ref)))
    else:
        prefix = ref.removesuffix("…")
        if not prefix:
            raise InvalidInput("Give the token's id or its whole prefix as listed")
        matches = list(tokens.filter(prefix=prefix)[:2])
    if not matches:
        raise NotFound(
            f"No API token has the id or prefix '{ref}'; give the id or the whole prefix "
            "as `deepwork-server token list` shows them"
        )
    if len(matches) > 1:
        # Prefixes carry 48 random bits: a clash is possible, if unlikely.
        raise NotFound(f"Several tokens have the prefix '{ref}'; give the id")
    return matches[0]


def api_token_list(*, username: str | None = None) -> list[ApiToken]:
    tokens = ApiToken.objects.select_related("user").order_by("user__username", "created_at")
    if username is not None:
        tokens = tokens.filter(user__username=username)
    return list(tokens)


def api_token_list_own(*, user: User) -> list[ApiToken]:
    """``user``'s live tokens, newest first, each with the project it is bound to (one query)."""
    return list(
        ApiToken.objects.select_related("mcp_project")
        .filter(user=user, revoked_at__isnull=True)
        .order_by("-created_at", "-pk")
    )


def api_token_own(*, user: User, token_id: int) -> ApiToken:
    """``user``'s own live token ``token_id``; ``NotFound`` for anyone else's, or a revoked one
    (the same answer, so another person's token ids are not told apart from missing ones)."""
    token = ApiToken.objects.filter(pk=token_id, user=user, revoked_at__isnull=True).first()
    if token is None:
        raise NotFound(f"You have no live API token with the id {token_id}")
    return token
