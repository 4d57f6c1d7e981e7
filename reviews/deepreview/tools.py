"""The review pipeline behind the MCP tools, with the fixes DeepWork 0.9.2 and 0.9.3 made to it.

The functions return strings or lists and never raise: 0.9.1's server turned every failure into a
``Review error: ...`` string, and agents rely on that text.
"""

from __future__ import annotations

import logging
import os
import posixpath
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from reviews.deepreview.changes import GitError, find_changed_files
from reviews.deepreview.config import ReviewRule, ReviewTask
from reviews.deepreview.discovery import ParseFailure, load_all_rules
from reviews.deepreview.instructions import (
    INSTRUCTIONS_DIR,
    ReviewIdFn,
    compute_review_id,
    compute_review_task_id,
    describe_scope,
    mark_passed,
    write_instruction_files,
)
from reviews.deepreview.instructions014 import prepare_render_extended
from reviews.deepreview.matching import build_tasks, file_matches_rule, source_location
from reviews.deepreview.precompute import NO_COMMANDS, CommandPolicy
from workflows import globs

logger = logging.getLogger(__name__)

SUPPORTED_PLATFORMS = ("claude",)
DEFAULT_PLATFORM = "claude"
DEFAULT_SUBAGENT = "general-purpose"

NO_CONFIG = "No .deepreview configuration files found."
NO_CHANGES = "No changed files detected."
NO_MATCHES = "No review rules matched the changed files."
ALL_PASSED = "All matching reviews have already passed for the current file contents."


class UnsafePathError(ValueError):
    """An explicit file path that points outside the project."""


def _failure_lines(failures: Sequence[ParseFailure]) -> str:
    return "\n".join(f"  - {failure.path}: {failure.error}" for failure in failures)


def format_for_claude(task_ids: Sequence[tuple[ReviewTask, str]]) -> str:
    """The Task list Claude Code dispatches; detail lines are tab-indented, as 0.9.1 prints them."""
    lines = ["Invoke the following list of Tasks in parallel:", ""]
    for task, review_id in task_ids:
        lines += [
            f'name: "{task.rule_name} review of {describe_scope(task)}"',
            f"\tdescription: Review {task.rule_name}",
            f"\tsubagent_type: {task.agent_name or DEFAULT_SUBAGENT}",
            f'\tprompt: "@{INSTRUCTIONS_DIR}/{review_id}.md"',
            "",
        ]
    return "\n".join(lines)


def is_catch_all(rule: ReviewRule) -> bool:
    """A rule every file matches: each include pattern is made only of ``*`` and ``/``."""
    return bool(rule.include) and all(set(p) <= {"*", "/"} for p in rule.include)


RuleLoader = Callable[[Path], tuple[list[ReviewRule], list[ParseFailure]]]
TaskFormatter = Callable[[Sequence[tuple[ReviewTask, str]], Path], str]
# (task, review id, project root) -> the instruction file's text; None: 0.9.1's layout.
Renderer = Callable[[ReviewTask, str, Path], str]


@dataclass(frozen=True)
class ReviewDialect:
    """What differs between DeepWork generations in the one review pipeline below.

    ``format_tasks`` renders the written (task, review id) pairs; when every matching review
    had already passed, ``all_passed`` is the whole answer, or with None the formatter gets
    the empty list (and parse warnings still come first).
    """

    no_valid_rules: str
    no_config: str
    all_passed: str | None
    # With explicit files, rules that match everything would review whatever was named;
    # 0.14 leaves them out then, 0.9.1 does not.
    drop_catch_all_for_files: bool
    format_tasks: TaskFormatter
    load_rules: RuleLoader = load_all_rules
    review_id: ReviewIdFn = compute_review_id
    render: Renderer | None = None
    # Builds the renderer for a run's tasks (0.14 runs their precompute commands first); it
    # is given the task ids and the other id forms a pass also counts under.
    prepare_render: (
        Callable[
            [Sequence[ReviewTask], Path, ReviewIdFn, Sequence[ReviewIdFn], CommandPolicy],
            Renderer,
        ]
        | None
    ) = None
    # Other id forms of a task whose pass counts as its own (``task_is_passed``).
    also_passed_as: tuple[ReviewIdFn, ...] = ()


def _format_091(written: Sequence[tuple[ReviewTask, str]], project_root: Path) -> str:
    return format_for_claude(written)


DIALECT_091 = ReviewDialect(
    no_valid_rules="No valid .deepreview rules found.",
    no_config=NO_CONFIG,
    all_passed=ALL_PASSED,
    drop_catch_all_for_files=False,
    format_tasks=_format_091,
)


def load_rules_extended_keys(project_root: Path) -> tuple[list[ReviewRule], list[ParseFailure]]:
    """The ``.deepreview`` rules, 0.14's keys inside ``review`` accepted."""
    return load_all_rules(project_root, extended_keys=True)


# A server answering both generations (``mcpserve --generation both``) serves these 0.9.1
# tools beside 0.14's quality gate, and both must see one project:
# - the gate names a review by 0.14's id, these tools by 0.9.1's; a pass the agent recorded
#   under the gate's id counts here too (the gate honours these ids in turn);
# - the gate reads a ``.deepreview`` with 0.14's keys (``reference_files``,
#   ``precomputed_info_for_reviewer_bash_command``), so these tools read the same file the same
#   way rather than call it broken, and give the reviewer what the keys ask for.
DIALECT_091_BOTH = replace(
    DIALECT_091,
    load_rules=load_rules_extended_keys,
    prepare_render=prepare_render_extended,
    also_passed_as=(compute_review_task_id,),
)


def _project_relative(path: str, root: Path, real_root: Path) -> str:
    """``path`` as a normalised project-relative POSIX path; UnsafePathError if it is not one."""
    if "\0" in path:
        raise UnsafePathError("contains a NUL byte")
    if posixpath.isabs(path):
        normalised = posixpath.normpath(path)
        for base in (str(root), str(real_root)):
            if normalised.startswith(base.rstrip("/") + "/"):
                rel = normalised[len(base.rstrip("/")) + 1 :]
                break
        else:
            raise UnsafePathError("is an absolute path outside the project root")
    else:
        rel = posixpath.normpath(path)
        if rel == ".." or rel.startswith("../"):
            raise UnsafePathError("escapes the project root with '..'")
    if rel in ("", "."):
        raise UnsafePathError("names the project root, not a file")
    too_deep = globs.path_too_deep(rel)
    if too_deep is not None:
        raise UnsafePathError(too_deep)
    # A symlink inside the project can still point outside it; the reviewer would then be
    # handed a file the caller could not name directly.
    try:
        resolved = (real_root / rel).resolve()
    except (OSError, RuntimeError) as exc:  # RuntimeError: a symlink loop, on Python < 3.13
        raise UnsafePathError("cannot be resolved inside the project root") from exc
    if resolved != real_root and real_root not in resolved.parents:
        raise UnsafePathError("leads outside the project root through a symbolic link")
    return rel


def confine_files(files: Iterable[str], project_root: Path) -> tuple[list[str], list[str]]:
    """Split explicit paths into (sorted unique project-relative paths, rejection messages)."""
    root = Path(os.path.abspath(project_root))
    real_root = root.resolve()
    accepted: set[str] = set()
    rejected: list[str] = []
    for path in files:
        try:
            accepted.add(_project_relative(path, root, real_root))
        except UnsafePathError as exc:
            rejected.append(f"{path!r} {exc}")
    return sorted(accepted), rejected


def get_review_instructions(
    *,
    project_root: Path,
    files: list[str] | None,
    platform: str | None,
    dialect: ReviewDialect = DIALECT_091,
    commands: CommandPolicy = NO_COMMANDS,
) -> str:
    """Run the review pipeline and return the Task list (or an informational/error message).

    ``commands`` says whether the rules' precompute commands may run (the server decides)."""
    try:
        return _review_instructions(
            Path(os.path.abspath(project_root)), files, platform, dialect, commands
        )
    except Exception as exc:
        # The tool contract is "never raises"; anything unforeseen still becomes a message.
        logger.exception("Review pipeline failed")
        return f"Review error: {exc}"


def _review_instructions(
    project_root: Path,
    files: list[str] | None,
    platform: str | None,
    dialect: ReviewDialect,
    commands: CommandPolicy,
) -> str:
    platform = platform or DEFAULT_PLATFORM
    if platform not in SUPPORTED_PLATFORMS:
        return (
            f"Review error: Unsupported platform: '{platform}'. "
            f"Supported platforms: {', '.join(SUPPORTED_PLATFORMS)}"
        )

    rules, failures = dialect.load_rules(project_root)
    if not rules:
        if failures:
            return f"{dialect.no_valid_rules} Parse errors:\n{_failure_lines(failures)}"
        return dialect.no_config

    if files is not None:
        changed, rejected = confine_files(files, project_root)
        if rejected:
            # Refuse the whole call rather than quietly reviewing the rest: the caller asked
            # for a specific set and should learn that part of it was not usable.
            return (
                "Review error: Only files inside the project can be reviewed; rejected: "
                + "; ".join(rejected)
            )
        if dialect.drop_catch_all_for_files:
            rules = [rule for rule in rules if not is_catch_all(rule)]
    git_warnings: list[str] = []
    if files is None:
        try:
            found = find_changed_files(project_root)
        except GitError as exc:
            return f"Review error: Git error: {exc}"
        changed, git_warnings = found.paths, found.warnings
    if not changed:
        return NO_CHANGES

    tasks = build_tasks(changed, rules, project_root, platform)
    if not tasks:
        return NO_MATCHES

    render = (
        dialect.prepare_render(
            tasks, project_root, dialect.review_id, dialect.also_passed_as, commands
        )
        if dialect.prepare_render
        else dialect.render
    )
    try:
        written = write_instruction_files(
            tasks,
            project_root,
            review_id=dialect.review_id,
            render=render,
            also_passed_as=dialect.also_passed_as,
        )
    except OSError as exc:
        return f"Review error: Error writing instruction files: {exc}"
    if not written and dialect.all_passed is not None:
        return dialect.all_passed

    output = dialect.format_tasks(written, project_root)
    if git_warnings:
        output = "".join(f"Warning: {warning}\n" for warning in git_warnings) + "\n" + output
    if failures:
        output = (
            "Warning: Some .deepreview files could not be parsed:\n"
            f"{_failure_lines(failures)}\n\n{output}"
        )
    return output


def get_configured_reviews(
    *,
    project_root: Path,
    only_rules_matching_files: list[str] | None,
    dialect: ReviewDialect = DIALECT_091,
) -> list[dict[str, str]]:
    """Rules in discovery order, optionally only those covering a file; parse errors appended."""
    project_root = Path(os.path.abspath(project_root))
    rules, failures = dialect.load_rules(project_root)
    if only_rules_matching_files is not None:
        # Unusable paths simply match nothing here; this tool lists rules, it reviews nothing.
        wanted, _rejected = confine_files(only_rules_matching_files, project_root)
        rules = [
            rule
            for rule in rules
            if not (dialect.drop_catch_all_for_files and is_catch_all(rule))
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
        if failure.kind == "deepreview"
    ]
    return listing


def mark_review_as_passed(*, project_root: Path, review_id: str) -> str:
    """Record that a review passed, so runs skip it until its files change."""
    if not review_id or not review_id.strip():
        return "Validation error: review_id must not be empty."
    if any(bad in review_id for bad in ("..", "/", "\\", "\0")):
        return (
            "Validation error: review_id must be an id from an instruction file, "
            "without '/', '\\', '..' or NUL bytes."
        )
    try:
        mark_passed(project_root, review_id)
    except OSError as exc:
        return f"Review error: Could not record the pass for '{review_id}': {exc.strerror or exc}"
    return f"Review '{review_id}' marked as passed."
