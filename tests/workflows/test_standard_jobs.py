"""The standard ``deepwork_jobs`` by generation: 0.14's authoring workflows under
``--generation 0.14``; 0.9.1's set under ``0.9`` and ``both`` (a 0.9.1 client cannot run a
0.14-format job)."""

from __future__ import annotations

import pytest

from workflows.jobdefs import format_0_14, parse
from workflows.services.catalog import STANDARD_JOBS_014_DIR, STANDARD_JOBS_DIR, Catalog

pytestmark = pytest.mark.django_db(transaction=True)

WORKFLOWS_014 = {
    "new_job": ["define", "implement", "test", "iterate"],
    "repair": ["fix_settings", "fix_jobs", "errata"],
    "learn": ["learn"],
    "shared_jobs": ["sync_shared_jobs"],
}


def test_the_014_set_is_a_valid_014_format_job() -> None:
    path = STANDARD_JOBS_014_DIR / "deepwork_jobs" / "job.yml"
    job = parse.parse_job_bytes(path.read_bytes(), job_dir=path.parent, yml_path=path)
    assert job.format == format_0_14.FORMAT
    assert job.name == "deepwork_jobs"
    as_dict = format_0_14.job_to_dict(job)
    walked = {
        name: [step.name for step in parse.runtime_workflow(as_dict, name).steps]
        for name in WORKFLOWS_014
    }
    assert walked == WORKFLOWS_014
    assert [w.name for w in job.workflows] == list(WORKFLOWS_014)


@pytest.mark.parametrize(
    ("generation", "workflows"),
    [
        ("0.14", list(WORKFLOWS_014)),
        ("both", ["new_job", "repair"]),
        ("0.9", ["new_job", "repair"]),
    ],
)
def test_each_generation_serves_its_standard_set(project, generation, workflows) -> None:
    view = Catalog(project, generation=generation).view()
    [standard] = [job for job in view.jobs if job.dir_name == "deepwork_jobs"]
    assert [name for name, _summary in standard.workflows] == workflows
    assert not view.errors
    expected_dir = STANDARD_JOBS_014_DIR if generation == "0.14" else STANDARD_JOBS_DIR
    from workflows.models import Job

    assert Job.objects.get(pk=standard.pk).job_dir == str(expected_dir / "deepwork_jobs")


def test_a_project_job_of_the_same_name_still_wins_in_014(project, demo_project) -> None:
    job_dir = demo_project / ".deepwork" / "jobs" / "deepwork_jobs"
    job_dir.mkdir(parents=True)
    (job_dir / "job.yml").write_text(
        "name: deepwork_jobs\nsummary: mine\nstep_arguments: []\n"
        "workflows:\n  only:\n    summary: s\n    steps:\n      - name: a\n"
        "        instructions: do it\n"
    )
    view = Catalog(project, generation="0.14").view()
    [standard] = [job for job in view.jobs if job.dir_name == "deepwork_jobs"]
    assert standard.workflows == (("only", "s"),)
