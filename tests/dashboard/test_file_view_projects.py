"""The dashboard's file view shows a session's output only from a served project: hosted (or,
to a person who may host it, one a local stdio server registered), never a removed one or one
whose folder no project may be."""

from __future__ import annotations

import html

import pytest
from django.conf import settings

from tests.dashboard.conftest import client_for
from tests.support.factories import make_user
from workflows.models import Project
from workflows.services.projects import project_remove

pytestmark = pytest.mark.django_db


@pytest.fixture
def sid(driver) -> str:
    session = driver.start()
    driver.finish({"notes.md": "notes.md"})
    return session.session_id


def view(client, sid: str):
    response = client.get(f"/sessions/{sid}/files/?path=notes.md")
    return response.status_code, html.unescape(response.content.decode())


def test_a_hosted_projects_output_is_shown(watching, sid):
    status, page = view(watching, sid)
    assert status == 200
    assert "is not hosted" not in page


def test_a_stdio_registered_projects_output_only_to_who_may_host_it(watching, sid, project):
    Project.objects.filter(pk=project.pk).update(hosted=False)
    status, page = view(watching, sid)
    assert status == 403
    assert f"Project {project.pk} ({project.root_path}) is not hosted" in page
    assert "Its files are not shown" in page
    host = make_user(username="ops", groups=("Watchers",), perms=("workflows.add_project",))
    assert view(client_for(host), sid)[0] == 200


def test_a_removed_projects_output_is_shown_to_nobody(watching, sid, project):
    project_remove(project=project, by="test")
    host = make_user(username="ops", groups=("Watchers",), perms=("workflows.add_project",))
    for client in (watching, client_for(host)):
        status, page = view(client, sid)
        assert status == 403
        assert "was removed from this server" in page
    # The session itself stays readable.
    assert watching.get(f"/sessions/{sid}/").status_code == 200


@pytest.mark.parametrize("root", ["/", "VAR_DIR"])
def test_a_project_row_at_a_folder_no_project_may_be_shows_nothing(watching, sid, project, root):
    # Rows written before the check, e.g. by a stdio server started in '/'.
    root = str(settings.VAR_DIR) if root == "VAR_DIR" else root
    Project.objects.filter(pk=project.pk).update(root_path=root)
    status, page = view(watching, sid)
    assert status == 403
    assert f"The folder of project {project.pk} is not one a project may be" in page
