"""Bearer-token authentication with each operation's permission, checked before anything
else of the request is read. Who the token is, and what it may see and act as, is
``accounts.identity``'s to say; ``caller`` hands that identity to the operations.

An operation guarded by a decision's permission (``DECISIONS``) is a person's decision: its
``TokenAuth`` refuses an MCP agent's token before the operation runs, so a new decision route
gets the guard by naming its permission (``tests/architecture/test_decisions_by_people.py``
holds every route that records a person to it)."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from django.http import HttpRequest
from ninja.security import HttpBearer

from accounts.identity import (
    ADD_PROJECT,
    Identity,
    identity_authenticate,
    identity_person_required,
    identity_project_add_check,
    identity_via,
)
from api.errors import ApiError

VIEW = "workflows.view_workflowsession"
DRIVE = "workflows.drive_session"
ABORT = "workflows.abort_session"
DECIDE = "reviews.decide_review"
RESOLVE_BLOCKER = "tracker.resolve_blocker"
DECIDE_HUMAN_STEP = "dag.decide_human_step"
# The permissions of a person's decisions, each with the check that refuses an agent's token
# (and says what the decision is).
DECISIONS: dict[str, Callable[[Identity], object]] = {
    DECIDE: partial(identity_person_required, decision="ruling on a review"),
    ABORT: partial(identity_person_required, decision="aborting a session"),
    RESOLVE_BLOCKER: partial(identity_person_required, decision="answering a blocker"),
    DECIDE_HUMAN_STEP: partial(identity_person_required, decision="deciding a human step"),
    ADD_PROJECT: identity_project_add_check,
}


class TokenAuth(HttpBearer):
    """``Authorization: Bearer <token>``; the token's user becomes ``request.user`` and must
    hold ``permission`` (else 403, even when the rest of the request is malformed).

    With a decision's permission the token must also be a person's (else 403): ``agents``
    lets agents' tokens through an operation that also serves them, on their own work and
    recorded as theirs, and is named where it is given."""

    def __init__(self, permission: str, *, agents: bool = False):
        super().__init__()
        self.permission = permission
        self.decision = None if agents else DECISIONS.get(permission)

    def authenticate(self, request: HttpRequest, token: str) -> Identity | None:
        found = identity_authenticate(secret=token)
        if found is None:
            return None
        request.user = found.user
        if not found.user.has_perm(self.permission):
            raise ApiError(403, "forbidden", f"This needs the permission '{self.permission}'")
        if self.decision is not None:
            self.decision(found)
        return found


def caller(request: HttpRequest) -> Identity:
    """The identity ``TokenAuth`` authenticated this request as (ninja keeps it as
    ``request.auth``); never a request that skipped it."""
    identity = getattr(request, "auth", None)
    if not isinstance(identity, Identity):
        raise ApiError(401, "unauthorized", "This needs an API token")
    return identity


def via(request: HttpRequest) -> str:
    """The credential this request's person decides through, to record with the decision."""
    return identity_via(caller(request))
