"""``manage.py project_add PATH``: prints the project's id (and nothing else) on stdout."""

from __future__ import annotations

from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from workflows.models import Project

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


def test_a_missing_folder_is_added_with_a_warning_on_stderr(tmp_path: Path):
    out, err = run(str(tmp_path / "later"))
    assert Project.objects.get(pk=int(out)).root_path == str(tmp_path / "later")
    assert f"Warning: The folder {tmp_path / 'later'} does not exist on this server (yet)." in err


def test_a_file_or_a_bad_path_is_refused_with_the_services_words(tmp_path: Path):
    (tmp_path / "notes.md").write_text("x")
    with pytest.raises(CommandError, match="is a regular file on this server; a project is a"):
        run(str(tmp_path / "notes.md"))
    with pytest.raises(CommandError, match="root_path contains a NUL byte"):
        run("/srv/a\x00b")
    with pytest.raises(CommandError, match="at most 1024 are stored"):
        run("/" + "a" * 2000)
    assert not Project.objects.exists()
