"""Projects over REST, at /api/projects: the projects a caller may see, their jobs, and adding
a folder on the server as a project."""

from __future__ import annotations

from typing import Annotated, Any

from django.http import HttpRequest
from ninja import Router, Status

# The functions, not ninja's ``Path``/``Query`` shortcuts: ``Annotated[int, Query(ge=1)]`` is
# what the shortcuts build at runtime, and the one spelling mypy also accepts.
from ninja.params.functions import Path, Query

from accounts.identity import ADD_PROJECT, identity_project_add_check
from api.auth import VIEW, TokenAuth, caller
from api.common import ACTION_ERRORS, MAX_ID, READ_ERRORS, visible_project
from api.schemas import CatalogOut, ProjectAddedOut, ProjectAddIn, ProjectOut, ProjectPage
from workflows.models import Project
from workflows.selectors.catalog import project_catalogs, project_get, project_page
from workflows.services.projects import project_add

router = Router()


@router.get("", response={200: ProjectPage, **READ_ERRORS}, tags=["projects"], auth=TokenAuth(VIEW))
def list_projects(
    request: HttpRequest,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
    offset: Annotated[int, Query(ge=0, le=10**9)] = 0,
) -> dict[str, Any]:
    """Projects by name, `limit` at a time from `offset`, with the total `count` (a token
    bound to a project lists that one)."""
    bound = caller(request).project_id
    if bound is not None:
        return {"items": [project_get(project_id=bound)][offset : offset + limit], "count": 1}
    items, count = project_page(limit=limit, offset=offset)
    return {"items": items, "count": count}


@router.post(
    "",
    response={200: ProjectAddedOut, 201: ProjectAddedOut, **ACTION_ERRORS},
    tags=["projects"],
    auth=TokenAuth(ADD_PROJECT),
)
def add_project(request: HttpRequest, body: ProjectAddIn) -> Status[dict[str, Any]]:
    """Serve a folder on the server as a project: 201 with its id, or 200 with the project
    that already serves it. A folder that is not there (yet) or that the server cannot read
    is added anyway, with a warning saying so: a server may mount it later. Needs
    `workflows.add_project` and a person's token (not an MCP agent's)."""
    identity_project_add_check(caller(request))
    added = project_add(root_path=body.root_path)
    project = added.project
    return Status(
        201 if added.created else 200,
        {
            "id": project.pk,
            "name": project.name,
            "root_path": project.root_path,
            "created_at": project.created_at,
            "created": added.created,
            "folder_found": added.folder_found,
            "warnings": list(added.warnings),
        },
    )


@router.get(
    "/{project_id}",
    response={200: ProjectOut, **READ_ERRORS},
    tags=["projects"],
    auth=TokenAuth(VIEW),
)
def get_project(request: HttpRequest, project_id: Annotated[int, Path(ge=1, le=MAX_ID)]) -> Project:
    """One project."""
    return visible_project(request, project_id)


@router.get(
    "/{project_id}/jobs",
    response={200: CatalogOut, **READ_ERRORS},
    tags=["projects"],
    auth=TokenAuth(VIEW),
)
def list_jobs(
    request: HttpRequest, project_id: Annotated[int, Path(ge=1, le=MAX_ID)]
) -> dict[str, Any]:
    """The project's jobs (current revisions) with their workflows and steps, and the job
    folders that currently fail to load, as last synced from the project folder."""
    [catalog] = project_catalogs(projects=[visible_project(request, project_id)], with_steps=True)
    return {"jobs": catalog.jobs, "errors": catalog.errors}
