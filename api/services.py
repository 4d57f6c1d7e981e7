"""Writes of the API layer: tokens, and the catalog a REST start reads."""

from __future__ import annotations

import hashlib
import secrets
import threading
from datetime import timedelta
from pathlib import Path

from django.core.exceptions import PermissionDenied
from django.db import IntegrityError, transaction
from django.utils import timezone

from api.errors import ApiError
from api.models import ApiToken
from workflows.errors import InvalidInput
from workflows.models import Project
from workflows.services.catalog import Catalog, CatalogView

TOKEN_SCHEME = "dwk_"
PREFIX_LENGTH = len(TOKEN_SCHEME) + 8
# ``last_used_at`` is written at most this often per token: a busy client would otherwise
# turn every read into a write (and, on SQLite, queue behind every agent's transition).
LAST_USED_RESOLUTION = timedelta(minutes=1)


def _hash(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8", "surrogatepass")).hexdigest()


def _may_act_for(person, user_id: int) -> bool:
    # A token carries all of its user's permissions: minting or revoking one for somebody else
    # is acting as them, which only a superuser may do.
    return person is None or person.is_superuser or person.pk == user_id


def api_token_create(*, user, name: str, made_by=None) -> tuple[ApiToken, str]:
    """Make a token for ``user``; returns it with its secret, which is never stored or shown
    again. ``made_by``, the person asking (None: the server's operator, e.g. the command
    line), must be ``user`` or a superuser."""
    if not _may_act_for(made_by, user.pk):
        raise PermissionDenied("Only a superuser may make a token for another user")
    name = name.strip()
    if not name or len(name) > 100:
        raise InvalidInput("A token name must be 1 to 100 characters")
    if not user.is_active:
        raise InvalidInput(f"User '{user.get_username()}' is inactive")
    secret = TOKEN_SCHEME + secrets.token_urlsafe(32)
    try:
        with transaction.atomic():
            token = ApiToken.objects.create(
                user=user, name=name, prefix=secret[:PREFIX_LENGTH], key_hash=_hash(secret)
            )
    except IntegrityError:
        raise InvalidInput(
            f"User '{user.get_username()}' already has a live token named '{name}'"
        ) from None
    return token, secret


def api_token_revoke(*, token: ApiToken, revoked_by=None) -> bool:
    """Revoke ``token`` at once; False if it was already revoked. ``revoked_by`` as
    ``made_by`` of ``api_token_create``."""
    if not _may_act_for(revoked_by, token.user_id):
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


# One Catalog per project and folder: it remembers the last scan, so an unchanged folder costs
# a directory listing and no query.
_catalogs: dict[tuple[int, str], Catalog] = {}
_catalogs_lock = threading.Lock()


def project_catalog_view(*, project: Project) -> CatalogView:
    """The project's job catalog as ``start_workflow`` sees it: rescanned, synced on change.

    Syncing reads the project's folder, so the folder has to be on this server: a web server
    elsewhere would otherwise mark every job of the project gone.
    """
    if not Path(project.root_path).is_dir():
        raise ApiError(
            409,
            "project_unavailable",
            f"Project folder {project.root_path} is not on this server; workflows of this "
            "project can only be started where its folder is",
        )
    with _catalogs_lock:
        key = (project.pk, project.root_path)
        catalog = _catalogs.get(key)
        if catalog is None:
            catalog = _catalogs[key] = Catalog(project)
    return catalog.view()
