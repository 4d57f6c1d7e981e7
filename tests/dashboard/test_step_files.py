"""The session page shows each step run's files changed (real git repository, real database)."""

from __future__ import annotations

import html as htmllib
import re
from pathlib import Path

import pytest

from tests.support.step_files import make_repository, settle, write
from workflows.models import StepRun

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_session_page_lists_the_files_each_step_changed(watching, driver, project):
    root = Path(project.root_path)
    make_repository(root)
    session = driver.start()
    settle()
    write(root, "notes.md", "new notes\n")
    write(root, "sources/one.txt", "one\n")
    (root / "extra1.md").unlink()
    driver.finish({"notes.md": "notes.md"})
    settle()
    StepRun.objects.filter(step_id="part_b").update(
        files_status=StepRun.FilesStatus.UNKNOWN, files_warnings=["git said no"]
    )

    html = watching.get(f"/sessions/{session.session_id}/").content.decode()
    runs = dict(
        re.findall(r'<article [^>]*data-step-id="([^"]+)"[^>]*>(.*?)</article>', html, re.S)
    )
    status = {
        step: re.search(r'data-testid="run-files" data-files-status="(\w+)"', block)
        for step, block in runs.items()
    }
    assert {step: found.group(1) for step, found in status.items() if found} == {
        "gather": "recorded",
        "part_a": "pending",
        "part_b": "unknown",
    }
    listed = re.findall(
        r'data-testid="file-changed" data-change="(\w+)">.*?<code>(.*?)</code>', runs["gather"]
    )
    assert listed == [
        ("added", "sources/one.txt"),
        ("modified", "notes.md"),
        ("deleted", "extra1.md"),
    ]
    warnings = re.findall(r'data-testid="files-warning">(.*?)</p>', runs["part_b"])
    assert [htmllib.unescape(w) for w in warnings] == ["git said no"]
    assert "Listed when the step finishes." in runs["part_a"]
