"""Bearer-token authentication and permission checks for every operation."""

from __future__ import annotations

from django.http import HttpRequest
from ninja.security import HttpBearer

from api.errors import ApiError
from api.models import ApiToken
from api.services import api_token_authenticate

VIEW = "workflows.view_workflowsession"
DRIVE = "workflows.drive_session"
ABORT = "workflows.abort_session"
DECIDE = "reviews.decide_review"


class TokenAuth(HttpBearer):
    """``Authorization: Bearer <token>``; the token's user becomes ``request.user``."""

    def authenticate(self, request: HttpRequest, token: str) -> ApiToken | None:
        found = api_token_authenticate(secret=token)
        if found is not None:
            request.user = found.user
        return found


def require(request: HttpRequest, perm: str) -> None:
    """Refuse with 403 unless the caller's user holds ``perm``."""
    if not request.user.has_perm(perm):
        raise ApiError(403, "forbidden", f"This needs the permission '{perm}'")
