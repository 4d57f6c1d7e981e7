"""The job catalog: discovery order, dedup, load errors, and syncing only what changed."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest
from django.db import connections

from tests.conftest import NESTED_JOB
from tests.support.factories import write_job
from workflows.errors import ProjectUnavailable
from workflows.jobdefs import parse as jobdef
from workflows.models import Job, JobLoadError, WorkflowStep
from workflows.services.catalog import STANDARD_JOBS_DIR, Catalog, catalog_view

pytestmark = pytest.mark.django_db


@pytest.fixture
def parse_calls(monkeypatch) -> list[str]:
    """Record each job.yml the catalog actually parses (the real parser still runs)."""
    calls: list[str] = []
    real = jobdef.parse_job_text

    def counting(text, *, job_dir, yml_path, **options):
        calls.append(Path(job_dir).name)
        return real(text, job_dir=job_dir, yml_path=yml_path, **options)

    monkeypatch.setattr(jobdef, "parse_job_text", counting)
    return calls


def test_order_is_project_jobs_then_standard_then_env_folders(
    project_dir, tmp_path, monkeypatch, db
):
    from workflows.services.projects import project_ensure

    write_job(
        project_dir, "zeta", NESTED_JOB.replace("name: nested", "name: zeta"), ["first", "second"]
    )
    write_job(
        project_dir, "alpha", NESTED_JOB.replace("name: nested", "name: alpha"), ["first", "second"]
    )
    extra = tmp_path / "extra_jobs"
    write_job(extra.parent / "x", "ignored", "", [])  # a folder that is not on the path
    extra_job = extra / "from_env"
    (extra_job / "steps").mkdir(parents=True)
    (extra_job / "job.yml").write_text(NESTED_JOB.replace("name: nested", "name: from_env"))
    for step in ("first", "second"):
        (extra_job / "steps" / f"{step}.md").write_text(f"# {step}\n")
    monkeypatch.setenv("DEEPWORK_ADDITIONAL_JOBS_FOLDERS", f" :{extra} : /does/not/exist")

    view = Catalog(project_ensure(root_path=project_dir)).view()

    names = [job.name for job in view.jobs]
    standard = sorted(p.name for p in STANDARD_JOBS_DIR.iterdir() if (p / "job.yml").exists())
    assert names == ["alpha", "zeta", *standard, "from_env"]
    assert view.errors == ()


def test_project_job_shadows_a_standard_job_of_the_same_folder_name(project_dir, db):
    from workflows.services.projects import project_ensure

    write_job(
        project_dir,
        "deepwork_jobs",
        NESTED_JOB.replace("name: nested", "name: deepwork_jobs"),
        ["first", "second"],
    )
    view = Catalog(project_ensure(root_path=project_dir)).view()
    matching = [job for job in view.jobs if job.dir_name == "deepwork_jobs"]
    assert len(matching) == 1
    assert matching[0].workflows == (("only", "Two steps"),)


def test_broken_job_is_reported_and_does_not_hide_a_later_same_named_job(project_dir, db):
    from workflows.services.projects import project_ensure

    write_job(project_dir, "deepwork_jobs", "name: [unclosed", [])
    view = Catalog(project_ensure(root_path=project_dir)).view()

    assert [e.dir_name for e in view.errors] == ["deepwork_jobs"]
    assert view.errors[0].error.startswith("Failed to load job.yml: Failed to parse YAML file")
    assert view.errors[0].job_dir == str(project_dir / ".deepwork/jobs/deepwork_jobs")
    # The standard job of that name still loads and is served.
    assert any(job.dir_name == "deepwork_jobs" for job in view.jobs)
    assert JobLoadError.objects.get().dir_name == "deepwork_jobs"


def test_schema_and_semantic_errors_are_listed(project_dir, db):
    from workflows.services.projects import project_ensure

    write_job(project_dir, "no_summary", NESTED_JOB.replace('summary: "A one', 'x: "'), [])
    write_job(
        project_dir,
        "bad_dep",
        NESTED_JOB.replace("    outputs: {}\n", "    outputs: {}\n    dependencies: [ghost]\n"),
        ["first", "second"],
    )
    view = Catalog(project_ensure(root_path=project_dir)).view()

    errors = {e.dir_name: e.error for e in view.errors}
    assert errors["no_summary"].startswith("Job definition validation failed: Validation error at")
    assert errors["bad_dep"] == "Step 'second' depends on non-existent step 'ghost'"


def test_unchanged_files_are_not_parsed_again(project, parse_calls, django_assert_num_queries):
    catalog = Catalog(project)
    catalog.view()
    assert sorted(parse_calls) == sorted(["demo", "nested", "deepwork_jobs"])

    parse_calls.clear()
    # Nothing changed on disk: served from memory, no parsing and no query at all.
    with django_assert_num_queries(0):
        catalog.view()
    # A second process (a new Catalog) reuses the stored revisions without parsing.
    Catalog(project).view()
    assert parse_calls == []


def test_an_edit_is_parsed_once_and_becomes_a_new_revision(project, demo_project, parse_calls):
    catalog = Catalog(project)
    catalog.view()
    parse_calls.clear()
    job_yml = demo_project / ".deepwork/jobs/nested/job.yml"
    job_yml.write_text(job_yml.read_text().replace("Two steps", "Two edited steps"))

    view = catalog.view()

    assert parse_calls == ["nested"]
    nested = next(job for job in view.jobs if job.name == "nested")
    assert nested.workflows == (("only", "Two edited steps"),)
    revisions = Job.objects.filter(project=project, dir_name="nested").order_by("id")
    assert [(r.is_current, r.workflows.get().summary) for r in revisions] == [
        (False, "Two steps"),
        (True, "Two edited steps"),
    ]


def test_touching_a_file_without_changing_it_reuses_the_revision(
    project, demo_project, parse_calls
):
    catalog = Catalog(project)
    catalog.view()
    parse_calls.clear()
    job_yml = demo_project / ".deepwork/jobs/nested/job.yml"
    stat = job_yml.stat()
    os.utime(job_yml, ns=(stat.st_atime_ns, stat.st_mtime_ns + 5_000_000_000))

    catalog.view()

    assert parse_calls == []
    assert Job.objects.filter(project=project, dir_name="nested").count() == 1


def test_fixing_a_broken_job_clears_its_error(project, demo_project):
    catalog = Catalog(project)
    job_yml = demo_project / ".deepwork/jobs/nested/job.yml"
    good = job_yml.read_text()
    job_yml.write_text("steps: 3\n")
    assert [e.dir_name for e in catalog.view().errors] == ["nested"]

    job_yml.write_text(good)

    view = catalog.view()
    assert view.errors == ()
    assert "nested" in [job.name for job in view.jobs]
    assert not JobLoadError.objects.exists()


def test_non_utf8_job_yml_is_a_load_error_not_a_crash(project, demo_project):
    (demo_project / ".deepwork/jobs/nested/job.yml").write_bytes(b"name: \xff\xfe\n")
    view = Catalog(project).view()
    assert "is not valid UTF-8" in view.errors[0].error


def test_workflow_entries_become_a_dag(project):
    Catalog(project).view()
    job = Job.objects.get(project=project, dir_name="demo", is_current=True)
    nodes = {
        node.step.step_id: node
        for node in WorkflowStep.objects.filter(workflow__job=job, workflow__name="main")
    }
    assert {n: nodes[n].entry_index for n in nodes} == {
        "gather": 0,
        "part_a": 1,
        "part_b": 1,
        "wrap_up": 2,
    }
    assert nodes["part_a"].is_concurrent
    assert not nodes["gather"].is_concurrent
    assert sorted(d.step.step_id for d in nodes["wrap_up"].depends_on.all()) == ["part_a", "part_b"]
    assert [d.step.step_id for d in nodes["part_b"].depends_on.all()] == ["gather"]
    assert not nodes["gather"].depends_on.exists()


def test_catalog_view_remembers_each_project_for_the_whole_process(
    project, demo_project, parse_calls, django_assert_num_queries
):
    first = catalog_view(project=project)
    # Another caller in the same process (another request) is served from memory.
    with django_assert_num_queries(0):
        assert catalog_view(project=project) is first
    (demo_project / ".deepwork/jobs/nested/job.yml").write_text("steps: 3\n")
    parse_calls.clear()
    assert [e.dir_name for e in catalog_view(project=project).errors] == ["nested"]
    assert parse_calls == ["nested"]


def test_catalog_view_refuses_a_project_whose_folder_is_not_here(db, tmp_path):
    from workflows.services.projects import project_ensure

    gone = project_ensure(root_path=tmp_path / "elsewhere")
    with pytest.raises(ProjectUnavailable, match="is not on this server"):
        catalog_view(project=gone)
    # Nothing was synced: the jobs of a folder that is elsewhere are not marked gone.
    assert not Job.objects.filter(project=gone).exists()


@pytest.mark.django_db(transaction=True)
def test_a_revision_stored_by_another_process_meanwhile_is_reused(project, monkeypatch):
    """Parsing happens before the transaction, so another process can store the same new
    revision in between; the slower sync then uses that row instead of failing on it."""
    real = jobdef.parse_job_text
    entered, release = threading.Event(), threading.Event()
    first_call = threading.Lock()

    def held_once(text, *, job_dir, yml_path, **options):
        if Path(job_dir).name == "nested" and first_call.acquire(blocking=False):
            entered.set()
            assert release.wait(timeout=60)
        return real(text, job_dir=job_dir, yml_path=yml_path, **options)

    monkeypatch.setattr(jobdef, "parse_job_text", held_once)
    result: dict[str, object] = {}

    def slow_sync() -> None:
        try:
            result["view"] = Catalog(project).view()
        except BaseException as exc:
            result["error"] = exc
        finally:
            release.set()
            connections.close_all()

    worker = threading.Thread(target=slow_sync)
    worker.start()
    try:
        assert entered.wait(timeout=60)
        fast = Catalog(project).view()  # the other process: parses nested and stores it
    finally:
        release.set()
        worker.join(timeout=60)

    assert "error" not in result, result.get("error")
    slow = result["view"]
    assert [job.pk for job in slow.jobs] == [job.pk for job in fast.jobs]
    assert Job.objects.filter(project=project, dir_name="nested").count() == 1


def test_a_step_whose_instructions_file_is_not_there_is_a_load_error(project_dir, db):
    from workflows.services.projects import project_ensure

    job_dir = write_job(project_dir, "typo", NESTED_JOB.replace("name: nested", "name: typo"), [])
    (job_dir / "steps" / "second.md").mkdir()
    catalog = Catalog(project_ensure(root_path=project_dir))

    view = catalog.view()

    assert "typo" not in [job.name for job in view.jobs]
    (error,) = view.errors
    # Every such step is named at once, so one round of fixes is enough.
    assert (error.dir_name, error.error) == (
        "typo",
        "Step 'first' has instructions_file 'steps/first.md', which does not exist in the job "
        "folder; Step 'second' has instructions_file 'steps/second.md', which is a directory, "
        "not a file",
    )
    assert JobLoadError.objects.get().error == error.error


def test_the_error_clears_once_the_missing_file_is_there(project_dir, db):
    from workflows.services.projects import project_ensure

    job_dir = write_job(project_dir, "late", NESTED_JOB.replace("name: nested", "name: late"), [])
    catalog = Catalog(project_ensure(root_path=project_dir))
    assert [error.dir_name for error in catalog.view().errors] == ["late"]
    assert catalog.view_if_unchanged() is not None  # nothing to look at again yet

    # The files are written; job.yml is left as it was.
    (job_dir / "steps" / "first.md").write_text("# First\n")
    (job_dir / "steps" / "second.md").write_text("# Second\n")
    assert catalog.view_if_unchanged() is None
    view = catalog.view()

    assert view.errors == ()
    assert "late" in [job.name for job in view.jobs]
    assert not JobLoadError.objects.exists()
    assert catalog.view_if_unchanged() is view
