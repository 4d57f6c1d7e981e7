"""Issue 9.7 (the reviewer side): notes a reviewer cannot be handed, and reviewers that cannot run.

Reproduced as found: with ``--external-runner-cmd``, notes over 128 KiB (E2BIG: the system
prompt, which carries the notes, went into the reviewer's environment; for ``claude`` into its
argv) or notes holding NUL made the review fail opaquely. Now the payload goes on stdin and the
system prompt in a private temporary file, so both reach a real reviewer subprocess intact;
a reviewer that cannot be started raises ``ReviewerCouldNotRun`` saying so and why.
"""

from __future__ import annotations

import json
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest

from reviews.gate import (
    ClaudeReviewer,
    CommandReviewer,
    ReviewerCouldNotRun,
    ReviewTask,
    build_payload,
    system_prompt,
)

FAKE = Path(__file__).parent.parent / "reviews" / "fake_reviewer.py"
# Over 200 KiB, well past Linux's 128 KiB limit for one argument or environment string
# (MAX_ARG_STRLEN), yet within the 100,000 characters the services accept for notes: three
# bytes a character.
BIG_NOTES = "".join(f"{n:05d} ü " + "→" * 60 + "\n" for n in range(1200))
NUL_NOTES = "before the NUL\x00after the NUL, and \x00\x00 two more"


@pytest.fixture
def review_log(monkeypatch, tmp_path) -> Path:
    log = tmp_path / "reviews"
    monkeypatch.setenv("FAKE_REVIEW_LOG", str(log))
    monkeypatch.setenv("FAKE_REVIEW", "pass")
    return log


@pytest.fixture
def private_tmp(monkeypatch, tmp_path) -> Path:
    """The temporary folder the gate writes system prompts to, watched by the test."""
    folder = tmp_path / "tmp"
    folder.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    return folder


def the_call(log: Path) -> dict:
    (call,) = [json.loads(path.read_text()) for path in log.glob("call-*.json")]
    return call


def task_for(project: Path) -> ReviewTask:
    (project / "out.md").write_text("THE OUTPUT\n")
    return ReviewTask(
        step_id="write",
        run_each="step",
        criteria={"Complete": "The output is complete."},
        guidance=None,
        outputs={"out.md": "out.md"},
        target_file=None,
    )


async def review_with(reviewer, project: Path, notes: str | None):
    task = task_for(project)
    return await reviewer.review(
        system=system_prompt(task, notes),
        payload=build_payload(
            task=task, project_root=project, max_inline_files=5, notes=notes, include_notes=True
        ),
        timeout_seconds=60,
        cwd=project,
    )


def fake_claude(folder: Path) -> Path:
    claude = folder / "claude"
    claude.write_text(f'#!/bin/sh\nexec {sys.executable} {FAKE} "$@"\n')
    claude.chmod(0o755)
    return claude


REVIEWERS = {
    "command": lambda tmp_path: CommandReviewer(f"{sys.executable} {FAKE}"),
    "claude": lambda tmp_path: ClaudeReviewer(command=str(fake_claude(tmp_path))),
}


@pytest.mark.parametrize("kind", list(REVIEWERS))
@pytest.mark.parametrize("notes", [BIG_NOTES, NUL_NOTES], ids=["200 KiB", "NUL"])
async def test_notes_reach_the_reviewer_intact(
    tmp_path, review_log, private_tmp, monkeypatch, kind, notes
):
    assert len(BIG_NOTES.encode()) > 200 * 1024
    assert len(BIG_NOTES) < 100_000
    monkeypatch.setenv("FAKE_WRAP", "1")  # claude's wrapper; a command may answer either way
    reviewer = REVIEWERS[kind](tmp_path)

    verdict = await review_with(reviewer, tmp_path, notes)

    assert verdict.passed
    call = the_call(review_log)
    # The notes are in the system prompt (a file) and in the payload (stdin), byte for byte.
    assert call["system"] is not None
    assert f"The author of the work left these notes:\n\n{notes}" in call["system"]
    assert f"== AUTHOR NOTES ====================\n\n{notes}\n\n====" in call["prompt"]
    assert "THE OUTPUT" in call["prompt"]
    # Nothing long ever went into argv; the prompt file is gone once the review is over.
    assert all(len(arg) < 4096 for arg in call["argv"])
    assert list(private_tmp.iterdir()) == []


async def test_the_system_prompt_file_is_private(tmp_path, review_log, private_tmp, monkeypatch):
    # A reviewer that reports the mode of the file it was handed.
    script = tmp_path / "mode_reviewer.py"
    script.write_text(
        textwrap.dedent(
            """\
            import json, os, stat, sys
            sys.stdin.read()
            mode = stat.S_IMODE(os.stat(os.environ["DEEPWORK_REVIEW_SYSTEM_PROMPT_FILE"]).st_mode)
            print(json.dumps({"passed": True, "feedback": oct(mode)}))
            """
        )
    )
    verdict = await review_with(CommandReviewer(f"{sys.executable} {script}"), tmp_path, "n")
    assert verdict.feedback == "0o600"


@pytest.mark.parametrize(
    ("command", "message"),
    [
        (
            "/nonexistent/reviewer --flag",
            "Reviewer command could not run: command not found: /nonexistent/reviewer",
        ),
        ("reviewer\x00evil", "Reviewer command could not run: its command or environment "),
    ],
    ids=["missing", "NUL in the command"],
)
async def test_a_command_that_cannot_start_could_not_run(tmp_path, private_tmp, command, message):
    with pytest.raises(ReviewerCouldNotRun) as raised:
        await review_with(CommandReviewer(command), tmp_path, "notes")
    assert str(raised.value).startswith(message)
    assert list(private_tmp.iterdir()) == []


async def test_a_command_that_is_not_executable_could_not_run(tmp_path, private_tmp):
    script = tmp_path / "reviewer.sh"
    script.write_text("#!/bin/sh\necho '{}'\n")
    script.chmod(0o644)
    with pytest.raises(ReviewerCouldNotRun) as raised:
        await review_with(CommandReviewer(str(script)), tmp_path, "notes")
    assert str(raised.value) == (
        f"Reviewer command could not run: command is not executable: {script}"
    )


async def test_a_missing_claude_could_not_run(tmp_path, private_tmp):
    with pytest.raises(ReviewerCouldNotRun) as raised:
        await review_with(ClaudeReviewer(command="/nonexistent/claude"), tmp_path, "notes")
    assert str(raised.value) == "Claude CLI could not run: command not found: /nonexistent/claude"
    assert list(private_tmp.iterdir()) == []


@pytest.mark.skipif(sys.platform != "linux", reason="MAX_ARG_STRLEN is Linux's limit")
async def test_an_environment_too_large_to_exec_could_not_run(
    tmp_path, private_tmp, review_log, monkeypatch
):
    # The operator's environment, not the notes: still a reviewer that never started.
    monkeypatch.setenv("DEEPWORK_TEST_HUGE", "x" * (200 * 1024))
    with pytest.raises(ReviewerCouldNotRun) as raised:
        await review_with(CommandReviewer(f"{sys.executable} {FAKE}"), tmp_path, "notes")
    assert str(raised.value) == (
        "Reviewer command could not run: its command line and environment are too large for "
        "the system (E2BIG)"
    )
    assert not review_log.exists()


async def test_a_missing_working_folder_is_named(tmp_path, private_tmp):
    task = task_for(tmp_path)
    gone = tmp_path / "gone"
    with pytest.raises(ReviewerCouldNotRun) as raised:
        await CommandReviewer(f"{sys.executable} {FAKE}").review(
            system=system_prompt(task, None), payload="p", timeout_seconds=60, cwd=gone
        )
    assert str(raised.value) == (
        f"Reviewer command could not run: its working folder does not exist: {gone}"
    )


async def test_a_reviewer_that_ran_and_failed_is_not_could_not_run(
    tmp_path, review_log, monkeypatch
):
    """Crashing is the reviewer's verdict on itself, not a failure to start it."""
    from reviews.gate import ReviewerError

    monkeypatch.setenv("FAKE_REVIEW", "crash")
    with pytest.raises(ReviewerError) as raised:
        await review_with(CommandReviewer(f"{sys.executable} {FAKE}"), tmp_path, BIG_NOTES)
    assert not isinstance(raised.value, ReviewerCouldNotRun)
    assert str(raised.value).startswith("Reviewer command failed with exit code 3")


@pytest.mark.django_db(transaction=True)
async def test_finished_step_with_200_kib_of_notes_is_reviewed_and_recorded(
    project_dir, review_log, private_tmp
):
    """The case as found, end to end: the step is reviewed, the verdict recorded, and the
    session moves on. (NUL in notes is refused before any review, by the input limits.)"""
    notes = BIG_NOTES
    from channels.db import database_sync_to_async

    from reviews.gate import GateConfig
    from reviews.models import ReviewResult
    from tests.reviews.test_gate import GATE_JOB, start_session
    from tests.support.driving import finished_step
    from tests.support.factories import write_job

    write_job(project_dir, "gated", GATE_JOB, ["draft", "pages", "final"])
    (project_dir / "draft.md").write_text("DRAFT BODY\n")
    project, agent = await database_sync_to_async(start_session)(project_dir, "gated")

    response = await finished_step(
        project=project,
        agent=agent,
        gate=GateConfig(reviewer=CommandReviewer(f"{sys.executable} {FAKE}")),
        outputs={"draft.md": "draft.md"},
        notes=notes,
    )

    assert response.status == "next_step"
    result = await ReviewResult.objects.aget()
    assert (result.passed, result.error, result.attempt) == (True, None, 1)
    assert notes in the_call(review_log)["prompt"]


async def test_a_cancelled_review_leaves_no_reviewer_running(
    tmp_path, review_log, private_tmp, monkeypatch
):
    """An abort or a server shutdown cancels the review: the reviewer process goes with it."""
    import asyncio
    import os

    gate = tmp_path / "gate"
    gate.mkdir()
    monkeypatch.setenv("FAKE_GATE", str(gate))
    review = asyncio.create_task(
        review_with(CommandReviewer(f"{sys.executable} {FAKE}"), tmp_path, "notes")
    )
    try:
        for _ in range(3000):
            held = await asyncio.to_thread(lambda: list(gate.glob("arrived-*")))
            if held:
                break
            await asyncio.sleep(0.01)
        (arrived,) = held
        pid = int(arrived.name.removeprefix("arrived-"))
        review.cancel()
        with pytest.raises(asyncio.CancelledError):
            await review
        with pytest.raises(ProcessLookupError):  # killed and reaped, not left waiting
            os.kill(pid, 0)
        assert list(private_tmp.iterdir()) == []
    finally:
        await asyncio.to_thread((gate / "release").touch)


async def test_no_place_for_the_system_prompt_could_not_run(tmp_path, review_log, monkeypatch):
    gone = tmp_path / "no-such-tmp"
    monkeypatch.setattr(tempfile, "tempdir", str(gone))
    with pytest.raises(ReviewerCouldNotRun) as raised:
        await review_with(CommandReviewer(f"{sys.executable} {FAKE}"), tmp_path, "notes")
    assert str(raised.value).startswith(
        "Reviewer command could not run: the system prompt could not be written to a "
        "temporary file: [Errno 2] No such file or directory"
    )
    assert not review_log.exists()
