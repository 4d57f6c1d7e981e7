"""Who may watch the live dashboard, checked when a socket opens and again while it stays open.

A socket outlives the request that authenticated it: the person may log out, have their
password changed, be deactivated or lose the permission while the socket streams on. The
re-check reads what an HTTP request would: the session row behind the socket's cookie, the
user through the backend that logged them in, and the permission.
"""

from __future__ import annotations

import enum
from importlib import import_module
from typing import Any

from django.conf import settings
from django.contrib.auth import (
    BACKEND_SESSION_KEY,
    HASH_SESSION_KEY,
    SESSION_KEY,
    get_user_model,
    load_backend,
)
from django.core.exceptions import ValidationError
from django.utils.crypto import constant_time_compare

WATCH_PERMISSION = "workflows.view_workflowsession"


class WatchRight(enum.Enum):
    GRANTED = "granted"
    # The login behind the socket is over: logged out, session expired or replaced, password
    # changed, account deactivated or deleted.
    LOGGED_OUT = "logged out"
    # Still logged in, but no longer allowed to watch.
    FORBIDDEN = "forbidden"


def may_watch(user: Any) -> bool:
    """Whether an already authenticated ``user`` holds the watch permission."""
    return user is not None and user.is_authenticated and user.has_perm(WATCH_PERMISSION)


def watch_right(*, session_key: str | None, user_id: Any) -> WatchRight:
    """Whether the login ``session_key`` still belongs to user ``user_id``, who may still watch.

    Reads the session (one query with the database engine), the user (one query) and, unless
    a superuser, their permissions (two). Writes nothing: unlike an HTTP request, a socket
    cannot hand the browser a new cookie, so a stale session is reported, not repaired.
    """
    if not session_key or user_id is None:
        return WatchRight.LOGGED_OUT
    data = import_module(settings.SESSION_ENGINE).SessionStore(session_key).load()
    try:
        stored_id = get_user_model()._meta.pk.to_python(data[SESSION_KEY])
        backend_path = data[BACKEND_SESSION_KEY]
    except (KeyError, ValueError, ValidationError):
        return WatchRight.LOGGED_OUT
    if stored_id != user_id or backend_path not in settings.AUTHENTICATION_BACKENDS:
        return WatchRight.LOGGED_OUT
    # The backend refuses inactive users, as it does for every request.
    user = load_backend(backend_path).get_user(user_id)
    if user is None:
        return WatchRight.LOGGED_OUT
    if hasattr(user, "get_session_auth_hash"):
        # The same check as at connect (channels.auth.get_user): a password change ends the
        # other logins.
        session_hash = data.get(HASH_SESSION_KEY)
        if not session_hash or not constant_time_compare(
            session_hash, user.get_session_auth_hash()
        ):
            return WatchRight.LOGGED_OUT
    return WatchRight.GRANTED if may_watch(user) else WatchRight.FORBIDDEN
