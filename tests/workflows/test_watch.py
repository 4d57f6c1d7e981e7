"""Watched looks (``workflows.watch``): asking git only about the paths inotify saw touched gives
exactly what a whole look gives, and every case the watch cannot vouch for falls back to one.

Each case takes a watched snapshot of a real repository, changes it, then compares twice from
that snapshot: a whole look (``changes_since``) and a watched one (``changes_and_snapshot``
with ``watched=True``). Both must agree, and so must the next snapshots they start from.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.step_files import git, write
from workflows import changes, watch
from workflows.changes import changes_and_snapshot, changes_since, snapshot_take

pytestmark = [
    pytest.mark.skipif(shutil.which("git") is None, reason="needs the git binary"),
    pytest.mark.skipif(
        not sys.platform.startswith("linux") or watch.INotify is None, reason="inotify is Linux's"
    ),
]


@pytest.fixture(autouse=True)
def _fresh_watches():
    watch.forget()
    yield
    watch.forget()


@pytest.fixture
def whole_looks(monkeypatch) -> list[int]:
    """How many times git status looked at the whole work tree (the real one runs)."""
    calls: list[int] = []
    real = changes._git_status

    def counted(git_: changes.Git) -> changes._Status:
        calls.append(1)
        return real(git_)

    monkeypatch.setattr(changes, "_git_status", counted)
    return calls


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    for i in range(12):
        write(root, f"src/{i % 3}/file_{i}.txt", f"file {i}\n")
    write(root, "notes.md", "notes v1\n")
    write(root, "run.sh", "echo hi\n")
    write(root, ".gitignore", "ignored/\n*.log\n.deepwork/tmp/\n")
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "start")
    write(root, "notes.md", "dirty before the step\n")  # tracked, dirty at the start
    write(root, "scratch.txt", "untracked before\n")  # untracked at the start
    write(root, "src/0/file_0.txt", "staged before\n")
    git(root, "add", "src/0/file_0.txt")  # staged at the start
    return root


def _look_both_ways(root: Path, start: changes.Snapshot, whole_looks: list[int]):
    """(whole look's result, watched look's result, whether the watched look looked at the
    whole tree, the next snapshot of each)."""
    whole = changes_since(root=root, snapshot=start)
    whole_next = snapshot_take(root=root)
    before = len(whole_looks)
    watched, watched_next = changes_and_snapshot(root=root, snapshot=start, watched=True)
    return whole, watched, len(whole_looks) > before, whole_next, watched_next


def _edits(root: Path) -> None:
    write(root, "src/1/file_1.txt", "edited\n")
    write(root, "brand_new.txt", "new\n")
    (root / "src/2/file_2.txt").unlink()
    write(root, "made/deep/inside.txt", "in a new folder\n")
    write(root, "ignored/skip.txt", "ignored\n")
    write(root, "debug.log", "ignored too\n")
    write(root, "notes.md", "edited again during the step\n")
    (root / "scratch.txt").unlink()
    write(root, ".deepwork/tmp/scratch", "the server's scratch\n")


def _reverted(root: Path) -> None:
    write(root, "notes.md", "notes v1\n")  # back to HEAD's content
    write(root, "src/0/file_0.txt", "file 0\n")  # staged change undone on disk only


def _same_content_rewritten(root: Path) -> None:
    write(root, "src/1/file_4.txt", "file 4\n")


def _mode_changed(root: Path) -> None:
    os.chmod(root / "run.sh", 0o755)


def _renamed_file(root: Path) -> None:
    (root / "src/1/file_7.txt").rename(root / "src/1/renamed.txt")


def _staged_file_rewritten(root: Path) -> None:
    write(root, "src/0/file_0.txt", "staged before\n")  # as staged: still dirty against HEAD


def _folder_moved_in(root: Path) -> None:
    write(root.parent, "outside/inner/a.txt", "a\n")
    (root.parent / "outside").rename(root / "moved_in")  # its folders were never watched


def _folder_removed(root: Path) -> None:
    shutil.rmtree(root / "src/2")


def _staged(root: Path) -> None:
    write(root, "src/1/file_1.txt", "edited and staged\n")
    git(root, "add", "src/1/file_1.txt")


def _committed(root: Path) -> None:
    write(root, "committed.txt", "c\n")
    git(root, "add", "committed.txt")
    git(root, "commit", "-q", "-m", "during the step")


def _ignore_rules_changed(root: Path) -> None:
    write(root, ".gitignore", "*.log\n.deepwork/tmp/\n")  # ignored/ now counts
    write(root, "ignored/now_seen.txt", "x\n")


def _folder_moved(root: Path) -> None:
    (root / "src/1").rename(root / "src/one")


def _nested_repository(root: Path) -> None:
    write(root, "vendor/lib/a.txt", "a\n")
    git(root / "vendor/lib", "init", "-q")


def _branch_switched(root: Path) -> None:
    git(root, "stash", "-q", "--include-untracked")
    git(root, "checkout", "-q", "-b", "other")
    write(root, "on_other.txt", "o\n")


# (changes, whether the watched look may ask git about the touched paths alone)
CASES: dict[str, tuple[Callable[[Path], None], bool]] = {
    "edits, new files and folders, deletions, ignored files": (_edits, True),
    "dirty files put back as they were": (_reverted, True),
    "a file rewritten with the same content": (_same_content_rewritten, True),
    "a file made executable": (_mode_changed, True),
    "a file renamed": (_renamed_file, True),
    "a folder removed": (_folder_removed, True),
    "a staged file rewritten as staged": (_staged_file_rewritten, True),
    "a change staged": (_staged, False),
    "a commit": (_committed, False),
    "ignore rules changed": (_ignore_rules_changed, False),
    "a folder moved": (_folder_moved, False),
    "a folder moved in from outside": (_folder_moved_in, False),
    "a repository made inside the project": (_nested_repository, False),
    "another branch checked out": (_branch_switched, False),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_watched_look_finds_exactly_what_a_whole_look_finds(repo, whole_looks, case):
    change, partial = CASES[case]
    start = snapshot_take(root=repo, watched=True)
    assert start.watch is not None
    change(repo)
    whole, watched, looked_at_all, whole_next, watched_next = _look_both_ways(
        repo, start, whole_looks
    )
    assert watched == whole
    assert looked_at_all is not partial
    assert dict(watched_next.files) == dict(whole_next.files)
    assert (watched_next.head, watched_next.branch) == (whole_next.head, whole_next.branch)


def test_each_change_counts_once_across_watched_looks(repo, whole_looks):
    first = snapshot_take(root=repo, watched=True)
    write(repo, "one.txt", "1\n")
    result, second = changes_and_snapshot(root=repo, snapshot=first, watched=True)
    assert result.added == ["one.txt"]
    write(repo, "two.txt", "2\n")  # right after the look
    write(repo, "one.txt", "1, edited\n")
    result, third = changes_and_snapshot(root=repo, snapshot=second, watched=True)
    assert (result.added, result.modified) == (["two.txt"], ["one.txt"])
    result, _ = changes_and_snapshot(root=repo, snapshot=third, watched=True)
    assert (result.added, result.modified, result.deleted) == ([], [], [])
    assert len(whole_looks) == 1  # the first snapshot's only


def test_a_snapshot_of_another_watch_gets_a_whole_look(repo, whole_looks):
    start = snapshot_take(root=repo, watched=True)
    watch.forget(repo)  # as another process, or this one after a restart
    write(repo, "later.txt", "x\n")
    before = len(whole_looks)
    result, _ = changes_and_snapshot(root=repo, snapshot=start, watched=True)
    assert result == changes_since(root=repo, snapshot=start)
    assert result.added == ["later.txt"]
    assert len(whole_looks) > before


# --- Where the watch is unavailable, or stops counting --------------------------------------------


def _whole_look_is_exact(repo: Path, whole_looks: list[int]) -> None:
    start = snapshot_take(root=repo, watched=True)
    assert start.watch is None
    _edits(repo)
    before = len(whole_looks)
    result, after = changes_and_snapshot(root=repo, snapshot=start, watched=True)
    assert len(whole_looks) > before
    assert result == changes_since(root=repo, snapshot=start)
    assert result.added == ["brand_new.txt", "made/deep/inside.txt"]
    assert result.deleted == ["scratch.txt", "src/2/file_2.txt"]
    assert result.modified == ["notes.md", "src/1/file_1.txt"]
    assert after.watch is None


def test_with_the_watch_off_every_look_is_whole_and_exact(repo, whole_looks, monkeypatch):
    monkeypatch.setenv("DEEPWORK_FILE_WATCH", "off")
    _whole_look_is_exact(repo, whole_looks)


def test_past_the_folder_limit_every_look_is_whole_and_exact(repo, whole_looks, monkeypatch):
    monkeypatch.setattr(watch, "MAX_FOLDERS", 2)  # as the kernel's watch limit would
    with pytest.raises(watch.Unavailable, match="more than 2 folders"):
        watch.Tree(repo)
    _whole_look_is_exact(repo, whole_looks)


def test_on_a_file_system_changed_from_elsewhere_every_look_is_whole(
    repo, whole_looks, monkeypatch
):
    monkeypatch.setattr(watch, "LOCAL_FILE_SYSTEMS", frozenset())
    with pytest.raises(watch.Unavailable, match="file system, where changes made elsewhere"):
        watch.Tree(repo)
    _whole_look_is_exact(repo, whole_looks)


def test_a_repository_inside_the_project_is_not_watched(repo, whole_looks):
    git(repo, "init", "-q", "inner")
    with pytest.raises(watch.Unavailable, match="another repository"):
        watch.Tree(repo)
    _whole_look_is_exact(repo, whole_looks)


def test_an_overflowed_event_queue_makes_the_next_look_whole_and_exact(
    repo, whole_looks, monkeypatch
):
    queued = int(Path("/proc/sys/fs/inotify/max_queued_events").read_text())
    if queued > 50_000:
        pytest.skip(f"fs.inotify.max_queued_events is {queued}: too many files to overflow it")
    # Neither limit on touched paths may hide the overflow: only the lost events tell.
    monkeypatch.setattr(watch, "MAX_CHANGED", 10**9)
    monkeypatch.setattr(changes, "_MAX_ASKED", 10**9)
    flood = repo / "flood"
    flood.mkdir()  # watched from the start, so each file made in it queues its own events
    start = snapshot_take(root=repo, watched=True)
    assert start.watch is not None
    # Each new file queues at least a create and a close: more than the queue holds.
    for i in range(queued // 2 + 100):
        (flood / f"f{i}").write_bytes(b"")
    write(repo, "src/1/file_1.txt", "edited\n")
    before = len(whole_looks)
    result, after = changes_and_snapshot(root=repo, snapshot=start, watched=True)
    assert len(whole_looks) > before
    assert result == changes_since(root=repo, snapshot=start)
    assert len(result.added) == queued // 2 + 100
    assert result.modified == ["src/1/file_1.txt"]
    # The watch started over: the next look is a watched one again.
    assert after.watch is not None
    write(repo, "again.txt", "a\n")
    before = len(whole_looks)
    result, _ = changes_and_snapshot(root=repo, snapshot=after, watched=True)
    assert result.added == ["again.txt"]
    assert len(whole_looks) == before


def test_too_many_paths_touched_make_the_look_whole(repo, whole_looks, monkeypatch):
    monkeypatch.setattr(watch, "MAX_CHANGED", 5)
    start = snapshot_take(root=repo, watched=True)
    for i in range(8):
        write(repo, f"many/{i}.txt", "x\n")
    before = len(whole_looks)
    result, _ = changes_and_snapshot(root=repo, snapshot=start, watched=True)
    assert len(whole_looks) > before
    assert result == changes_since(root=repo, snapshot=start)
    assert len(result.added) == 8
