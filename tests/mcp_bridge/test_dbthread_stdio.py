"""The stdio server's one database thread, end to end: a reviewed hand-in waits for its step's
start snapshot, which the step-files worker stores through that same thread."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

from tests.e2e.driver import Driver
from tests.reviews.test_gate import FAKE, GATE_JOB
from tests.support.factories import write_job
from tests.support.step_files import make_repository, write
from workflows.models import StepRun
from workflows.services.step_changes import NO_START_SNAPSHOT, run_files

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.e2e]


@pytest.fixture
def gated_repository(project_dir: Path) -> Path:
    write_job(project_dir, "gated", GATE_JOB, ["draft", "pages", "final"])
    write(project_dir, "draft.md", "A complete draft.\n")
    make_repository(project_dir)
    return project_dir


@pytest.fixture
def slow_git(tmp_path: Path) -> str:
    """A PATH whose ``git`` is the real one, half a second late: the snapshot after
    start_workflow is then still being taken when the hand-in that follows reaches its
    review."""
    real = shutil.which("git")
    assert real is not None
    folder = tmp_path / "slow-git"
    folder.mkdir()
    script = folder / "git"
    script.write_text(f'#!/bin/sh\nsleep 0.5\nexec "{real}" "$@"\n')
    script.chmod(0o755)
    return f"{folder}{os.pathsep}{os.environ.get('PATH', '')}"


async def test_a_reviewed_hand_in_right_after_start_compares_with_the_start_snapshot(
    gated_repository, slow_git
):
    driver = Driver(
        gated_repository,
        "--external-runner-cmd",
        f"{sys.executable} {FAKE}",
        env_extra={"FAKE_REVIEW": "pass", "DEEPWORK_STEP_FILES": "on", "PATH": slow_git},
    )
    async with driver as agent:
        await agent.call(
            "start_workflow", {"goal": "g", "job_name": "gated", "workflow_name": "main"}
        )
        done = await agent.call("finished_step", {"outputs": {"draft.md": "draft.md"}})
        assert done["status"] == "next_step"

    run = await StepRun.objects.aget(step_id="draft")
    files = run_files(run)
    # Had the database thread waited for the snapshot without storing it meanwhile, the
    # review would have gone on without one after a timeout, and said so.
    assert NO_START_SNAPSHOT not in files.warnings
    assert files.status == "recorded"
