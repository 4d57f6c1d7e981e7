"""Changed-file detection on real git repositories (§5.3, plus untracked files as in 0.9.3)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from reviews.deepreview.changes import GitError, detect_base_ref, get_changed_files
from tests.reviews import commit_all, git, isolate_git, make_repo, write


@pytest.fixture(autouse=True)
def _isolated_git(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    isolate_git(monkeypatch, tmp_path)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = make_repo(tmp_path / "repo")
    write(root, "a.py")
    write(root, "b.py")
    write(root, "docs/guide.md")
    commit_all(root, "initial")
    return root


def test_a_clean_repository_has_no_changes(repo: Path) -> None:
    assert get_changed_files(repo) == []


def test_commits_on_a_branch_are_compared_with_the_merge_base_on_main(repo: Path) -> None:
    git(repo, "checkout", "-q", "-b", "feature")
    write(repo, "a.py", "changed on the branch\n")
    write(repo, "feature.py")
    commit_all(repo, "feature work")
    # Work that lands on main after the branch point is not part of this branch's changes.
    git(repo, "checkout", "-q", "main")
    write(repo, "b.py", "changed on main\n")
    commit_all(repo, "main work")
    git(repo, "checkout", "-q", "feature")

    assert detect_base_ref(repo) == "main"
    assert get_changed_files(repo) == ["a.py", "feature.py"]


def test_unstaged_staged_and_untracked_changes_are_all_included(repo: Path) -> None:
    write(repo, "a.py", "unstaged edit\n")
    write(repo, "staged.py")
    git(repo, "add", "staged.py")
    write(repo, "docs/new.md")  # untracked
    write(repo, ".gitignore", "*.log\nbuild/\n")  # untracked, and it hides the next two
    write(repo, "debug.log")
    write(repo, "build/out.py")

    assert get_changed_files(repo) == [".gitignore", "a.py", "docs/new.md", "staged.py"]


def test_results_are_sorted_and_unique(repo: Path) -> None:
    # Staged and then edited again: reported by both diffs, listed once.
    write(repo, "b.py", "first\n")
    git(repo, "add", "b.py")
    write(repo, "b.py", "second\n")
    write(repo, "0_first.py")

    assert get_changed_files(repo) == ["0_first.py", "b.py"]


def test_deleted_files_are_excluded(repo: Path) -> None:
    (repo / "a.py").unlink()
    git(repo, "rm", "-q", "b.py")
    write(repo, "docs/guide.md", "edited\n")

    assert get_changed_files(repo) == ["docs/guide.md"]


def test_renamed_files_are_listed_under_their_new_name(repo: Path) -> None:
    git(repo, "mv", "a.py", "renamed.py")

    assert get_changed_files(repo) == ["renamed.py"]


def test_unusual_file_names_arrive_unquoted(repo: Path) -> None:
    write(repo, "with space.py")
    write(repo, "ünïcode.py")

    assert get_changed_files(repo) == ["with space.py", "ünïcode.py"]


def test_master_is_the_fallback_base(tmp_path: Path) -> None:
    root = make_repo(tmp_path / "repo", branch="master")
    write(root, "a.py")
    commit_all(root)
    git(root, "checkout", "-q", "-b", "topic")
    write(root, "b.py")
    commit_all(root)

    assert detect_base_ref(root) == "master"
    assert get_changed_files(root) == ["b.py"]


def test_head_is_the_last_resort(tmp_path: Path) -> None:
    root = make_repo(tmp_path / "repo", branch="trunk")
    write(root, "a.py")
    commit_all(root)
    write(root, "b.py")
    commit_all(root)
    write(root, "a.py", "edited\n")

    assert detect_base_ref(root) == "HEAD"
    # Against HEAD only working-tree and staged changes count, not the commits themselves.
    assert get_changed_files(root) == ["a.py"]


def test_a_repository_without_commits_lists_staged_and_untracked_files(tmp_path: Path) -> None:
    root = make_repo(tmp_path / "repo")
    write(root, "staged.py")
    git(root, "add", "staged.py")
    write(root, "untracked.py")

    assert get_changed_files(root) == ["staged.py", "untracked.py"]


def test_not_a_repository_is_an_error(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()

    with pytest.raises(GitError) as excinfo:
        get_changed_files(plain)

    assert str(excinfo.value).startswith("git rev-parse failed: fatal: not a git repository")


def test_an_unknown_base_ref_names_the_ref_and_gits_message(repo: Path) -> None:
    with pytest.raises(GitError) as excinfo:
        get_changed_files(repo, base_ref="no-such-branch")

    message = str(excinfo.value)
    assert message.startswith("Failed to find merge-base with 'no-such-branch': ")
    assert "no-such-branch" in message.split(": ", 1)[1]


def test_paths_are_relative_to_a_project_in_a_subdirectory(repo: Path) -> None:
    project = repo / "services" / "api"
    write(project, "app.py")
    write(project, "pkg/models.py")
    commit_all(repo)
    write(project, "app.py", "edited\n")
    write(project, "pkg/new.py")
    write(repo, "a.py", "outside the project\n")

    assert get_changed_files(project) == ["app.py", "pkg/new.py"]


def test_the_review_scratch_directory_is_never_reported(repo: Path) -> None:
    write(repo, ".deepwork/tmp/review_instructions/x--a.py--0123456789ab.md")
    write(repo, ".deepwork/jobs/demo/job.yml")

    assert get_changed_files(repo) == [".deepwork/jobs/demo/job.yml"]


def test_the_process_working_directory_is_left_alone(repo: Path) -> None:
    before = os.getcwd()
    write(repo, "a.py", "edited\n")

    get_changed_files(repo)

    assert os.getcwd() == before
