"""``get_review_instructions`` and ``get_configured_reviews`` as DeepWork 0.14 answers them.

The same ``.deepreview`` pipeline as 0.9.1's tools (``reviews.deepreview``) with 0.14's
differences (digest §5.6-§5.8): explicit ``files`` drop catch-all rules (every include pattern
made only of ``*`` and ``/``), tasks are listed in 0.14's agent format (``Review <dir>/<rule>``,
``deepwork:reviewer``), and its messages. DeepSchema-generated rules are not part of this.
Like the 0.9.1 tools these never raise: every failure is a message.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from reviews.deepreview.changes import GitError, get_changed_files
from reviews.deepreview.config import ReviewRule
from reviews.deepreview.discovery import load_all_rules
from reviews.deepreview.instructions import describe_scope, write_instruction_files
from reviews.deepreview.matching import (
    build_tasks,
    file_matches_rule,
    rel_source_dir,
    source_location,
)
from reviews.deepreview.tools import (
    DEFAULT_PLATFORM,
    NO_CHANGES,
    NO_MATCHES,
    SUPPORTED_PLATFORMS,
    _failure_lines,
    confine_files,
)
from reviews.gate014 import REVIEWER, Task014, format_tasks

logger = logging.getLogger(__name__)

NO_CONFIG = "No .deepreview configuration files or DeepSchema definitions found."


def is_catch_all(rule: ReviewRule) -> bool:
    return bool(rule.include) and all(set(p) <= {"*", "/"} for p in rule.include)


def _prefix(rule: ReviewRule, project_root: Path) -> str:
    rel = rel_source_dir(rule, project_root)
    return f"{Path(rel).name}/" if rel else ""


def get_review_instructions(
    *, project_root: Path, files: list[str] | None, platform: str | None
) -> str:
    try:
        return _review_instructions(Path(os.path.abspath(project_root)), files, platform)
    except Exception as exc:
        logger.exception("Review pipeline failed")
        return f"Review error: {exc}"


def _review_instructions(project_root: Path, files: list[str] | None, platform: str | None) -> str:
    platform = platform or DEFAULT_PLATFORM
    if platform not in SUPPORTED_PLATFORMS:
        return (
            f"Review error: Unsupported platform: '{platform}'. "
            f"Supported platforms: {', '.join(SUPPORTED_PLATFORMS)}"
        )
    rules, failures = load_all_rules(project_root)
    if not rules:
        if failures:
            return f"No valid review rules found. Parse errors:\n{_failure_lines(failures)}"
        return NO_CONFIG
    if files is not None:
        changed, rejected = confine_files(files, project_root)
        if rejected:
            return (
                "Review error: Only files inside the project can be reviewed; rejected: "
                + "; ".join(rejected)
            )
        rules = [rule for rule in rules if not is_catch_all(rule)]
    else:
        try:
            changed = get_changed_files(project_root)
        except GitError as exc:
            return f"Review error: Git error: {exc}"
    if not changed:
        return NO_CHANGES
    tasks = build_tasks(changed, rules, project_root, platform)
    if not tasks:
        return NO_MATCHES
    try:
        written = write_instruction_files(tasks, project_root)
    except OSError as exc:
        return f"Review error: Error writing instruction files: {exc}"
    output = format_tasks(
        [
            Task014(
                f"Review {_prefix(task.rule, project_root)}{task.rule_name}",
                review_id,
                task.agent_name or REVIEWER,
                describe_scope(task),
            )
            for task, review_id in written
        ]
    )
    if failures:
        output = (
            "Warning: Some .deepreview files could not be parsed:\n"
            f"{_failure_lines(failures)}\n\n{output}"
        )
    return output


def get_configured_reviews(
    *, project_root: Path, only_rules_matching_files: list[str] | None
) -> list[dict[str, str]]:
    project_root = Path(os.path.abspath(project_root))
    rules, failures = load_all_rules(project_root)
    if only_rules_matching_files is not None:
        wanted, _rejected = confine_files(only_rules_matching_files, project_root)
        rules = [
            rule
            for rule in rules
            if not is_catch_all(rule)
            and any(file_matches_rule(path, rule, project_root) for path in wanted)
        ]
    listing = [
        {
            "name": rule.name,
            "description": rule.description,
            "defining_file": source_location(rule, project_root),
        }
        for rule in rules
    ]
    listing += [
        {
            "name": f"PARSE_ERROR:{failure.path}",
            "description": failure.error,
            "defining_file": str(failure.path),
        }
        for failure in failures
    ]
    return listing
