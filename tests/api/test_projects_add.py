"""``POST /api/projects``: a person's token with ``workflows.add_project`` makes the server serve
a folder (hosted); a folder it cannot read is one warning in the answer whatever is there, bad
paths and the server's own folders a 400 naming the rule."""

from __future__ import annotations

import os
import pwd
from pathlib import Path

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from accounts.services import api_token_create
from api.auth import VIEW
from tests.api.conftest import Caller, assert_error
from workflows.models import Project
from workflows.roots import KEPT_TO_ITSELF
from workflows.services.projects import NOT_A_READABLE_FOLDER, project_ensure

pytestmark = pytest.mark.django_db

ADD = "workflows.add_project"
DRIVE = "workflows.drive_session"


def add(caller: Caller, root_path: object):
    return caller.post("/api/projects", {"root_path": root_path})


@pytest.fixture
def adder(make_caller) -> Caller:
    return make_caller(ADD, username="ops")


def test_a_folder_on_the_server_is_added_and_its_id_answered(adder: Caller, tmp_path: Path):
    (tmp_path / "site").mkdir()
    response = add(adder, str(tmp_path / "site"))
    assert response.status_code == 201, response.content
    body = response.json()
    project = Project.objects.get()
    assert body["id"] == project.pk
    assert body["root_path"] == project.root_path == str((tmp_path / "site").resolve())
    assert (body["name"], body["created"], body["folder_found"], body["warnings"]) == (
        "site",
        True,
        True,
        [],
    )
    # Again: the same project, not a second one.
    again = add(adder, str(tmp_path / "site") + "/")
    assert again.status_code == 200
    assert (again.json()["id"], again.json()["created"]) == (project.pk, False)
    assert Project.objects.count() == 1
    assert (body["hosted"], body["removed_at"]) == (True, None)


def test_whatever_is_at_a_path_that_is_not_a_readable_folder_the_answer_is_the_same(
    adder: Caller, tmp_path: Path
):
    # A regular file, a character device, nothing, "Not a directory": one answer, so that
    # adding projects does not map the server's disk.
    (tmp_path / "notes.md").write_text("x")
    paths = [
        tmp_path / "notes.md",
        Path("/dev/null"),
        tmp_path / "not-mounted-yet",
        tmp_path / "notes.md" / "x",
    ]
    answers = []
    for path in paths:
        response = add(adder, str(path))
        assert response.status_code == 201, response.content
        body = response.json()
        # /dev is a system folder, which has a warning of its own, first.
        warnings = body["warnings"][1:] if str(path).startswith("/dev/") else body["warnings"]
        answers.append((body["created"], body["folder_found"], warnings))
        assert Project.objects.filter(pk=body["id"], root_path=str(path)).exists()
    assert answers == [(True, False, [NOT_A_READABLE_FOLDER])] * len(paths)


def test_a_stdio_registered_folder_is_hosted_by_adding_it(adder: Caller, tmp_path: Path):
    (tmp_path / "site").mkdir()
    local = project_ensure(root_path=tmp_path / "site")
    assert not local.hosted
    response = add(adder, str(tmp_path / "site"))
    assert response.status_code == 200, response.content
    body = response.json()
    assert (body["id"], body["created"], body["hosted"]) == (local.pk, False, True)
    assert Project.objects.get(pk=local.pk).hosted


@pytest.mark.parametrize("system", ["/etc", "/usr/share", "/var/lib", "/proc/sys"])
def test_a_system_folder_is_added_with_a_warning(adder: Caller, system: str):
    body = add(adder, system).json()
    root = str(Path(system).resolve())
    assert body["root_path"] == root
    assert body["warnings"][0].startswith(f"{root} is a system folder: every file in it")


def test_a_symbolic_link_to_a_system_folder_is_stored_resolved_with_the_warning(
    adder: Caller, tmp_path: Path
):
    (tmp_path / "conf").symlink_to("/etc")
    body = add(adder, str(tmp_path / "conf")).json()
    assert body["root_path"] == "/etc"
    assert body["warnings"][0].startswith("/etc is a system folder")


def test_the_servers_own_folders_are_refused(adder: Caller, settings, tmp_path: Path, monkeypatch):
    data = tmp_path / "srv" / "data"
    data.mkdir(parents=True)
    settings.VAR_DIR = data
    home = tmp_path / "home" / "deepwork"
    home.mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    (tmp_path / "to-data").symlink_to(data)
    for refused in [
        data,
        data / "inside",
        tmp_path / "srv",
        tmp_path / "to-data",
        tmp_path,
        home,
        tmp_path / "home",
        # The home the account entry names, whatever $HOME says.
        Path(pwd.getpwuid(os.getuid()).pw_dir),
    ]:
        error = assert_error(add(adder, str(refused)), 400, "invalid_input")
        assert error["message"] == KEPT_TO_ITSELF, refused
    assert not Project.objects.exists()
    # A folder inside the home is the server user's own: served quietly.
    (home / "site").mkdir()
    assert add(adder, str(home / "site")).json()["warnings"] == []


def test_the_same_folder_through_a_symbolic_link_is_one_project(adder: Caller, tmp_path: Path):
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    first = add(adder, str(tmp_path / "real")).json()
    second = add(adder, str(tmp_path / "link/../real")).json()
    third = add(adder, str(tmp_path / "link")).json()
    assert first["id"] == second["id"] == third["id"]


@pytest.mark.parametrize(
    ("root_path", "message"),
    [
        ("", "root_path is empty; give the project folder's absolute path"),
        (
            "relative/site",
            "root_path must be absolute (a folder on the server), got 'relative/site'",
        ),
        ("~/site", "root_path must be absolute (a folder on the server), got '~/site'"),
        ("/srv/a\x00b", "root_path contains a NUL byte"),
        ("/srv/a\nb", "root_path contains a control character (a newline, a tab...)"),
        ("/" + "a" * 1100, "root_path is 1101 characters; at most 1024 are stored"),
        ("/", "root_path is the file system's root; give the project's own folder"),
        ("/srv/../", "root_path is the file system's root; give the project's own folder"),
        ("/proc/self/root", "root_path is the file system's root; give the project's own folder"),
    ],
)
def test_a_bad_path_is_a_400_naming_the_rule(adder: Caller, root_path: str, message: str):
    error = assert_error(add(adder, root_path), 400, "invalid_input")
    assert error["message"] == message
    assert not Project.objects.exists()


def test_a_malformed_body_is_a_400_with_details(adder: Caller):
    error = assert_error(adder.post("/api/projects", {"path": "/srv/x"}), 400, "invalid_request")
    assert error["details"][0]["loc"][-1] == "root_path"
    error = assert_error(add(adder, 7), 400, "invalid_request")
    assert not Project.objects.exists()


def test_it_needs_its_own_permission(make_caller, tmp_path: Path):
    # Watching and driving sessions is not enough: a project's files become readable through
    # its sessions, so serving another folder is a permission of its own.
    caller = make_caller(VIEW, DRIVE, "reviews.decide_review", "workflows.abort_session")
    error = assert_error(add(caller, str(tmp_path)), 403, "forbidden")
    assert error["message"] == "This needs the permission 'workflows.add_project'"
    assert not Project.objects.exists()


def test_no_group_is_given_it(db):
    from django.contrib.auth.models import Group

    for group in Group.objects.filter(name__in=("Watchers", "Deciders")):
        assert not group.permissions.filter(codename="add_project").exists(), group.name


def test_an_mcp_token_bound_to_a_project_cannot_add_one(adder: Caller, project, tmp_path: Path):
    # The same user, whose own key may: the token's binding is the limit.
    token, secret = api_token_create(user=adder.user, name="agent", mcp=True, mcp_project=project)
    bound = Caller(adder.client, secret, adder.user)
    error = assert_error(add(bound, str(tmp_path)), 403, "forbidden")
    assert error["message"] == (
        f"token {token.prefix}… (agent) may use only project {project.pk}; it cannot add "
        "or remove projects (use a token of yours without MCP, or the admin)"
    )
    assert Project.objects.count() == 1


def test_an_unbound_mcp_token_cannot_add_one_either(adder: Caller, tmp_path: Path):
    token, secret = api_token_create(user=adder.user, name="agent", mcp=True)
    agent = Caller(adder.client, secret, adder.user)
    error = assert_error(add(agent, str(tmp_path)), 403, "forbidden")
    assert error["message"] == (
        f"token {token.prefix}… (agent) is an MCP agent's token; adding or removing a "
        "project is a person's decision: use a token of yours without MCP, or the admin"
    )
    assert not Project.objects.exists()


def test_the_query_count_of_adding_a_project(adder: Caller, tmp_path: Path):
    add(adder, str(tmp_path / "warm"))  # last_used_at written
    with CaptureQueriesContext(connection) as queries:
        response = add(adder, str(tmp_path / "new"))
    assert response.status_code == 201
    # The token (with its user), the user's permissions and its groups' permissions, the
    # project looked up by root, and its insert in a savepoint (open, insert, release).
    assert len(queries) == 7, [q["sql"] for q in queries]
