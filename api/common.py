"""What every router of the REST API shares: the largest id a path takes, the error answers
each kind of operation can give, and the look-up of a project the caller may see."""

from __future__ import annotations

from django.http import HttpRequest

from accounts.identity import identity_project_check
from api.auth import caller
from api.errors import ApiError
from api.schemas import ErrorOut
from workflows.models import Project
from workflows.selectors.catalog import project_get

MAX_ID = 2**63 - 1

READ_ERRORS = {400: ErrorOut, 401: ErrorOut, 403: ErrorOut, 404: ErrorOut}
# Only the actions read a body, so only they can be too large; only they write, so only they
# can find the database busy.
ACTION_ERRORS = {**READ_ERRORS, 409: ErrorOut, 413: ErrorOut, 503: ErrorOut}


def visible_project(request: HttpRequest, project_id: int) -> Project:
    """The project ``project_id``, if this request's identity may see it."""
    identity_project_check(caller(request), project_id)
    return project_get(project_id=project_id)


def served(project: Project) -> Project:
    """``project``, if the API acts on it: hosted, not removed. Its history stays readable
    either way; only what starts or moves work in it is refused."""
    refusal = project.served_refusal()
    if refusal is not None:
        raise ApiError(403, "not_served", refusal)
    return project


def served_project(request: HttpRequest, project_id: int) -> Project:
    """The project ``project_id``, if this request's identity may see it and the API acts on
    it (``served``)."""
    return served(visible_project(request, project_id))
