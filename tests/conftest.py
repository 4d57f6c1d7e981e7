"""Shared fixtures: project folders with jobs on disk, and database-backed domain objects."""

from __future__ import annotations

import asyncio
import os
import textwrap
from pathlib import Path

import pytest
from django.conf import settings

from tests.support.factories import write_job

# Files changed per step run are looked at right after each commit, in the committing thread,
# so that what a test counts (events, rows) does not depend on a worker thread's timing; the
# worker itself is tested where it is set back to "on" (tests/workflows/test_step_changes.py,
# tests/e2e/test_step_files_stdio.py).
os.environ.setdefault("DEEPWORK_STEP_FILES", "inline")


@pytest.fixture(scope="session", autouse=True)
def _close_database_thread_connections(django_db_setup, django_db_blocker):
    """Close the connection of Django's database thread (used by async code under test) before
    the test database is dropped; PostgreSQL refuses to drop a database still in use."""
    yield
    from asgiref.sync import sync_to_async
    from django.db import connections

    with django_db_blocker.unblock():
        asyncio.run(sync_to_async(connections.close_all, thread_sensitive=True)())


@pytest.fixture(autouse=True)
def _step_files_settled():
    """Every test ends with the step-files worker idle, so no look at one test's sessions runs
    into the next test's database."""
    yield
    from workflows.services import step_changes

    step_changes.drain(timeout=60)


@pytest.fixture(autouse=True)
def _fast_passwords() -> None:
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture(autouse=True)
def _no_additional_job_folders(monkeypatch) -> None:
    # A developer's own DEEPWORK_ADDITIONAL_JOBS_FOLDERS must not leak into the catalog tests.
    monkeypatch.delenv("DEEPWORK_ADDITIONAL_JOBS_FOLDERS", raising=False)


@pytest.fixture
def project_dir(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    (root / ".deepwork" / "jobs").mkdir(parents=True)
    return root.resolve()


DEMO_JOB = textwrap.dedent(
    """\
    name: demo
    version: "1.0.0"
    summary: "A demo job"
    common_job_info_provided_to_all_steps_at_runtime: |
      Shared context for every step.
    workflows:
      - name: main
        summary: "Gather, split in two, wrap up"
        steps: [gather, [part_a, part_b], wrap_up]
      - name: quick
        summary: "Only gather"
        steps: [gather]
    steps:
      - id: gather
        name: "Gather"
        description: "Collect notes"
        instructions_file: steps/gather.md
        inputs: [{name: topic, description: "What to gather"}]
        outputs:
          notes.md: {type: file, description: "Notes", required: true}
          extras: {type: files, description: "Extra files", required: false}
        reviews: []
      - id: part_a
        name: "Part A"
        description: "First half"
        instructions_file: steps/part_a.md
        outputs:
          a.md: {type: file, description: "A", required: true}
        reviews: []
      - id: part_b
        name: "Part B"
        description: "Second half"
        instructions_file: steps/part_b.md
        outputs:
          b.md: {type: file, description: "B", required: true}
        reviews: []
      - id: wrap_up
        name: "Wrap up"
        description: "Summarise"
        instructions_file: steps/wrap_up.md
        inputs: [{file: notes.md, from_step: gather}]
        dependencies: [gather]
        outputs:
          summary.md: {type: file, description: "Summary", required: true}
        reviews:
          - run_each: summary.md
            quality_criteria: {"Complete": "The summary covers every note."}
    """
)

NESTED_JOB = textwrap.dedent(
    """\
    name: nested
    version: "1.0.0"
    summary: "A one-workflow job used for nesting"
    common_job_info_provided_to_all_steps_at_runtime: "Nested context"
    workflows:
      - name: only
        summary: "Two steps"
        steps: [first, second]
    steps:
      - id: first
        name: "First"
        description: "First"
        instructions_file: steps/first.md
        outputs:
          first.md: {type: file, description: "First", required: true}
        reviews: []
      - id: second
        name: "Second"
        description: "Second"
        instructions_file: steps/second.md
        outputs: {}
        reviews: []
    """
)


@pytest.fixture
def demo_project(project_dir: Path) -> Path:
    """A project with the `demo` job (concurrent entry) and the `nested` job, plus outputs."""
    write_job(project_dir, "demo", DEMO_JOB, ["gather", "part_a", "part_b", "wrap_up"])
    write_job(project_dir, "nested", NESTED_JOB, ["first", "second"])
    for name in ("notes.md", "a.md", "b.md", "summary.md", "first.md", "extra1.md", "extra2.md"):
        (project_dir / name).write_text(f"content of {name}\n")
    return project_dir


@pytest.fixture
def project(db, demo_project: Path):
    from workflows.services.projects import project_add

    # Hosted, as a person adds it: REST and hosted /mcp serve it.
    return project_add(root_path=str(demo_project)).project


@pytest.fixture
def catalog(project):
    from workflows.services.catalog import Catalog

    return Catalog(project)


@pytest.fixture
def agent(project):
    from workflows.services.agents import ProcessHolder, agent_claim

    return agent_claim(project=project, holder=ProcessHolder.for_this_process())
