"""A review's instruction file in DeepWork 0.14's layout.

Sections, each present only when it has content: the title with the scope, the project root
(reviewers may run in another checkout), the review instructions, the relevant file contents
(for an ``individual`` review the file under review first, then the rule's reference files,
inlined), the files or the string value to review, the unchanged matching files, the whole change
set, how to record the pass with the review id, and the rule's source.

Inlining is bounded (``MAX_INLINED_FILES`` files, ``MAX_INLINED_BYTES`` in all): past that a
file is cut or only named, so a huge reference never makes a huge instruction file. Files are
read through ``workflows.files`` (inside the project, regular files only).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path, PurePosixPath

from reviews.deepreview.config import ReviewTask
from reviews.deepreview.instructions import (
    ReviewIdFn,
    build_instruction_file,
    describe_scope,
    task_is_passed,
)
from reviews.deepreview.precompute import NO_COMMANDS, CommandPolicy, run_command, run_commands
from workflows.files import read_project_file

MAX_INLINED_FILES = 20
MAX_INLINED_BYTES = 256 * 1024

FILE_UNDER_REVIEW = "File under review"

_LANGUAGES = {
    ".yml": "yaml",
    ".yaml": "yaml",
    ".json": "json",
    ".md": "markdown",
    ".py": "python",
    ".sh": "bash",
    ".toml": "toml",
}
_BACKTICKS = re.compile(r"`{3,}")


def _language(path: str) -> str:
    return _LANGUAGES.get(PurePosixPath(path).suffix.lower(), "text")


def _fence(text: str) -> str:
    # A longer fence than any run of backticks inside, so the content cannot close it.
    longest = max((len(run) for run in _BACKTICKS.findall(text)), default=0)
    return "`" * max(3, longest + 1)


def _decode(data: bytes, *, cut: bool) -> str:
    """UTF-8 text; a cut may have split the last character, which is then left out."""
    for drop in range(4 if cut else 1):
        try:
            return data[: len(data) - drop].decode("utf-8")
        except UnicodeDecodeError as exc:
            error = exc
    raise error


def _relevant_files(
    task: ReviewTask, project_root: Path, *, under_review: bool = True
) -> list[str]:
    entries: list[tuple[str, str]] = []
    if under_review and task.rule.strategy == "individual":
        entries += [(path, FILE_UNDER_REVIEW) for path in task.files_to_review]
    entries += list(task.rule.reference_files)
    if not entries:
        return []
    out = ["## Relevant File Contents", ""]
    budget = MAX_INLINED_BYTES
    omitted: list[str] = []
    for index, (path, description) in enumerate(entries):
        if index >= MAX_INLINED_FILES or budget <= 0:
            omitted.append(path)
            continue
        out += [f"### {path}", ""]
        if description:
            out += [description, ""]
        try:
            read = read_project_file(root=project_root, relative=path, limit=budget)
            text = _decode(read.data, cut=read.truncated)
        except (OSError, ValueError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
            out += [f"(could not inline {path}: {reason})", ""]
            continue
        budget -= len(read.data)
        fence = _fence(text)
        out += [f"{fence}{_language(path)}", text.rstrip("\n"), fence, ""]
        if read.truncated:
            out += [
                f"(cut after {len(read.data)} of {read.size} bytes: the inlined contents are "
                f"capped at {MAX_INLINED_BYTES} bytes in all; read the file for the rest)",
                "",
            ]
    if omitted:
        out += [
            f"Not inlined (over the limit of {MAX_INLINED_FILES} files or "
            f"{MAX_INLINED_BYTES} bytes); read them if you need them:",
            "",
            *(f"- @{path}" for path in omitted),
            "",
        ]
    return out


def _listed(heading: str, note: str, lines: Sequence[str]) -> list[str]:
    return [heading, "", note, "", *lines, ""] if lines else []


def _precomputed(
    task: ReviewTask,
    project_root: Path,
    precomputed: Mapping[str, str] | None,
    commands: CommandPolicy,
) -> list[str]:
    command = task.rule.precompute_command
    if not command:
        return []
    if precomputed is not None and command in precomputed:
        text = precomputed[command]
    else:
        text = run_command(command, project_root, commands)
    text = text.strip("\n")
    return ["## Precomputed Context", "", text, ""] if text else []


def render_review_task(
    task: ReviewTask,
    review_id: str,
    project_root: Path,
    *,
    inline: str | None = None,
    precomputed: Mapping[str, str] | None = None,
    commands: CommandPolicy = NO_COMMANDS,
) -> str:
    """The instruction file of ``task``; ``inline`` is the value of a string output.

    ``precomputed`` maps precompute commands to their text (``prepare_render_review_task``);
    a command not in it is run here if ``commands`` allows it.
    """
    scope = "inline content" if inline is not None else describe_scope(task)
    out = [f"# Review: {task.rule_name} — {scope}", ""]
    out += [
        "## Project Root",
        "",
        f"**Every path in this file is relative to the project root `{project_root}`: build "
        "absolute paths from it, not from your working directory, which may be another "
        "checkout of the project.**",
        "",
    ]
    out += ["## Review Instructions", "", task.rule.instructions.strip(), ""]
    out += _relevant_files(task, project_root)
    if inline is not None:
        out += ["## Content to Review", "", inline, ""]
    else:
        out += ["## Files to Review", "", *(f"- @{path}" for path in task.files_to_review), ""]
    out += _listed(
        "## Unchanged Matching Files",
        "These files fall under the same rule but were not changed. They are here as "
        "background only; review the files listed above.",
        [f"- @{path}" for path in task.additional_files],
    )
    out += _listed(
        "## All Changed Files",
        "For orientation, this is the whole change set. Only the files under review are in "
        "scope for this review.",
        [f"- {path}" for path in task.all_changed_filenames],
    )
    out += _precomputed(task, project_root, precomputed, commands)
    out += [
        "## After Review",
        "",
        "When the review passes, or once everything it found is fixed or dismissed, record "
        "the pass by calling the `mark_review_as_passed` tool with:",
        "",
        f'- `review_id`: `"{review_id}"`',
        "",
    ]
    if task.source_location:
        out += [
            "---",
            "",
            f"This review was requested by the policy at `{task.source_location}`.",
            "",
        ]
    return "\n".join(out)


Renderer = Callable[[ReviewTask, str, Path], str]


def render_extended(
    task: ReviewTask,
    review_id: str,
    project_root: Path,
    *,
    precomputed: Mapping[str, str] | None = None,
    commands: CommandPolicy = NO_COMMANDS,
) -> str:
    """0.9.1's layout of ``task``'s instruction file, plus what 0.14's keys of its rule ask
    the reviewer to read: the ``reference_files`` inlined and the precompute command's output.

    Only a server serving both generations reads those keys for the 0.9.1 tools (0.9.1 itself
    refuses them); a rule without them gives 0.9.1's file unchanged.
    """
    extra = _relevant_files(task, project_root, under_review=False)
    extra += _precomputed(task, project_root, precomputed, commands)
    return build_instruction_file(task, review_id, extra=extra)


def _prepared(
    render: Callable[..., str],
    tasks: Sequence[ReviewTask],
    project_root: Path,
    review_id: ReviewIdFn,
    also_passed_as: Sequence[ReviewIdFn],
    commands: CommandPolicy,
) -> Renderer:
    """``render`` with the precompute commands of the tasks still to write (not passed under
    their id, nor under any id ``also_passed_as`` gives them) already run, in parallel, so a
    slow command costs its own time once rather than once per task; or, when ``commands``
    does not allow them, with the reason they were not."""
    to_run = [
        task.rule.precompute_command
        for task in tasks
        if task.rule.precompute_command
        and not task_is_passed(
            project_root,
            task,
            review_id(task, project_root),
            also_passed_as=also_passed_as,
        )
    ]
    return functools.partial(
        render,
        precomputed=run_commands(to_run, project_root, commands),
        commands=commands,
    )


def prepare_render_review_task(
    tasks: Sequence[ReviewTask],
    project_root: Path,
    review_id: ReviewIdFn,
    also_passed_as: Sequence[ReviewIdFn] = (),
    commands: CommandPolicy = NO_COMMANDS,
) -> Renderer:
    """``render_review_task`` with the run's precompute commands already run (``_prepared``)."""
    return _prepared(render_review_task, tasks, project_root, review_id, also_passed_as, commands)


def prepare_render_extended(
    tasks: Sequence[ReviewTask],
    project_root: Path,
    review_id: ReviewIdFn,
    also_passed_as: Sequence[ReviewIdFn] = (),
    commands: CommandPolicy = NO_COMMANDS,
) -> Renderer:
    """``render_extended`` with the run's precompute commands already run."""
    return _prepared(render_extended, tasks, project_root, review_id, also_passed_as, commands)
