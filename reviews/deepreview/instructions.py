"""Review ids and the per-task instruction files under ``.deepwork/tmp/review_instructions``.

Review id scheme (deterministic, filename-safe)::

    <rule part>--<paths part>--<hash>

- rule part: the rule name with every character outside ``[A-Za-z0-9._-]`` replaced by ``-``,
  cut to 100 characters.
- paths part: the files under review, sorted, each with ``/`` (and any other character outside
  ``[A-Za-z0-9._-]``) replaced by ``-`` and runs of dots collapsed to one (so no id ever contains
  ``..``, which ``mark_review_as_passed`` refuses), joined with ``_AND_``; if that is longer
  than 100 characters, ``<N>_files`` instead.
- hash: the first 12 hex digits of a SHA-256 over, in order: the rule's ``.deepreview`` path
  relative to the project root, NUL, the rule name, NUL, the instruction text, NUL; then for each
  file under review in sorted order: its path, NUL, and either its byte length, NUL and its bytes,
  or ``-`` NUL if it cannot be read (deleted, say).

So editing any reviewed file, or the rule's instructions, yields a new id and re-opens the review,
while unrelated edits (other files, the rule's line number, the change set around it) do not.
The rule's file and the length prefixes keep two same-named rules in different directories, or
content shifted from one file to another, from sharing an id.

Files under review are hashed up to ``HASH_BYTES``; past that, their size and modification time
stand in for the rest, so a huge (or sparse) file costs a bounded read, never its whole size.

Everything here goes through ``workflows.files``: the folder is opened inside the project without
following links out, files are read only when regular (a pipe is "cannot be read", not a hang),
and each instruction file is a fresh temporary file renamed over its name, which replaces a link
or pipe an agent planted there instead of writing through it.

Concurrency: each call writes only its own tasks' files, each through a temp file and a rename,
so a reader sees a whole file or none. Nothing is wiped wholesale; only ``.md``
files untouched for ``STALE_AFTER`` are removed, under an exclusive lock that writers hold shared,
so a file being rewritten right now is never the one deleted.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import stat
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from reviews.deepreview.config import ReviewTask
from workflows.files import (
    open_project_file,
    open_regular_at,
    project_directory,
    project_write_text,
    write_text_at,
)

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows has no flock; cleanup then runs unlocked.
    fcntl = None  # type: ignore[assignment]

INSTRUCTIONS_DIR = ".deepwork/tmp/review_instructions"
STALE_AFTER = 24 * 60 * 60
MAX_PART_LENGTH = 100
HASH_BYTES = 16 * 1024 * 1024

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")
_DOTS = re.compile(r"\.{2,}")
_UNSAFE_IN_TASK_ID = re.compile(r"[/\\\x00-\x1f\x7f]")
_LOCK_NAME = ".lock"
_TMP_SUFFIX = ".tmp"


def instructions_dir(project_root: Path) -> Path:
    return project_root / INSTRUCTIONS_DIR


def _safe(text: str) -> str:
    return _DOTS.sub(".", _UNSAFE.sub("-", text))


def _paths_part(files: Sequence[str]) -> str:
    joined = "_AND_".join(_safe(path) for path in sorted(files))
    return joined if len(joined) <= MAX_PART_LENGTH else f"{len(files)}_files"


def _content_hash(task: ReviewTask, project_root: Path) -> str:
    digest = hashlib.sha256()
    rule_file = Path(os.path.relpath(task.rule.source_file, project_root)).as_posix()
    for part in (rule_file, task.rule.name, task.rule.instructions):
        digest.update(part.encode("utf-8", "surrogateescape") + b"\0")
    for path in sorted(task.files_to_review):
        digest.update(path.encode("utf-8", "surrogateescape") + b"\0")
        try:
            with open_project_file(root=project_root, relative=path) as handle:
                info = os.fstat(handle.fileno())
                data = handle.read(HASH_BYTES)
        except (OSError, ValueError):
            digest.update(b"-\0")
            continue
        digest.update(str(max(info.st_size, len(data))).encode() + b"\0" + data)
        if info.st_size > HASH_BYTES:
            digest.update(b"\0" + str(info.st_mtime_ns).encode())
    return digest.hexdigest()[:12]


def _task_id_path(path: str) -> str:
    # 0.14 turns only "/" into "-" (a space or "[" stays). The rest keeps ids usable as one
    # file name that mark_review_as_passed accepts: no "\\", NUL, control character or "..".
    return _DOTS.sub(".", _UNSAFE_IN_TASK_ID.sub("-", path))


def _task_id_content_hash(files: Sequence[str], project_root: Path, inline: str | None) -> str:
    digest = hashlib.sha256()
    for path in sorted(files):
        try:
            with open_project_file(root=project_root, relative=path) as handle:
                info = os.fstat(handle.fileno())
                data = handle.read(HASH_BYTES)
        except (OSError, ValueError):
            digest.update(b"MISSING")
            continue
        digest.update(data)
        if info.st_size > HASH_BYTES:
            # Past the bounded read, size and mtime stand in for the rest (0.14 reads it all).
            digest.update(f"\0{info.st_size}\0{info.st_mtime_ns}".encode())
    if inline is not None:
        digest.update(b"\x00INLINE\x00" + inline.encode("utf-8", "surrogateescape"))
    return digest.hexdigest()[:12]


def compute_review_task_id(
    task: ReviewTask, project_root: Path, *, inline: str | None = None
) -> str:
    """DeepWork 0.14's review id: the rule, the files and a hash of their contents only.

    ``<rule>--<paths>--<hash>``: the rule name made filename-safe; the sorted paths with ``/``
    as ``-`` joined by ``_AND_`` (``<N>_files`` past 100 characters, ``inline`` for a string
    value); the first 12 hex digits of a SHA-256 over the files' bytes in path order (an
    unreadable file counts as ``MISSING``), then for a string value NUL ``INLINE`` NUL and the
    value. Neither the rule's instructions nor the session are in it: the same rule on the
    same content has the same id in every workflow and in ``get_review_instructions``.
    """
    rule_part = _safe(task.rule_name)[:MAX_PART_LENGTH]
    if inline is not None:
        paths = "inline"
    else:
        joined = "_AND_".join(_task_id_path(path) for path in sorted(task.files_to_review))
        paths = joined if len(joined) <= MAX_PART_LENGTH else f"{len(task.files_to_review)}_files"
    return (
        f"{rule_part}--{paths}--{_task_id_content_hash(task.files_to_review, project_root, inline)}"
    )


def compute_review_id(task: ReviewTask, project_root: Path) -> str:
    rule_part = _safe(task.rule_name)[:MAX_PART_LENGTH]
    return f"{rule_part}--{_paths_part(task.files_to_review)}--{_content_hash(task, project_root)}"


def describe_scope(task: ReviewTask) -> str:
    files = task.files_to_review
    return files[0] if len(files) == 1 else f"{len(files)} files"


def build_instruction_file(task: ReviewTask, review_id: str, *, extra: Sequence[str] = ()) -> str:
    """0.9.1's layout of a task's instruction file; ``extra`` lines (whole sections) go after
    the file lists, before the rule's source."""
    out = [f"# Review: {task.rule_name} — {describe_scope(task)}", ""]
    out += ["## Review Instructions", "", task.rule.instructions.strip(), ""]
    out += ["## Files to Review", "", *(f"- @{path}" for path in task.files_to_review), ""]
    if task.additional_files:
        out += [
            "## Unchanged Matching Files",
            "",
            "These files fall under the same rule but were not changed. They are here as "
            "background only; review the files listed above.",
            "",
            *(f"- @{path}" for path in task.additional_files),
            "",
        ]
    if task.all_changed_filenames:
        out += [
            "## All Changed Files",
            "",
            "For orientation, this is the whole change set. Only the files under "
            '"Files to Review" are in scope for this review.',
            "",
            *(f"- {path}" for path in task.all_changed_filenames),
            "",
        ]
    out += extra
    if task.source_location:
        out += [
            "---",
            "",
            f"This review was requested by the policy at `{task.source_location}`.",
            "",
        ]
    out += [
        "## After Review",
        "",
        "Once the review is done and nothing it found still needs fixing, record the pass by "
        "calling the `mark_review_as_passed` tool with this id:",
        "",
        f'- `review_id`: `"{review_id}"`',
        "",
        "Later review runs then skip this review until one of the files above changes.",
        "",
    ]
    return "\n".join(out)


def _passed_name(review_id: str) -> str:
    return f"{review_id}.passed"


def _is_passed_at(dir_fd: int, review_id: str) -> bool:
    try:
        mode = os.stat(_passed_name(review_id), dir_fd=dir_fd, follow_symlinks=False).st_mode
    except OSError:
        return False
    return stat.S_ISREG(mode)


def is_passed(project_root: Path, review_id: str) -> bool:
    try:
        with project_directory(root=project_root, relative=INSTRUCTIONS_DIR) as dir_fd:
            return _is_passed_at(dir_fd, review_id)
    except OSError:
        return False


ReviewIdFn = Callable[[ReviewTask, Path], str]


def _task_passed_at(
    dir_fd: int,
    task: ReviewTask,
    review_id: str,
    project_root: Path,
    also_passed_as: Sequence[ReviewIdFn],
) -> bool:
    # The other forms are computed only when needed: each one hashes the files again.
    return _is_passed_at(dir_fd, review_id) or any(
        _is_passed_at(dir_fd, other(task, project_root)) for other in also_passed_as
    )


def task_is_passed(
    project_root: Path,
    task: ReviewTask,
    review_id: str,
    *,
    also_passed_as: Sequence[ReviewIdFn] = (),
) -> bool:
    """Whether ``task`` (named ``review_id``) has a pass marker under its id or under the id
    any of ``also_passed_as`` gives it.

    One server serving both DeepWork generations names the same review in two forms (0.9.1's
    tools hash the rule's text too, 0.14's only the content), and an agent marks whichever id
    it was shown; with both forms here, a pass under one is not asked for again under the other.
    """
    try:
        with project_directory(root=project_root, relative=INSTRUCTIONS_DIR) as dir_fd:
            return _task_passed_at(dir_fd, task, review_id, project_root, also_passed_as)
    except OSError:
        return False


def mark_passed(project_root: Path, review_id: str) -> None:
    project_write_text(
        root=project_root, relative=f"{INSTRUCTIONS_DIR}/{_passed_name(review_id)}", text=""
    )


@contextlib.contextmanager
def _dir_lock(dir_fd: int, *, exclusive: bool) -> Iterator[bool]:
    """Hold the directory's flock; yields False if an exclusive lock is not free right now."""
    if fcntl is None:
        yield True
        return
    fd = open_regular_at(dir_fd, _LOCK_NAME, create=True)
    try:
        if exclusive:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                yield False
                return
        else:
            fcntl.flock(fd, fcntl.LOCK_SH)
        yield True
    finally:
        os.close(fd)


def _remove_stale_at(dir_fd: int, now: float | None) -> None:
    cutoff = (time.time() if now is None else now) - STALE_AFTER
    with _dir_lock(dir_fd, exclusive=True) as locked:
        # Someone is writing; they will find the same stale files next time.
        if not locked:
            return
        # Listed and unlinked through the descriptor: a link planted in place of the folder
        # cannot point the sweep at files elsewhere.
        listing = os.open(".", os.O_RDONLY | os.O_DIRECTORY, dir_fd=dir_fd)
        try:
            names = [entry.name for entry in os.scandir(listing)]
        finally:
            os.close(listing)
        for name in names:
            if not name.endswith((".md", _TMP_SUFFIX)):
                continue
            with contextlib.suppress(FileNotFoundError):
                if os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mtime < cutoff:
                    os.unlink(name, dir_fd=dir_fd)


def remove_stale_files(project_root: Path, *, now: float | None = None) -> None:
    """Delete instruction files (and orphaned temp files) untouched for ``STALE_AFTER``.

    Age, not "not written by this call", decides: another call's files are still being read by
    its agents, and a day is far longer than any review takes.
    """
    try:
        with project_directory(root=project_root, relative=INSTRUCTIONS_DIR) as dir_fd:
            _remove_stale_at(dir_fd, now)
    except FileNotFoundError:
        return


def write_instruction_files(
    tasks: Sequence[ReviewTask],
    project_root: Path,
    *,
    review_id: Callable[[ReviewTask, Path], str] | None = None,
    render: Callable[[ReviewTask, str, Path], str] | None = None,
    also_passed_as: Sequence[ReviewIdFn] = (),
) -> list[tuple[ReviewTask, str]]:
    """Write a file per task not yet passed; returns (task, review id) for those written.

    A task counts as passed under its id or under any of the ids ``also_passed_as`` gives it
    (see ``task_is_passed``).

    Raises OSError when the directory or a file cannot be written.
    """
    written: list[tuple[ReviewTask, str]] = []
    with project_directory(root=project_root, relative=INSTRUCTIONS_DIR, create=True) as dir_fd:
        _remove_stale_at(dir_fd, None)
        with _dir_lock(dir_fd, exclusive=False):
            for task in tasks:
                task_id = (review_id or compute_review_id)(task, project_root)
                if _task_passed_at(dir_fd, task, task_id, project_root, also_passed_as):
                    continue
                text = (
                    render(task, task_id, project_root)
                    if render
                    else build_instruction_file(task, task_id)
                )
                write_text_at(dir_fd, f"{task_id}.md", text)
                written.append((task, task_id))
    return written
