"""Helpers for the tests of files changed per step run: real git repositories, and waiting for
the worker that records them (``workflows.services.step_changes``)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from workflows.services import step_changes


def git(root: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(root), "-c", "user.name=T", "-c", "user.email=t@example.com", *args],
        capture_output=True,
        text=True,
        check=True,
    ).stdout


def write(root: Path, name: str, text: str) -> None:
    path = root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def make_repository(root: Path) -> None:
    """``root`` as a git repository with everything in it committed (scratch ignored)."""
    write(root, ".gitignore", ".deepwork/tmp/\n")
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "initial")


def settle() -> None:
    """Wait for every look the worker has queued (snapshots and comparisons)."""
    assert step_changes.drain(timeout=60), "the step-files worker did not finish"
