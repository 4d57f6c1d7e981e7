"""Files changed during a task: real git repositories and plain folders, the real git binary."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from workflows import changes
from workflows.changes import FilesChanged, Snapshot, changes_since, snapshot_take

GIT = shutil.which("git")
needs_git = pytest.mark.skipif(GIT is None, reason="needs the git binary")


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=T", "-c", "user.email=t@example.com", *args],
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout


def write(root: Path, relative: str, text: str) -> None:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    for name in ("keep.txt", "commit_me.txt", "stage_me.txt", "edit_me.txt", "old name.txt"):
        write(root, name, f"{name} v1\n")
    write(root, "remove_me.txt", "bye\n")
    write(root, "dirty_before.txt", "v1\n")
    write(root, ".gitignore", "ignored/\n*.log\n")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "start")
    return root


def assert_changes(
    result: FilesChanged, *, added: list[str], modified: list[str], deleted: list[str]
) -> None:
    assert (result.added, result.modified, result.deleted) == (added, modified, deleted)


@needs_git
def test_a_task_reports_commits_staged_unstaged_untracked_renames_and_deletions(repo, tmp_path):
    write(repo, "dirty_before.txt", "v2, edited before the task\n")
    write(repo, "untracked_before.txt", "already here\n")
    snapshot = snapshot_take(root=repo)
    assert snapshot.kind == "git"
    assert snapshot.branch == "main"
    assert snapshot.head == git(repo, "rev-parse", "HEAD").strip()
    assert sorted(snapshot.files) == ["dirty_before.txt", "untracked_before.txt"]

    write(repo, "commit_me.txt", "committed during the task\n")
    write(repo, "new_committed.txt", "new\n")
    git(repo, "add", "commit_me.txt", "new_committed.txt")
    git(repo, "commit", "-q", "-m", "during the task")
    write(repo, "stage_me.txt", "staged\n")
    git(repo, "add", "stage_me.txt")
    write(repo, "edit_me.txt", "unstaged\n")
    write(repo, "brand new.txt", "untracked\n")
    git(repo, "mv", "old name.txt", "new name.txt")
    git(repo, "rm", "-q", "remove_me.txt")
    write(repo, "ignored/cache.bin", "ignored\n")
    write(repo, "debug.log", "ignored\n")

    result = changes_since(root=repo, snapshot=snapshot)

    assert_changes(
        result,
        added=["brand new.txt", "new name.txt", "new_committed.txt"],
        modified=["commit_me.txt", "edit_me.txt", "stage_me.txt"],
        deleted=["old name.txt", "remove_me.txt"],
    )
    assert result.warnings == []
    assert result.paths() == sorted([*result.added, *result.modified, *result.deleted])

    # The file that was dirty before the task, touched again during it, is the task's work.
    write(repo, "dirty_before.txt", "v3, edited during the task\n")
    write(repo, "untracked_before.txt", "changed too\n")
    again = changes_since(root=repo, snapshot=snapshot)
    assert again.modified == [
        "commit_me.txt",
        "dirty_before.txt",
        "edit_me.txt",
        "stage_me.txt",
        "untracked_before.txt",
    ]


@needs_git
def test_without_a_commit_the_same_changes_come_from_the_working_tree(repo):
    write(repo, "dirty_before.txt", "v2\n")
    write(repo, "untracked_before.txt", "here\n")
    snapshot = snapshot_take(root=repo)

    write(repo, "stage_me.txt", "staged\n")
    git(repo, "add", "stage_me.txt")
    write(repo, "edit_me.txt", "unstaged\n")
    write(repo, "brand new.txt", "untracked\n")
    write(repo, "staged new.txt", "staged\n")
    git(repo, "add", "staged new.txt")
    git(repo, "mv", "old name.txt", "new name.txt")
    os.rename(repo / "keep.txt", repo / "kept elsewhere.txt")  # a rename git was not told of
    (repo / "remove_me.txt").unlink()
    git(repo, "rm", "-q", "--cached", "commit_me.txt")  # dropped from git, still on disk
    write(repo, "fleeting.txt", "x\n")
    git(repo, "add", "fleeting.txt")
    (repo / "fleeting.txt").unlink()  # staged as new, then gone: it never existed

    assert_changes(
        changes_since(root=repo, snapshot=snapshot),
        added=["brand new.txt", "kept elsewhere.txt", "new name.txt", "staged new.txt"],
        modified=["commit_me.txt", "edit_me.txt", "stage_me.txt"],
        deleted=["keep.txt", "old name.txt", "remove_me.txt"],
    )


@needs_git
def test_pre_existing_changes_left_alone_are_not_reported_even_when_committed(repo):
    write(repo, "dirty_before.txt", "v2\n")
    write(repo, "untracked_before.txt", "here\n")
    (repo / "remove_me.txt").unlink()
    snapshot = snapshot_take(root=repo)
    assert snapshot.files["remove_me.txt"] is None

    assert_changes(changes_since(root=repo, snapshot=snapshot), added=[], modified=[], deleted=[])

    # Committing what was already there does not change the files: still nothing to report.
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "commit the old work")
    assert_changes(changes_since(root=repo, snapshot=snapshot), added=[], modified=[], deleted=[])

    # Same bytes written again (a new mtime) is no change either; a deleted file coming back is.
    write(repo, "dirty_before.txt", "v2\n")
    write(repo, "remove_me.txt", "back\n")
    assert_changes(
        changes_since(root=repo, snapshot=snapshot),
        added=["remove_me.txt"],
        modified=[],
        deleted=[],
    )


@needs_git
def test_a_dirty_file_restored_to_its_committed_content_is_modified(repo):
    write(repo, "dirty_before.txt", "v2\n")
    snapshot = snapshot_take(root=repo)
    git(repo, "checkout", "--", "dirty_before.txt")
    assert_changes(
        changes_since(root=repo, snapshot=snapshot),
        added=[],
        modified=["dirty_before.txt"],
        deleted=[],
    )


@needs_git
def test_a_file_added_and_deleted_during_the_task_nets_out(repo):
    snapshot = snapshot_take(root=repo)
    write(repo, "temp.txt", "x\n")
    git(repo, "add", "temp.txt")
    git(repo, "commit", "-q", "-m", "add temp")
    git(repo, "rm", "-q", "temp.txt")
    git(repo, "commit", "-q", "-m", "remove temp")
    assert_changes(changes_since(root=repo, snapshot=snapshot), added=[], modified=[], deleted=[])


@needs_git
def test_paths_with_spaces_newlines_and_unicode(repo):
    write(repo, "dossier café/ünïcode ✓.txt", "v1\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "unicode")
    write(repo, "pre existing ✓.txt", "before\n")
    snapshot = snapshot_take(root=repo)
    assert "pre existing ✓.txt" in snapshot.files

    write(repo, "dossier café/ünïcode ✓.txt", "v2\n")
    write(repo, "line\nbreak.txt", "odd\n")
    write(repo, "日本語/ファイル.md", "new\n")
    git(repo, "mv", "dossier café/ünïcode ✓.txt", "dossier café/renamé.txt")

    assert_changes(
        changes_since(root=repo, snapshot=snapshot),
        added=["dossier café/renamé.txt", "line\nbreak.txt", "日本語/ファイル.md"],
        modified=[],
        deleted=["dossier café/ünïcode ✓.txt"],
    )


@needs_git
def test_a_file_name_that_is_not_utf8_is_compared_and_shown_escaped(repo):
    latin = os.fsdecode(b"caf\xe9.txt")
    (repo / latin).write_bytes(b"before\n")
    snapshot = snapshot_take(root=repo)
    assert list(snapshot.files) == [latin]
    stored = json.dumps(snapshot.to_json(), ensure_ascii=False).encode("utf-8")  # no surrogate
    restored = Snapshot.from_json(json.loads(stored))
    assert restored == snapshot

    assert changes_since(root=repo, snapshot=restored).paths() == []
    (repo / latin).write_bytes(b"after\n")
    (repo / os.fsdecode(b"new\xff.txt")).write_bytes(b"x")
    assert_changes(
        changes_since(root=repo, snapshot=restored),
        added=["new\\xff.txt"],
        modified=["caf\\xe9.txt"],
        deleted=[],
    )


@needs_git
def test_a_symlink_is_reported_by_its_own_path_and_never_followed(repo, tmp_path):
    outside = tmp_path / "outside.txt"
    outside.write_text("secret v1\n")
    os.symlink(outside, repo / "link.txt")
    snapshot = snapshot_take(root=repo)
    assert snapshot.files["link.txt"] is not None
    assert snapshot.files["link.txt"].digest.startswith("symlink:")

    outside.write_text("secret v2, outside the project\n")
    assert_changes(changes_since(root=repo, snapshot=snapshot), added=[], modified=[], deleted=[])

    (repo / "link.txt").unlink()
    os.symlink(repo / "keep.txt", repo / "link.txt")
    assert_changes(
        changes_since(root=repo, snapshot=snapshot), added=[], modified=["link.txt"], deleted=[]
    )


@needs_git
def test_git_runs_in_the_project_root_not_in_the_process_cwd(repo, tmp_path, monkeypatch):
    other = tmp_path / "other"
    other.mkdir()
    git(other, "init", "-q", "-b", "elsewhere")
    write(other, "other.txt", "x\n")
    git(other, "add", "-A")
    git(other, "commit", "-q", "-m", "other")
    write(other, "other_untracked.txt", "x\n")
    monkeypatch.chdir(other)
    monkeypatch.setenv("GIT_DIR", str(other / ".git"))

    snapshot = snapshot_take(root=repo)
    assert snapshot.branch == "main"
    assert snapshot.files == {}
    write(repo, "mine.txt", "y\n")
    write(other, "other_more.txt", "x\n")

    assert_changes(
        changes_since(root=repo, snapshot=snapshot), added=["mine.txt"], modified=[], deleted=[]
    )


@needs_git
def test_a_project_in_a_subfolder_of_the_repository_sees_only_its_own_files(repo):
    write(repo, "sub/project/a.txt", "a\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "sub")
    write(repo, "sub/project/pre.txt", "before\n")
    root = repo / "sub" / "project"
    snapshot = snapshot_take(root=root)
    assert list(snapshot.files) == ["pre.txt"]

    write(repo, "sub/project/a.txt", "a2\n")
    write(repo, "sub/project/b.txt", "b\n")
    write(repo, "edit_me.txt", "outside the project\n")
    assert_changes(
        changes_since(root=root, snapshot=snapshot),
        added=["b.txt"],
        modified=["a.txt"],
        deleted=[],
    )


@needs_git
def test_a_new_nested_repository_is_named_in_a_warning(repo):
    snapshot = snapshot_take(root=repo)
    (repo / "vendor" / "lib").mkdir(parents=True)
    git(repo / "vendor" / "lib", "init", "-q")
    write(repo, "vendor/lib/code.py", "x\n")
    result = changes_since(root=repo, snapshot=snapshot)
    assert result.paths() == []
    assert result.warnings == ["'vendor/lib/' is a nested git repository; its files are not listed"]


@needs_git
def test_detached_head_is_compared_with_its_start_commit(repo):
    write(repo, "edit_me.txt", "v2\n")
    git(repo, "commit", "-q", "-am", "second")
    git(repo, "checkout", "-q", "--detach", "HEAD~1")
    snapshot = snapshot_take(root=repo)
    assert snapshot.branch is None
    assert snapshot.head == git(repo, "rev-parse", "HEAD").strip()

    write(repo, "keep.txt", "changed\n")
    git(repo, "commit", "-q", "-am", "on a detached head")
    write(repo, "loose.txt", "new\n")

    result = changes_since(root=repo, snapshot=snapshot)
    assert_changes(result, added=["loose.txt"], modified=["keep.txt"], deleted=[])
    assert result.warnings == []


@needs_git
def test_switching_branch_during_the_task_is_warned(repo):
    snapshot = snapshot_take(root=repo)
    git(repo, "checkout", "-q", "-b", "feature")
    write(repo, "keep.txt", "feature\n")
    git(repo, "commit", "-q", "-am", "feature work")
    result = changes_since(root=repo, snapshot=snapshot)
    assert result.modified == ["keep.txt"]
    assert result.warnings == [
        "the checkout moved from branch 'main' to branch 'feature' during the task; the "
        "differences between them are counted as the task's changes"
    ]


@needs_git
def test_a_start_commit_pruned_away_degrades_to_uncommitted_changes_with_a_warning(repo):
    first = git(repo, "rev-parse", "HEAD").strip()
    write(repo, "edit_me.txt", "v2\n")
    git(repo, "commit", "-q", "-am", "to be thrown away")
    write(repo, "dirty_before.txt", "dirty\n")
    snapshot = snapshot_take(root=repo)
    start = snapshot.head
    assert start is not None
    assert start != first

    git(repo, "reset", "-q", "--hard", first)
    write(repo, "dirty_before.txt", "dirty\n")  # the reset wiped it; the same bytes again
    git(repo, "reflog", "expire", "--expire=now", "--all")
    git(repo, "gc", "-q", "--prune=now")
    with pytest.raises(subprocess.CalledProcessError):
        git(repo, "cat-file", "-e", f"{start}^{{commit}}")
    write(repo, "keep.txt", "after the rewrite\n")
    write(repo, "fresh.txt", "new\n")

    result = changes_since(root=repo, snapshot=snapshot)
    assert_changes(result, added=["fresh.txt"], modified=["keep.txt"], deleted=[])
    assert result.warnings == [
        f"the start commit {start[:12]} is no longer in the repository (rebased away or pruned):"
        " changes committed during the task cannot be listed, only those not committed"
    ]


@needs_git
def test_a_snapshot_naming_an_unknown_commit_degrades_with_a_warning(repo):
    snapshot = Snapshot(kind="git", head="0" * 40, branch="main")
    write(repo, "edit_me.txt", "v2\n")
    result = changes_since(root=repo, snapshot=snapshot)
    assert result.modified == ["edit_me.txt"]
    assert result.warnings[0].startswith("the start commit 000000000000 is no longer")


@needs_git
def test_a_repository_without_commits_counts_everything_new(tmp_path):
    root = tmp_path / "fresh"
    root.mkdir()
    git(root, "init", "-q")
    write(root, "before.txt", "x\n")
    snapshot = snapshot_take(root=root)
    assert snapshot.head is None
    assert list(snapshot.files) == ["before.txt"]

    write(root, "a.txt", "a\n")
    git(root, "add", "a.txt")
    git(root, "commit", "-q", "-m", "first")
    write(root, "b.txt", "b\n")
    assert_changes(
        changes_since(root=root, snapshot=snapshot),
        added=["a.txt", "b.txt"],
        modified=[],
        deleted=[],
    )


@needs_git
def test_without_git_on_path_a_git_project_is_snapshotted_by_content(repo, tmp_path, monkeypatch):
    empty = tmp_path / "no-git-here"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))

    snapshot = snapshot_take(root=repo)
    assert snapshot.kind == "tree"
    assert ".git/HEAD" not in snapshot.files
    assert "keep.txt" in snapshot.files
    assert snapshot.warnings == (
        "git is not installed (no git executable on PATH); the project's files were "
        "snapshotted without git",
    )
    write(repo, "keep.txt", "changed\n")
    (repo / "remove_me.txt").unlink()
    write(repo, "new.txt", "n\n")
    result = changes_since(root=repo, snapshot=snapshot)
    assert_changes(result, added=["new.txt"], modified=["keep.txt"], deleted=["remove_me.txt"])
    assert result.warnings == list(snapshot.warnings)


@needs_git
def test_git_vanishing_after_the_snapshot_compares_what_was_recorded(repo, tmp_path, monkeypatch):
    write(repo, "dirty_before.txt", "v2\n")
    write(repo, "untracked_before.txt", "x\n")
    snapshot = snapshot_take(root=repo)
    write(repo, "dirty_before.txt", "v3\n")
    write(repo, "keep.txt", "unknowable without git\n")
    empty = tmp_path / "no-git-here"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))

    result = changes_since(root=repo, snapshot=snapshot)
    assert_changes(result, added=[], modified=["dirty_before.txt"], deleted=[])
    assert result.warnings == [
        "git is not installed (no git executable on PATH); only the files that were already "
        "changed at the start could be compared"
    ]


@needs_git
def test_a_git_command_that_hangs_times_out_with_a_warning(repo, monkeypatch):
    # Git reads the excludes file while listing untracked files: a named pipe there blocks it
    # for real until the timeout kills it.
    exclude = repo / ".git" / "info" / "exclude"
    exclude.parent.mkdir(exist_ok=True)
    exclude.unlink(missing_ok=True)
    os.mkfifo(exclude)
    monkeypatch.setattr(changes, "GIT_TIMEOUT_SECONDS", 1.0)

    snapshot = snapshot_take(root=repo)

    assert snapshot.kind == "tree"
    assert snapshot.warnings == (
        "git status did not answer within 1 seconds; the project's files were snapshotted "
        "without git",
    )
    assert "keep.txt" in snapshot.files


@needs_git
def test_a_huge_change_set_is_capped_with_a_warning(repo, monkeypatch):
    monkeypatch.setattr(changes, "MAX_PATHS", 3)
    for n in range(5):
        write(repo, f"pre/{n}.txt", "x\n")
    snapshot = snapshot_take(root=repo)
    assert sorted(snapshot.files) == ["pre/0.txt", "pre/1.txt", "pre/2.txt"]
    assert snapshot.warnings == (
        "5 files were already changed or untracked at the start; only the first 3 are "
        "remembered, the others may be reported as changed",
    )
    for n in range(4):
        write(repo, f"new/{n}.txt", "x\n")
    result = changes_since(root=repo, snapshot=snapshot)
    assert result.added == ["new/0.txt", "new/1.txt", "new/2.txt"]
    assert result.warnings == [
        snapshot.warnings[0],
        "6 files changed; only the first 3 paths of each list are given",
    ]


@needs_git
def test_the_hashing_budget_falls_back_to_size_and_time_with_a_warning(repo, monkeypatch):
    monkeypatch.setattr(changes, "MAX_HASHED_BYTES", 10)
    write(repo, "big_before.txt", "more than ten bytes\n")
    snapshot = snapshot_take(root=repo)
    state = snapshot.files["big_before.txt"]
    assert state is not None
    assert state.digest is None
    assert snapshot.warnings == (
        "more than 10 bytes to hash: the remaining files are compared by size and modification "
        "time only",
    )
    assert changes_since(root=repo, snapshot=snapshot).modified == []
    write(repo, "big_before.txt", "a different, longer content\n")
    assert changes_since(root=repo, snapshot=snapshot).modified == ["big_before.txt"]


def test_a_folder_without_git_is_really_compared(tmp_path):
    root = tmp_path / "plain"
    write(root, "same.txt", "same\n")
    write(root, "edit.txt", "v1\n")
    write(root, "gone.txt", "bye\n")
    write(root, "deep/er/file name ✓.md", "v1\n")
    write(root, "node_modules/pkg/index.js", "heavy\n")
    write(root, ".deepwork/tmp/scratch.md", "scratch\n")
    write(root, ".deepwork/jobs/job.yml", "job\n")
    snapshot = snapshot_take(root=root)
    assert snapshot.kind == "tree"
    assert sorted(snapshot.files) == [
        ".deepwork/jobs/job.yml",
        "deep/er/file name ✓.md",
        "edit.txt",
        "gone.txt",
        "same.txt",
    ]
    assert snapshot.warnings == ()

    write(root, "edit.txt", "v2\n")
    write(root, "same.txt", "same\n")  # rewritten, same bytes
    (root / "gone.txt").unlink()
    write(root, "added.txt", "new\n")
    write(root, "deep/er/file name ✓.md", "v2\n")
    write(root, "node_modules/pkg/other.js", "heavy\n")
    write(root, ".deepwork/tmp/more.md", "scratch\n")
    os.symlink("/etc/passwd", root / "link")

    result = changes_since(root=root, snapshot=snapshot)
    assert_changes(
        result,
        added=["added.txt", "link"],
        modified=["deep/er/file name ✓.md", "edit.txt"],
        deleted=["gone.txt"],
    )
    assert result.warnings == []


def test_a_folder_over_the_file_cap_compares_the_first_files_with_a_warning(tmp_path, monkeypatch):
    monkeypatch.setattr(changes, "MAX_PATHS", 3)
    root = tmp_path / "plain"
    for name in ("a", "b", "c", "d", "e"):
        write(root, f"{name}.txt", name)
    snapshot = snapshot_take(root=root)
    assert sorted(snapshot.files) == ["a.txt", "b.txt", "c.txt"]
    assert snapshot.truncated_after == "c.txt"
    warning = "the project has more than 3 files: only the first 3 (up to 'c.txt') are compared"
    assert snapshot.warnings == (warning,)

    write(root, "b.txt", "changed")
    write(root, "e.txt", "changed past the cap")
    result = changes_since(root=root, snapshot=snapshot)
    assert_changes(result, added=[], modified=["b.txt"], deleted=[])
    assert result.warnings == [warning]


def test_a_named_pipe_in_the_tree_is_fingerprinted_without_being_opened(tmp_path):
    root = tmp_path / "plain"
    root.mkdir()
    os.mkfifo(root / "pipe")
    snapshot = snapshot_take(root=root)
    state = snapshot.files["pipe"]
    assert state is not None
    assert state.digest == "pipe"
    assert changes_since(root=root, snapshot=snapshot).paths() == []


def test_a_missing_project_folder_warns_instead_of_raising(tmp_path):
    root = tmp_path / "gone"
    snapshot = snapshot_take(root=root)
    assert snapshot.kind == "tree"
    assert snapshot.files == {}
    assert snapshot.warnings == (f"the project folder {root} is not a directory",)
    root.mkdir()
    write(root, "a.txt", "a")
    result = changes_since(root=root, snapshot=snapshot)
    assert result.added == ["a.txt"]


def test_a_relative_root_is_refused():
    with pytest.raises(ValueError, match="root must be an absolute path, not 'project'"):
        snapshot_take(root=Path("project"))


@needs_git
def test_snapshots_survive_a_json_round_trip(repo, tmp_path):
    write(repo, "dirty_before.txt", "v2 ✓\n")
    (repo / "remove_me.txt").unlink()
    git_snapshot = snapshot_take(root=repo)
    plain = tmp_path / "plain"
    write(plain, "a ✓.txt", "a")
    tree_snapshot = snapshot_take(root=plain)

    for snapshot in (git_snapshot, tree_snapshot):
        stored = json.loads(json.dumps(snapshot.to_json()))
        assert Snapshot.from_json(stored) == snapshot

    write(repo, "dirty_before.txt", "v3\n")
    restored = Snapshot.from_json(json.loads(json.dumps(git_snapshot.to_json())))
    assert changes_since(root=repo, snapshot=restored).modified == ["dirty_before.txt"]


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"version": 2}, "snapshot.version must be 1, not 2"),
        ({"version": 1, "kind": "svn"}, "snapshot.kind must be 'git' or 'tree', not 'svn'"),
        (
            {"version": 1, "kind": "git", "files": {"a": [1, 2]}, "warnings": []},
            "snapshot.files['a'] must be [size, mtime_ns, digest or null], not [1, 2]",
        ),
        (
            {"version": 1, "kind": "git", "head": "--output=/tmp/x", "files": {}, "warnings": []},
            "snapshot.head must be a commit id (40 or 64 hex digits), not '--output=/tmp/x'",
        ),
        (
            {"version": 1, "kind": "git", "files": {}, "warnings": "x"},
            "snapshot.warnings must be a list of strings",
        ),
        (
            {"version": 1, "kind": "tree", "files": {}, "raw_files": {"%%": None}, "warnings": []},
            "snapshot.raw_files['%%'] is not named in base64",
        ),
    ],
)
def test_a_malformed_stored_snapshot_is_refused_by_name(data, message):
    with pytest.raises(ValueError) as info:
        Snapshot.from_json(data)
    assert str(info.value) == message
