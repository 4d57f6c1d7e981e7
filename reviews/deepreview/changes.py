"""Which files changed, according to local git (0.14's rules, plus 0.9.3's untracked files).

Git runs through ``workflows.git`` with ``-C project_root``: the process working directory is
never changed, so concurrent calls for different projects cannot interfere, and nothing the
project's git configuration names is run.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from workflows.git import Git, GitTrouble

logger = logging.getLogger(__name__)

# Branches tried, in order, as the base a feature branch is compared with.
DEFAULT_BASE_BRANCHES = ("main", "master")

# The review pipeline's own scratch files (instruction files, pass markers) live here. They are
# untracked in most projects, and reviewing them would feed each run's output into the next.
SCRATCH_PREFIX = ".deepwork/tmp/"


class GitError(Exception):
    """Git could not say what changed; str() is the client-facing text."""


@dataclass(frozen=True)
class _Result:
    returncode: int
    stdout: str
    stderr: str


def _git(git: Git, *args: str) -> _Result:
    try:
        done = git.run(*args)
    except GitTrouble as exc:
        raise GitError(str(exc)) from None
    text = {"encoding": "utf-8", "errors": "surrogateescape"}
    return _Result(done.returncode, done.stdout.decode(**text), done.stderr.decode(**text))


def _names(output: str) -> list[str]:
    # -z output: NUL-terminated raw paths, so unusual file names arrive unquoted.
    return [name for name in output.split("\0") if name]


def _verifies(git: Git, rev: str) -> bool:
    result = _git(git, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}")
    return result.returncode == 0


def _ensure_work_tree(git: Git) -> None:
    # Checked up front: outside a repository `git diff` falls back to --no-index mode and
    # prints its whole usage text, which makes a useless error message.
    result = _git(git, "rev-parse", "--is-inside-work-tree")
    if result.returncode != 0:
        raise GitError(f"git rev-parse failed: {result.stderr.strip()}")
    if result.stdout.strip() != "true":
        raise GitError("git rev-parse failed: not inside a git work tree")


def _base_ref(git: Git) -> str:
    for branch in DEFAULT_BASE_BRANCHES:
        if _verifies(git, branch):
            return branch
    return "HEAD"


def detect_base_ref(project_root: Path) -> str:
    return _base_ref(Git(project_root))


@dataclass(frozen=True)
class ChangedFiles:
    """``paths`` as ``get_changed_files`` gives them; ``warnings`` about how git was read."""

    paths: list[str]
    warnings: list[str]


def get_changed_files(project_root: Path, base_ref: str | None = None) -> list[str]:
    """Changed, staged and untracked files, relative to ``project_root``, sorted and unique
    (``find_changed_files`` without its warnings, which are logged)."""
    found = find_changed_files(project_root, base_ref)
    for warning in found.warnings:
        logger.warning("Changed files of %s: %s", project_root, warning)
    return found.paths


def find_changed_files(project_root: Path, base_ref: str | None = None) -> ChangedFiles:
    """Changed, staged and untracked files, relative to ``project_root``, sorted and unique.

    Deleted files are left out (``--diff-filter=ACMR``). Paths are relative to the project root
    (``--relative``), not the repository root as in 0.9.1: rule globs and ``@path`` prompts are
    both project-relative, so this is what makes a project in a repository subdirectory work.
    """
    git = Git(project_root)
    _ensure_work_tree(git)
    base = base_ref or _base_ref(git)
    diff = [
        "diff",
        "--name-only",
        "-z",
        "--relative",
        "--diff-filter=ACMR",
        "--no-ext-diff",
        "--no-textconv",
        # Looking inside a submodule starts another git, in a repository whose configuration
        # (and so its filter drivers) was not read: a submodule counts by its commit only.
        "--ignore-submodules=dirty",
    ]

    if base != "HEAD":
        merge_base = _git(git, "merge-base", "HEAD", base)
        if merge_base.returncode != 0:
            raise GitError(f"Failed to find merge-base with '{base}': {merge_base.stderr.strip()}")
        against: list[str] = [merge_base.stdout.strip()]
    elif _verifies(git, "HEAD"):
        against = ["HEAD"]
    else:
        # A repository without commits has no HEAD to compare with; the index stands in for
        # it, and the --cached diff below reports everything staged so far.
        against = []

    names: set[str] = set()
    for args in ([*diff, *against], [*diff, "--cached"]):
        result = _git(git, *args)
        if result.returncode != 0:
            raise GitError(f"git diff failed: {result.stderr.strip()}")
        names.update(_names(result.stdout))

    untracked = _git(git, "ls-files", "-z", "--others", "--exclude-standard")
    if untracked.returncode != 0:
        raise GitError(f"git ls-files failed: {untracked.stderr.strip()}")
    # A nested repository shows up as one "dir/" entry; it is not a file that can be reviewed.
    names.update(name for name in _names(untracked.stdout) if not name.endswith("/"))

    paths = sorted(name for name in names if not name.startswith(SCRATCH_PREFIX))
    return ChangedFiles(paths, list(git.warnings))
