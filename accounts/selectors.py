"""Reads of accounts (API tokens). Sessions, events and the catalog are read
through ``workflows.selectors`` and ``reviews.selectors``, as every interface reads them."""

from __future__ import annotations

from accounts.models import ApiToken
from workflows.errors import InvalidInput, NotFound


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
