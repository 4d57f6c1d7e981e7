"""``manage.py project_add PATH``: prints the project's id (and nothing else) on stdout."""

from __future__ import annotations

from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from workflows.models import Project
from workflows.services.projects import NOT_A_READABLE_FOLDER, project_ensure

pytestmark = pytest.mark.django_db


def run(*args: str) -> tuple[str, str]:
    out, err = StringIO(), StringIO()
    call_command("project_add", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def test_it_prints_the_new_projects_id_and_the_same_one_again(tmp_path: Path):
    (tmp_path / "site").mkdir()
    out, err = run(str(tmp_path / "site"))
    project = Project.objects.get()
    assert out == f"{project.pk}\n"
    assert err == f"Added project {project.pk} 'site' at {tmp_path / 'site'}\n"
    out, err = run(str(tmp_path / "site"))
    assert out == f"{project.pk}\n"
    assert err.startswith(f"Already a project: project {project.pk} ")
    assert Project.objects.count() == 1


def test_a_relative_path_is_taken_from_the_current_folder(tmp_path: Path, monkeypatch):
    (tmp_path / "site").mkdir()
    monkeypatch.chdir(tmp_path / "site")
    out, _ = run(".")
    assert Project.objects.get(pk=int(out)).root_path == str(tmp_path / "site")


def test_a_missing_folder_is_added_with_a_warning_and_what_was_found_on_stderr(tmp_path: Path):
    out, err = run(str(tmp_path / "later"))
    assert Project.objects.get(pk=int(out)).root_path == str(tmp_path / "later")
    # The operator at the server's shell is told what is at the path; the network is not.
    assert f"Warning: {NOT_A_READABLE_FOLDER}\nFound: {tmp_path / 'later'} does not exist\n" in err
    (tmp_path / "notes.md").write_text("x")
    _, err = run(str(tmp_path / "notes.md"))
    assert f"Found: {tmp_path / 'notes.md'} is a regular file, not a folder\n" in err


def test_a_bad_path_is_refused_with_the_services_words(tmp_path: Path):
    with pytest.raises(CommandError, match="root_path contains a NUL byte"):
        run("/srv/a\x00b")
    with pytest.raises(CommandError, match="at most 1024 are stored"):
        run("/" + "a" * 2000)
    with pytest.raises(CommandError, match="root_path is the file system's root"):
        run("/")
    assert not Project.objects.exists()


def test_a_folder_a_stdio_server_registered_is_hosted(tmp_path: Path):
    (tmp_path / "site").mkdir()
    local = project_ensure(root_path=tmp_path / "site")
    out, err = run(str(tmp_path / "site"))
    assert out == f"{local.pk}\n"
    assert err == f"Hosted project {local.pk} 'site' at {tmp_path / 'site'}\n"
    assert Project.objects.get(pk=local.pk).hosted
