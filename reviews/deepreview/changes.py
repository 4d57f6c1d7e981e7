"""Which files changed, according to local git (digest §5.3, plus 0.9.3's untracked files).

Git always runs with ``cwd=project_root``; the process working directory is never changed, so
concurrent calls for different projects cannot interfere.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

# Branches tried, in order, as the base a feature branch is compared with.
DEFAULT_BASE_BRANCHES = ("main", "master")

# The review pipeline's own scratch files (instruction files, pass markers) live here. They are
# untracked in most projects, and reviewing them would feed each run's output into the next.
SCRATCH_PREFIX = ".deepwork/tmp/"


class GitError(Exception):
    """Git could not say what changed; str() is the client-facing text."""


def _git(project_root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(
            ["git", *args],
            cwd=project_root,
            capture_output=True,
            text=True,
            encoding="utf-8",
            errors="surrogateescape",
            check=False,
        )
    except FileNotFoundError as exc:
        raise GitError("git executable not found") from exc
    except NotADirectoryError as exc:
        raise GitError("project root is not a directory") from exc


def _names(output: str) -> list[str]:
    # -z output: NUL-terminated raw paths, so unusual file names arrive unquoted.
    return [name for name in output.split("\0") if name]


def _verifies(project_root: Path, rev: str) -> bool:
    result = _git(project_root, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}")
    return result.returncode == 0


def _ensure_work_tree(project_root: Path) -> None:
    # Checked up front: outside a repository `git diff` falls back to --no-index mode and
    # prints its whole usage text, which makes a useless error message.
    result = _git(project_root, "rev-parse", "--is-inside-work-tree")
    if result.returncode != 0:
        raise GitError(f"git rev-parse failed: {result.stderr.strip()}")
    if result.stdout.strip() != "true":
        raise GitError("git rev-parse failed: not inside a git work tree")


def detect_base_ref(project_root: Path) -> str:
    for branch in DEFAULT_BASE_BRANCHES:
        if _verifies(project_root, branch):
            return branch
    return "HEAD"


def get_changed_files(project_root: Path, base_ref: str | None = None) -> list[str]:
    """Changed, staged and untracked files, relative to ``project_root``, sorted and unique.

    Deleted files are left out (``--diff-filter=ACMR``). Paths are relative to the project root
    (``--relative``), not the repository root as in 0.9.1: rule globs and ``@path`` prompts are
    both project-relative, so this is what makes a project in a repository subdirectory work.
    """
    _ensure_work_tree(project_root)
    base = base_ref or detect_base_ref(project_root)
    diff = ["diff", "--name-only", "-z", "--relative", "--diff-filter=ACMR"]

    if base != "HEAD":
        merge_base = _git(project_root, "merge-base", "HEAD", base)
        if merge_base.returncode != 0:
            raise GitError(f"Failed to find merge-base with '{base}': {merge_base.stderr.strip()}")
        against: list[str] = [merge_base.stdout.strip()]
    elif _verifies(project_root, "HEAD"):
        against = ["HEAD"]
    else:
        # A repository without commits has no HEAD to compare with; the index stands in for
        # it, and the --cached diff below reports everything staged so far.
        against = []

    names: set[str] = set()
    for args in ([*diff, *against], [*diff, "--cached"]):
        result = _git(project_root, *args)
        if result.returncode != 0:
            raise GitError(f"git diff failed: {result.stderr.strip()}")
        names.update(_names(result.stdout))

    untracked = _git(project_root, "ls-files", "-z", "--others", "--exclude-standard")
    if untracked.returncode != 0:
        raise GitError(f"git ls-files failed: {untracked.stderr.strip()}")
    # A nested repository shows up as one "dir/" entry; it is not a file that can be reviewed.
    names.update(name for name in _names(untracked.stdout) if not name.endswith("/"))

    return sorted(name for name in names if not name.startswith(SCRATCH_PREFIX))
