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

Concurrency: each call writes only its own tasks' files, each through a temp file and
``os.replace``, so a reader sees a whole file or none. Nothing is wiped wholesale; only ``.md``
files untouched for ``STALE_AFTER`` are removed, under an exclusive lock that writers hold shared,
so a file being rewritten right now is never the one deleted.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

from reviews.deepreview.config import ReviewTask

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows has no flock; cleanup then runs unlocked.
    fcntl = None  # type: ignore[assignment]

INSTRUCTIONS_DIR = ".deepwork/tmp/review_instructions"
STALE_AFTER = 24 * 60 * 60
MAX_PART_LENGTH = 100

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")
_DOTS = re.compile(r"\.{2,}")
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
            data = (project_root / path).read_bytes()
        except OSError:
            digest.update(b"-\0")
        else:
            digest.update(str(len(data)).encode() + b"\0" + data)
    return digest.hexdigest()[:12]


def compute_review_id(task: ReviewTask, project_root: Path) -> str:
    rule_part = _safe(task.rule_name)[:MAX_PART_LENGTH]
    return f"{rule_part}--{_paths_part(task.files_to_review)}--{_content_hash(task, project_root)}"


def describe_scope(task: ReviewTask) -> str:
    files = task.files_to_review
    return files[0] if len(files) == 1 else f"{len(files)} files"


def build_instruction_file(task: ReviewTask, review_id: str) -> str:
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


def is_passed(project_root: Path, review_id: str) -> bool:
    return (instructions_dir(project_root) / f"{review_id}.passed").exists()


def mark_passed(project_root: Path, review_id: str) -> None:
    directory = instructions_dir(project_root)
    directory.mkdir(parents=True, exist_ok=True)
    (directory / f"{review_id}.passed").touch()


@contextlib.contextmanager
def _dir_lock(directory: Path, *, exclusive: bool) -> Iterator[bool]:
    """Hold the directory's flock; yields False if an exclusive lock is not free right now."""
    if fcntl is None:
        yield True
        return
    fd = os.open(directory / _LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o644)
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


def remove_stale_files(project_root: Path, *, now: float | None = None) -> None:
    """Delete instruction files (and orphaned temp files) untouched for ``STALE_AFTER``.

    Age, not "not written by this call", decides: another call's files are still being read by
    its agents, and a day is far longer than any review takes.
    """
    directory = instructions_dir(project_root)
    if not directory.is_dir():
        return
    cutoff = (time.time() if now is None else now) - STALE_AFTER
    with _dir_lock(directory, exclusive=True) as locked:
        # Someone is writing; they will find the same stale files next time.
        if not locked:
            return
        for entry in os.scandir(directory):
            if not entry.name.endswith((".md", _TMP_SUFFIX)):
                continue
            with contextlib.suppress(FileNotFoundError):
                if entry.stat(follow_symlinks=False).st_mtime < cutoff:
                    os.unlink(entry.path)


def _write_atomic(path: Path, content: str) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.stem}.", suffix=_TMP_SUFFIX)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(content)
        # mkstemp creates 0600; the file is an ordinary project file for whoever runs the agent.
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def write_instruction_files(
    tasks: Sequence[ReviewTask], project_root: Path
) -> list[tuple[ReviewTask, str]]:
    """Write a file per task not yet passed; returns (task, review id) for those written.

    Raises OSError when the directory or a file cannot be written.
    """
    directory = instructions_dir(project_root)
    directory.mkdir(parents=True, exist_ok=True)
    remove_stale_files(project_root)
    written: list[tuple[ReviewTask, str]] = []
    with _dir_lock(directory, exclusive=False):
        for task in tasks:
            review_id = compute_review_id(task, project_root)
            if is_passed(project_root, review_id):
                continue
            _write_atomic(directory / f"{review_id}.md", build_instruction_file(task, review_id))
            written.append((task, review_id))
    return written
