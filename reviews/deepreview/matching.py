"""Match changed files against rules and turn the matches into review tasks.

All paths here are POSIX strings relative to the project root.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path

from wcmatch import glob

from reviews.deepreview.config import ReviewRule, ReviewTask
from reviews.deepreview.discovery import SKIPPED_DIRS
from workflows import globs

# GLOBSTAR: `**/` spans zero or more directories, so `**/*.py` matches `app.py`.
# DOTGLOB: `*` matches leading dots, as 0.9.1's hand-written regex did.
# `*` and `?` never cross `/`.
GLOB_FLAGS = glob.GLOBSTAR | glob.DOTGLOB

# Discovery's skip list, as globs for the filesystem search behind unchanged_matching_files.
_SKIPPED_GLOBS = [f"**/{name}/**" for name in sorted(SKIPPED_DIRS)] + ["**/*.egg-info/**"]


def rel_source_dir(rule: ReviewRule, project_root: Path) -> str:
    """The rule's directory relative to the project root: "" for the root itself."""
    rel = Path(os.path.relpath(rule.source_dir, project_root)).as_posix()
    return "" if rel == "." else rel


def source_location(rule: ReviewRule, project_root: Path) -> str:
    rel = Path(os.path.relpath(rule.source_file, project_root)).as_posix()
    return f"{rel}:{rule.source_line}"


def relative_to_dir(path: str, directory: str) -> str | None:
    """``path`` relative to ``directory`` (both project-relative), or None if outside it."""
    if not directory:
        return path
    prefix = f"{directory}/"
    return path[len(prefix) :] if path.startswith(prefix) else None


def glob_matches(path: str, pattern: str) -> bool:
    # Linear in the path's depth; wcmatch's own globmatch backtracks on repeated `**`.
    return globs.glob_matches(path, pattern)


def _matches_patterns(rel_path: str, rule: ReviewRule) -> bool:
    return any(glob_matches(rel_path, p) for p in rule.include) and not any(
        glob_matches(rel_path, p) for p in rule.exclude
    )


def file_matches_rule(path: str, rule: ReviewRule, project_root: Path) -> bool:
    rel = relative_to_dir(path, rel_source_dir(rule, project_root))
    return rel is not None and _matches_patterns(rel, rule)


def matching_files(files: Iterable[str], rule: ReviewRule, project_root: Path) -> list[str]:
    """The files this rule covers, in the order given."""
    return [f for f in files if file_matches_rule(f, rule, project_root)]


def unchanged_matching_files(
    rule: ReviewRule, changed: Iterable[str], project_root: Path
) -> list[str]:
    """Files on disk that the rule's patterns cover but that are not in ``changed``."""
    source = rel_source_dir(rule, project_root)
    prefix = f"{source}/" if source else ""
    changed_set = set(changed)
    found: set[str] = set()
    # Tool caches, dependency trees and git internals are never useful review context, and
    # excluding them here also keeps the walk out of them.
    for rel in glob.glob(
        list(rule.include), root_dir=rule.source_dir, flags=GLOB_FLAGS, exclude=_SKIPPED_GLOBS
    ):
        rel = Path(rel).as_posix()
        # A pattern such as `../*.py` reaches outside the rule's directory; changed files can
        # never match it (see relative_to_dir), so unchanged ones must not either.
        if rel.startswith("../") or rel.startswith("/"):
            continue
        if any(glob_matches(rel, p) for p in rule.exclude):
            continue
        path = f"{prefix}{rel}"
        if path in changed_set or not (rule.source_dir / rel).is_file():
            continue
        found.add(path)
    return sorted(found)


def tasks_for_rule(
    rule: ReviewRule, changed: Sequence[str], project_root: Path, platform: str
) -> list[ReviewTask]:
    matched = matching_files(changed, rule, project_root)
    if not matched:
        return []
    agent = rule.agent_for(platform)
    location = source_location(rule, project_root)
    context = tuple(changed) if rule.all_changed_filenames else ()

    def task(files: Sequence[str], additional: Sequence[str] = ()) -> ReviewTask:
        return ReviewTask(
            rule=rule,
            files_to_review=tuple(files),
            agent_name=agent,
            source_location=location,
            additional_files=tuple(additional),
            all_changed_filenames=context,
        )

    if rule.strategy == "individual":
        return [task([path]) for path in matched]
    if rule.strategy == "matches_together":
        unchanged = (
            unchanged_matching_files(rule, changed, project_root)
            if rule.unchanged_matching_files
            else []
        )
        return [task(matched, unchanged)]
    # all_changed_files is a tripwire: any match sends the whole change set, excludes and all.
    return [task(changed)]


def build_tasks(
    changed: Sequence[str], rules: Iterable[ReviewRule], project_root: Path, platform: str
) -> list[ReviewTask]:
    """Tasks in rule (discovery) order, then changed-list order within a rule."""
    return [
        task for rule in rules for task in tasks_for_rule(rule, changed, project_root, platform)
    ]
