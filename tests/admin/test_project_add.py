"""Adding a project in the admin: a page of its own that goes through ``project_add``, for
people with ``workflows.add_project`` only."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.conf import settings
from django.test import Client
from django.urls import reverse

from tests.support.factories import make_user
from workflows.models import Project
from workflows.services.projects import NOT_A_READABLE_FOLDER, project_ensure

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
    # One wording whatever is (or is not) at the path: the admin is a web page, not the
    # server's shell.
    assert shown[1:] == [("warning", NOT_A_READABLE_FOLDER)]
    (tmp_path / "notes.md").write_text("x")
    response = admin_client_.post(ADD_URL, {"root_path": str(tmp_path / "notes.md")}, follow=True)
    shown = [(m.level_tag, str(m)) for m in response.context["messages"]]
    assert shown[1:] == [("warning", NOT_A_READABLE_FOLDER)]


def test_a_bad_path_shows_on_the_form_and_adds_nothing(admin_client_, tmp_path: Path):
    for root_path, words in (
        ("relative", "root_path must be absolute"),
        ("/", "root_path is the file system&#x27;s root"),
        (str(settings.VAR_DIR), "a folder this server keeps to itself"),
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


def test_host_and_remove_actions(admin_client_, tmp_path: Path):
    (tmp_path / "site").mkdir()
    local = project_ensure(root_path=tmp_path / "site")
    page = admin_client_.get(LIST_URL).content.decode()
    assert 'value="host_projects"' in page
    assert 'value="remove_projects"' in page
    act = {"action": "host_projects", "_selected_action": [local.pk]}
    response = admin_client_.post(LIST_URL, act, follow=True)
    assert [str(m) for m in response.context["messages"]] == ["Hosted 1 project."]
    assert Project.objects.get(pk=local.pk).hosted
    act["action"] = "remove_projects"
    response = admin_client_.post(LIST_URL, act, follow=True)
    assert [str(m) for m in response.context["messages"]] == ["Removed 1 project."]
    removed = Project.objects.get(pk=local.pk)
    assert (removed.hosted, removed.removed_at is not None) == (False, True)
    # Hosting again brings it back.
    act["action"] = "host_projects"
    admin_client_.post(LIST_URL, act)
    back = Project.objects.get(pk=local.pk)
    assert (back.hosted, back.removed_at) == (True, None)


def test_the_actions_need_the_add_permission(db, tmp_path: Path):
    (tmp_path / "site").mkdir()
    local = project_ensure(root_path=tmp_path / "site")
    staff = make_user(username="staff", staff=True, perms=("workflows.view_project",))
    client = client_of(staff)
    page = client.get(LIST_URL).content.decode()
    assert "host_projects" not in page
    assert "remove_projects" not in page
    for action in ("host_projects", "remove_projects"):
        client.post(LIST_URL, {"action": action, "_selected_action": [local.pk]})
    assert Project.objects.get(pk=local.pk).hosted is False
    assert Project.objects.get(pk=local.pk).removed_at is None


def test_a_legacy_root_folder_row_cannot_be_hosted(admin_client_):
    # A row a stdio server registered before the check: hosting runs the check again.
    root = Project.objects.create(root_path="/", name="/")
    act = {"action": "host_projects", "_selected_action": [root.pk]}
    response = admin_client_.post(LIST_URL, act, follow=True)
    assert [(m.level_tag, str(m)) for m in response.context["messages"]] == [
        ("error", "/: root_path is the file system's root; give the project's own folder")
    ]
    assert Project.objects.get(pk=root.pk).hosted is False
