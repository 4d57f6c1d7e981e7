"""Projects over REST, at /api/projects: the projects a caller may see, their jobs, adding (or
hosting) a folder on the server as a project, and removing one."""

from __future__ import annotations

from typing import Annotated, Any

from django.http import HttpRequest
from ninja import Router, Status

# The functions, not ninja's ``Path``/``Query`` shortcuts: ``Annotated[int, Query(ge=1)]`` is
# what the shortcuts build at runtime, and the one spelling mypy also accepts.
from ninja.params.functions import Path, Query

from accounts.identity import ADD_PROJECT
from api.auth import VIEW, TokenAuth, caller
from api.common import ACTION_ERRORS, MAX_ID, READ_ERRORS, visible_project
from api.schemas import CatalogOut, ErrorOut, ProjectAddedOut, ProjectAddIn, ProjectOut, ProjectPage
from workflows.models import Project
from workflows.selectors.catalog import project_catalogs, project_get, project_page
from workflows.services.projects import project_add, project_remove

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
    """Serve a folder on the server as a hosted project: 201 with its id, or 200 with the
    project that already has the folder, now hosted (one a local stdio server registered) or
    back (a removed one). A folder the server cannot read (yet) is added anyway, with one
    warning whatever is at the path: a server may mount it later. `/`, the server's data
    folder and its user's home folder (or a folder holding one) are refused. Needs
    `workflows.add_project` and a person's token (not an MCP agent's: ``TokenAuth`` refuses
    it)."""
    added = project_add(root_path=body.root_path)
    return Status(
        201 if added.created else 200,
        {
            **_project_out(added.project),
            "created": added.created,
            "folder_found": added.folder_found,
            "warnings": list(added.warnings),
        },
    )


def _project_out(project: Project) -> dict[str, Any]:
    return {field: getattr(project, field) for field in ProjectOut.model_fields}


@router.delete(
    "/{project_id}",
    # No body, so never too large; a write, so the database may be busy.
    response={200: ProjectOut, **READ_ERRORS, 503: ErrorOut},
    tags=["projects"],
    auth=TokenAuth(ADD_PROJECT),
)
def remove_project(
    request: HttpRequest, project_id: Annotated[int, Path(ge=1, le=MAX_ID)]
) -> Project:
    """Remove the project: served nowhere from now on (hosted /mcp, the API's actions, a
    local stdio server on its next start); its sessions and their history are kept,
    read-only. Adding its folder again brings it back. Removing a removed project changes
    nothing. Needs `workflows.add_project` and a person's token (not an MCP agent's)."""
    return project_remove(
        project=visible_project(request, project_id), by=caller(request).describe()
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
