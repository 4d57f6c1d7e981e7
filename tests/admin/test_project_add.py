"""Adding a project in the admin: a page of its own that goes through ``project_add``, for
people with ``workflows.add_project`` only."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.test import Client
from django.urls import reverse

from tests.support.factories import make_user
from workflows.models import Project

pytestmark = pytest.mark.django_db

ADD_URL = reverse("admin:workflows_project_add")
LIST_URL = reverse("admin:workflows_project_changelist")


def client_of(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def admin_client_(db) -> Client:
    return client_of(make_user(username="root", superuser=True))


def test_the_list_offers_it_and_the_page_adds_through_the_service(admin_client_, tmp_path):
    assert ADD_URL in admin_client_.get(LIST_URL).content.decode()
    page = admin_client_.get(ADD_URL)
    assert page.status_code == 200
    assert 'name="root_path"' in page.content.decode()
    (tmp_path / "site").mkdir()
    response = admin_client_.post(ADD_URL, {"root_path": str(tmp_path / "site")}, follow=True)
    project = Project.objects.get()
    assert response.redirect_chain[-1][0] == reverse(
        "admin:workflows_project_change", args=[project.pk]
    )
    assert project.root_path == str(tmp_path / "site")
    shown = [str(m) for m in response.context["messages"]]
    assert shown == [f"Added project {project.pk} at {tmp_path / 'site'}"]


def test_a_missing_folder_is_added_with_the_warning(admin_client_, tmp_path: Path):
    response = admin_client_.post(ADD_URL, {"root_path": str(tmp_path / "later")}, follow=True)
    project = Project.objects.get()
    shown = [(m.level_tag, str(m)) for m in response.context["messages"]]
    assert shown[0] == ("success", f"Added project {project.pk} at {tmp_path / 'later'}")
    assert shown[1][0] == "warning"
    assert shown[1][1].startswith(f"The folder {tmp_path / 'later'} does not exist on this server")


def test_a_bad_path_shows_on_the_form_and_adds_nothing(admin_client_, tmp_path: Path):
    (tmp_path / "notes.md").write_text("x")
    for root_path, words in (
        ("relative", "root_path must be absolute"),
        (str(tmp_path / "notes.md"), "is a regular file on this server"),
    ):
        response = admin_client_.post(ADD_URL, {"root_path": root_path})
        assert response.status_code == 200
        assert words in response.content.decode()
    assert not Project.objects.exists()


def test_staff_without_the_permission_cannot_add(db, tmp_path: Path):
    staff = make_user(username="staff", staff=True, perms=("workflows.view_project",))
    client = client_of(staff)
    assert ADD_URL not in client.get(LIST_URL).content.decode()
    assert client.get(ADD_URL).status_code == 403
    assert client.post(ADD_URL, {"root_path": str(tmp_path)}).status_code == 403
    assert not Project.objects.exists()
    # Given it, the same person may.
    allowed = make_user(
        username="ops", staff=True, perms=("workflows.view_project", "workflows.add_project")
    )
    response = client_of(allowed).post(ADD_URL, {"root_path": str(tmp_path)})
    assert response.status_code == 302
    assert Project.objects.get().root_path == str(tmp_path)
