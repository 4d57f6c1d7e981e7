"""``changes_and_snapshot`` and the reuse of recorded file states, in real temporary git
repositories and plain folders."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.support.step_files import git, make_repository, write
from workflows import changes
from workflows.changes import changes_and_snapshot, changes_since, snapshot_take

needs_git = pytest.mark.skipif(
    subprocess.run(["git", "--version"], capture_output=True).returncode != 0,
    reason="git is not installed",
)


def lists(found: changes.FilesChanged) -> tuple[list[str], list[str], list[str]]:
    return found.added, found.modified, found.deleted


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    write(root, "kept.txt", "kept\n")
    write(root, "edit_me.txt", "v1\n")
    write(root, "doomed.txt", "bye\n")
    make_repository(root)
    write(root, "dirty.txt", "untracked before\n")
    return root


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    root = tmp_path / "folder"
    write(root, "kept.txt", "kept\n")
    write(root, "edit_me.txt", "v1\n")
    write(root, "doomed.txt", "bye\n")
    return root


@pytest.mark.parametrize("kind", [pytest.param("git", marks=needs_git), "tree"])
def test_consecutive_looks_split_the_changes_without_losing_or_repeating_any(kind, repo, folder):
    root = repo if kind == "git" else folder
    first = snapshot_take(root=root)
    assert first.kind == kind
    write(root, "edit_me.txt", "v2\n")
    write(root, "new.txt", "new\n")
    found, second = changes_and_snapshot(root=root, snapshot=first)
    assert lists(found) == (["new.txt"], ["edit_me.txt"], [])
    assert second.kind == kind

    (root / "doomed.txt").unlink()
    write(root, "new.txt", "new, edited\n")
    found, third = changes_and_snapshot(root=root, snapshot=second)
    assert lists(found) == ([], ["new.txt"], ["doomed.txt"])
    # Nothing since: an empty look, and the same answer changes_since gives.
    found, _ = changes_and_snapshot(root=root, snapshot=third)
    assert lists(found) == ([], [], [])
    assert lists(changes_since(root=root, snapshot=third)) == ([], [], [])


@needs_git
def test_a_commit_between_two_looks_belongs_to_the_first(repo):
    first = snapshot_take(root=repo)
    write(repo, "committed.txt", "c\n")
    git(repo, "add", "committed.txt")
    git(repo, "commit", "-q", "-m", "c")
    found, second = changes_and_snapshot(root=repo, snapshot=first)
    assert lists(found) == (["committed.txt"], [], [])
    assert second.head == git(repo, "rev-parse", "HEAD").strip()
    assert lists(changes_since(root=repo, snapshot=second)) == ([], [], [])


def age(path: Path, seconds: int) -> None:
    info = path.stat()
    os.utime(path, ns=(info.st_atime_ns, info.st_mtime_ns - seconds * 1_000_000_000))


@pytest.mark.parametrize("kind", [pytest.param("git", marks=needs_git), "tree"])
def test_a_file_written_just_before_the_snapshot_is_read_again_even_if_its_time_is_put_back(
    kind, repo, folder
):
    root = repo if kind == "git" else folder
    target = root / "dirty.txt"
    write(root, "dirty.txt", "AAAA\n")  # just written: its time cannot vouch for it yet
    before = snapshot_take(root=root)
    stamp = target.stat().st_mtime_ns
    target.write_text("BBBB\n")  # same size
    os.utime(target, ns=(stamp, stamp))  # and the same time as recorded
    found = changes_since(root=root, snapshot=before)
    assert found.modified == ["dirty.txt"]


@pytest.mark.parametrize("kind", [pytest.param("git", marks=needs_git), "tree"])
def test_an_old_file_whose_size_and_time_are_unchanged_is_not_read_again(
    kind, repo, folder, monkeypatch
):
    root = repo if kind == "git" else folder
    write(root, "dirty.txt", "AAAA\n")
    age(root / "dirty.txt", 60)
    before = snapshot_take(root=root)
    reads: list[str] = []
    opened = changes.open_regular_file

    def counting(name, **kwargs):
        reads.append(name)
        return opened(name, **kwargs)

    monkeypatch.setattr(changes, "open_regular_file", counting)
    assert lists(changes_since(root=root, snapshot=before)) == ([], [], [])
    assert "dirty.txt" not in reads
    # Touched with new bytes: its time moved, so it is read and reported.
    write(root, "dirty.txt", "BBBB\n")
    assert changes_since(root=root, snapshot=before).modified == ["dirty.txt"]
    assert "dirty.txt" in reads


def test_a_snapshot_stored_before_taken_at_ns_existed_still_compares(folder):
    before = snapshot_take(root=folder).to_json()
    del before["taken_at_ns"]
    write(folder, "edit_me.txt", "v2\n")
    restored = changes.Snapshot.from_json(before)
    assert restored.taken_at_ns is None
    assert lists(changes_since(root=folder, snapshot=restored)) == ([], ["edit_me.txt"], [])


def test_taken_at_ns_must_be_an_integer(folder):
    data = snapshot_take(root=folder).to_json()
    data["taken_at_ns"] = "yesterday"
    with pytest.raises(ValueError, match="snapshot.taken_at_ns must be an integer or null"):
        changes.Snapshot.from_json(data)
