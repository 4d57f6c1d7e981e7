"""``project_list`` and ``project_remove`` (``deepwork-server project list|remove``): every project
with whether it is served, and a soft removal that keeps the sessions."""

from __future__ import annotations

from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from workflows.models import Project, WorkflowSession
from workflows.services.agents import agent_ensure
from workflows.services.catalog import catalog_view
from workflows.services.projects import ProjectRemoved, project_add, project_ensure
from workflows.services.sessions import session_start

pytestmark = pytest.mark.django_db


def run(name: str, *args: str) -> tuple[str, str]:
    out, err = StringIO(), StringIO()
    call_command(name, *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def test_the_list_names_each_projects_state(tmp_path: Path, django_assert_num_queries):
    local = project_ensure(root_path=tmp_path / "a")
    hosted = project_add(root_path=str(tmp_path / "b")).project
    gone = project_add(root_path=str(tmp_path / "c")).project
    run("project_remove", str(gone.pk))
    with django_assert_num_queries(1):
        out, _ = run("project_list")
    assert out.splitlines() == [
        "id\tstate\troot_path\tname",
        f"{local.pk}\tlocal\t{tmp_path / 'a'}\ta",
        f"{hosted.pk}\thosted\t{tmp_path / 'b'}\tb",
        f"{gone.pk}\tremoved\t{tmp_path / 'c'}\tc",
    ]
    for n in range(10):
        project_ensure(root_path=tmp_path / f"more{n}")
    with django_assert_num_queries(1):
        assert len(run("project_list")[0].splitlines()) == 14


def test_remove_by_id_or_folder_keeps_the_sessions_and_adding_brings_it_back(
    project, tmp_path: Path, monkeypatch
):
    agent = agent_ensure(project=project, agent_id="a")
    session_start(
        project=project,
        agent=agent,
        catalog=catalog_view(project=project),
        job_name="demo",
        workflow_name="main",
        goal="g",
    )
    _, err = run("project_remove", str(project.pk))
    assert err.startswith(f"Removed project {project.pk} 'project' at {project.root_path};")
    removed = Project.objects.get(pk=project.pk)
    assert (removed.hosted, removed.removed_at is not None) == (False, True)
    assert WorkflowSession.objects.filter(project=project).count() == 1
    # By its folder, relative to the current folder: already removed, nothing changes.
    monkeypatch.chdir(project.root_path)
    _, err = run("project_remove", ".")
    assert err.startswith(f"Already removed: project {project.pk} ")
    assert Project.objects.get(pk=project.pk).removed_at == removed.removed_at
    # A local stdio server is refused a removed project; adding its folder brings it back.
    with pytest.raises(ProjectRemoved, match="was removed from this server"):
        project_ensure(root_path=Path(project.root_path))
    back = project_add(root_path=project.root_path)
    assert (back.project.pk, back.created, back.project.hosted, back.project.removed_at) == (
        project.pk,
        False,
        True,
        None,
    )
    assert project_ensure(root_path=Path(project.root_path)).pk == project.pk


@pytest.mark.parametrize("ref", ["999", "²", "9" * 5000, "/nowhere/at/all", "0"])
def test_an_unknown_or_odd_reference_is_a_clear_refusal(db, ref: str):
    with pytest.raises(CommandError, match="No project '"):
        run("project_remove", ref)
