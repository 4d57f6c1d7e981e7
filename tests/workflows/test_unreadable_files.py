"""A job.yml or an instructions file that is a pipe or a folder is an error, never a hang."""

from __future__ import annotations

import os

import pytest

from tests.conftest import NESTED_JOB
from tests.support.factories import write_job
from tests.workflows.pipes import never_blocks_on
from workflows.errors import JobBroken
from workflows.models import JobLoadError, WorkflowSession
from workflows.services import sessions
from workflows.services.catalog import Catalog
from workflows.services.projects import project_ensure

pytestmark = pytest.mark.django_db


def test_a_job_yml_that_is_a_named_pipe_is_a_load_error(project_dir):
    write_job(
        project_dir, "good", NESTED_JOB.replace("name: nested", "name: good"), ["first", "second"]
    )
    piped = project_dir / ".deepwork/jobs/piped"
    piped.mkdir()
    os.mkfifo(piped / "job.yml")

    with never_blocks_on(piped / "job.yml"):
        view = Catalog(project_ensure(root_path=project_dir)).view()

    errors = {error.dir_name: error.error for error in view.errors}
    assert errors == {
        "piped": "Failed to load job.yml: job.yml is not a regular file (it is a named pipe)"
    }
    assert any(job.dir_name == "good" for job in view.jobs)
    assert JobLoadError.objects.get().dir_name == "piped"


def test_a_job_yml_that_is_a_folder_is_a_load_error(project_dir):
    (project_dir / ".deepwork/jobs/odd/job.yml").mkdir(parents=True)

    view = Catalog(project_ensure(root_path=project_dir)).view()

    assert [(e.dir_name, e.error) for e in view.errors] == [
        ("odd", "Failed to load job.yml: job.yml is not a regular file (it is a directory)")
    ]


def test_an_unreadable_job_yml_keeps_the_operating_system_message(project_dir):
    if os.geteuid() == 0:
        pytest.skip("root reads any file")
    job_dir = write_job(project_dir, "locked", NESTED_JOB, ["first", "second"])
    (job_dir / "job.yml").chmod(0)

    view = Catalog(project_ensure(root_path=project_dir)).view()

    assert [(e.dir_name, e.error) for e in view.errors] == [
        ("locked", f"Failed to load job.yml: [Errno 13] Permission denied: '{job_dir / 'job.yml'}'")
    ]


def _start(project, agent, catalog):
    return sessions.session_start(
        project=project,
        agent=agent,
        catalog=catalog.view(),
        job_name="demo",
        workflow_name="main",
        goal="test goal",
    )


def test_instructions_that_are_a_named_pipe_break_the_job_at_once(
    project, agent, catalog, demo_project
):
    catalog.view()  # loaded while the file was there
    instructions = demo_project / ".deepwork/jobs/demo/steps/gather.md"
    instructions.unlink()
    os.mkfifo(instructions)

    with never_blocks_on(instructions), pytest.raises(JobBroken) as info:
        _start(project, agent, catalog)

    assert str(info.value) == (
        "Instructions file steps/gather.md could not be read: it is not a regular file "
        "(it is a named pipe)"
    )
    assert not WorkflowSession.objects.exists()


def test_instructions_that_are_a_folder_break_the_job(project, agent, catalog, demo_project):
    catalog.view()  # loaded while the file was there
    instructions = demo_project / ".deepwork/jobs/demo/steps/gather.md"
    instructions.unlink()
    instructions.mkdir()

    with pytest.raises(JobBroken) as info:
        _start(project, agent, catalog)

    assert str(info.value) == (
        "Instructions file steps/gather.md could not be read: it is not a regular file "
        "(it is a directory)"
    )


def test_missing_instructions_keep_the_091_wording(project, agent, catalog, demo_project):
    catalog.view()  # loaded while the file was there
    (demo_project / ".deepwork/jobs/demo/steps/gather.md").unlink()
    with pytest.raises(JobBroken) as info:
        _start(project, agent, catalog)
    assert str(info.value) == "Instructions file not found: steps/gather.md"
