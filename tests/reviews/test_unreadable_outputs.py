"""An output that is a pipe or a folder is described in the review payload, never waited on."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from reviews.gate import ReviewTask, build_payload
from reviews.services import step_finish_gated
from tests.reviews.test_gate import GATE_JOB, command_gate, start_session
from tests.support.factories import write_job
from tests.workflows.pipes import never_blocks_on
from workflows.errors import InvalidInput


def payload_for(root: Path, outputs: dict[str, str]) -> str:
    task = ReviewTask(
        step_id="s",
        run_each="step",
        criteria={"c": "d"},
        guidance=None,
        outputs=outputs,
        target_file=None,
    )
    return build_payload(
        task=task, project_root=root, max_inline_files=5, notes=None, include_notes=True
    )


def test_a_named_pipe_output_is_an_error_line_not_a_hang(tmp_path):
    os.mkfifo(tmp_path / "out.md")
    (tmp_path / "ok.md").write_text("fine\r\nline two\n")

    with never_blocks_on(tmp_path / "out.md"):
        payload = payload_for(tmp_path, {"out": "out.md", "ok": "ok.md"})

    assert (
        "-------------------- out.md --------------------\n"
        f"[Error reading file: {tmp_path / 'out.md'} is not a regular file (it is a named pipe)]"
    ) in payload
    # Regular files still come through, newlines normalised as before.
    assert "-------------------- ok.md --------------------\nfine\nline two\n" in payload


def test_a_folder_output_is_an_error_line(tmp_path):
    (tmp_path / "out.md").mkdir()
    payload = payload_for(tmp_path, {"out": "out.md"})
    assert (
        f"[Error reading file: {tmp_path / 'out.md'} is not a regular file (it is a directory)]"
    ) in payload


@pytest.mark.django_db(transaction=True)
async def test_a_reviewed_step_handed_in_as_a_pipe_is_refused_without_waiting(
    project_dir, monkeypatch, tmp_path
):
    # A pipe is refused at hand-in like a folder (issue 9); the payload tests above cover a
    # pipe swapped in between the hand-in check and the review.
    from channels.db import database_sync_to_async

    log = tmp_path / "reviews"
    monkeypatch.setenv("FAKE_REVIEW_LOG", str(log))
    monkeypatch.setenv("FAKE_REVIEW", "pass")
    write_job(project_dir, "gated", GATE_JOB, ["draft", "pages", "final"])
    os.mkfifo(project_dir / "draft.md")
    project, agent = await database_sync_to_async(start_session)(project_dir, "gated")

    with never_blocks_on(project_dir / "draft.md"), pytest.raises(InvalidInput) as info:
        await step_finish_gated(
            project=project, agent=agent, gate=command_gate(), outputs={"draft.md": "draft.md"}
        )

    assert str(info.value) == (
        "Output 'draft.md': 'draft.md' is a named pipe; outputs must be files"
    )
    assert list(log.glob("call-*.json")) == []
