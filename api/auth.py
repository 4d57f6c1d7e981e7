"""Bearer-token authentication with each operation's permission, checked before anything
else of the request is read. Who the token is, and what it may see and act as, is
``accounts.identity``'s to say; ``caller`` hands that identity to the operations."""

from __future__ import annotations

from django.http import HttpRequest
from ninja.security import HttpBearer

from accounts.identity import Identity, identity_authenticate
from api.errors import ApiError

VIEW = "workflows.view_workflowsession"
DRIVE = "workflows.drive_session"
ABORT = "workflows.abort_session"
DECIDE = "reviews.decide_review"
RESOLVE_BLOCKER = "tracker.resolve_blocker"
DECIDE_HUMAN_STEP = "dag.decide_human_step"


class TokenAuth(HttpBearer):
    """``Authorization: Bearer <token>``; the token's user becomes ``request.user`` and must
    hold ``permission`` (else 403, even when the rest of the request is malformed)."""

    def __init__(self, permission: str):
        super().__init__()
        self.permission = permission

    def authenticate(self, request: HttpRequest, token: str) -> Identity | None:
        found = identity_authenticate(secret=token)
        if found is None:
            return None
        request.user = found.user
        if not found.user.has_perm(self.permission):
            raise ApiError(403, "forbidden", f"This needs the permission '{self.permission}'")
        return found


def caller(request: HttpRequest) -> Identity:
    """The identity ``TokenAuth`` authenticated this request as (ninja keeps it as
    ``request.auth``); never a request that skipped it."""
    identity = getattr(request, "auth", None)
    if not isinstance(identity, Identity):
        raise ApiError(401, "unauthorized", "This needs an API token")
    return identity
