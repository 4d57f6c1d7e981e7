"""The quality gate's parts that need no database: review tasks, payloads, prompts, reviewers.

Layouts follow DeepWork 0.9.1 where agents and reviewers can see them (section markers, file
headers, placeholders, the reviewer's JSON contract); the prose is our own. Unlike 0.9.1 the
payload carries the step's inputs from earlier steps, as DeepWork's interface document
promised.

Why long: building payloads and prompts and running reviewer processes are two ideas kept
together only until reviewer process management moves to its own module.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import io
import json
import os
import shlex
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from workflows.files import NotRegularFile, read_project_file

if TYPE_CHECKING:
    from workflows.results import CriterionResult
    from workflows.services.step_changes import RunFiles

# How long one review may take, in seconds, unless the server is told otherwise
# (``mcpserve --quality-gate-timeout``, ``create_server(quality_gate_timeout=...)``).
REVIEW_TIMEOUT_SECONDS = 240

MARK = "=" * 20
RULE = "-" * 20
# Files larger than this are listed by path instead of inlined, like binary files.
MAX_INLINE_BYTES = 512 * 1024

VERDICT_SCHEMA = {
    "type": "object",
    "required": ["passed", "feedback"],
    "properties": {
        "passed": {"type": "boolean"},
        "feedback": {"type": "string"},
        "criteria_results": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["criterion", "passed"],
                "properties": {
                    "criterion": {"type": "string"},
                    "passed": {"type": "boolean"},
                    "feedback": {"type": ["string", "null"]},
                },
            },
        },
    },
}


@dataclass(frozen=True)
class ReviewTask:
    """One review to run: one `reviews` entry applied to the step, one output or one file."""

    step_id: str
    run_each: str
    criteria: dict[str, str]
    guidance: str | None
    outputs: dict[str, str | list[str]]
    target_file: str | None
    inputs: tuple[tuple[str, str], ...] = ()  # (label, path) of files from earlier steps
    # What the step changed in the project since it started (None: file tracking is off).
    files_changed: RunFiles | None = None


@dataclass(frozen=True)
class Verdict:
    passed: bool
    feedback: str
    criteria_results: list[CriterionResult] = field(default_factory=list)
    duration_ms: int | None = None


class ReviewerError(Exception):
    """The reviewer itself failed (crashed, timed out, answered garbage)."""


class ReviewerCouldNotRun(ReviewerError):
    """The reviewer never got to judge the work: it could not be started or handed its input.

    Unlike a reviewer that ran and failed, this uses up no quality attempt.
    """


def expand_tasks(
    *,
    steps: list[dict[str, Any]],
    submitted: dict[str, str | list[str]],
    inputs_by_step: dict[str, tuple[tuple[str, str], ...]] | None = None,
    files_by_step: dict[str, RunFiles] | None = None,
) -> list[ReviewTask]:
    """Turn each step's `reviews` into tasks: `step` once, a `file` output once, a `files`
    output once per file; a review of an optional output that was not handed in is skipped.

    ``steps`` are dicts with ``step_id``, ``outputs`` and ``reviews`` (the Step row's JSON).
    """
    tasks: list[ReviewTask] = []
    inputs_by_step = inputs_by_step or {}
    for step in steps:
        own = {output["name"] for output in step["outputs"]}
        step_outputs = {name: value for name, value in submitted.items() if name in own}
        inputs = inputs_by_step.get(step["step_id"], ())
        for review in step["reviews"]:
            common = {
                "step_id": step["step_id"],
                "run_each": review["run_each"],
                "criteria": dict(review["quality_criteria"]),
                "guidance": review.get("additional_review_guidance"),
                "inputs": inputs,
                "files_changed": (files_by_step or {}).get(step["step_id"]),
            }
            if review["run_each"] == "step":
                tasks.append(ReviewTask(outputs=step_outputs, target_file=None, **common))
                continue
            name = review["run_each"]
            if name not in step_outputs:
                continue
            value = step_outputs[name]
            if isinstance(value, list):
                tasks.extend(
                    ReviewTask(outputs={name: path}, target_file=path, **common) for path in value
                )
            else:
                tasks.append(ReviewTask(outputs={name: value}, target_file=value, **common))
    return tasks


def _output_files(outputs: dict[str, str | list[str]]) -> list[tuple[str, str]]:
    files = []
    for name, value in outputs.items():
        for path in value if isinstance(value, list) else [value]:
            files.append((name, path))
    return files


def _file_text(project_root: Path, path: str) -> str:
    full = project_root / path
    try:
        # Read inside the project only (an output swapped for a link out since the hand-in
        # would otherwise carry that file to the reviewer), regular files only (a pipe would
        # wait forever), and never more than the inline cap plus one byte.
        read = read_project_file(root=project_root, relative=path, limit=MAX_INLINE_BYTES)
    except FileNotFoundError:
        return "[File not found]"
    except NotRegularFile as exc:
        return f"[Error reading file: {full} is not a regular file (it is {exc.kind})]"
    except (OSError, ValueError) as exc:
        return f"[Error reading file: {exc}]"
    if read.truncated:
        return f"[Large file ({read.size} bytes) — not included in review. Read from: {full}]"
    try:
        # Decoded like Path.read_text: universal newlines.
        return io.TextIOWrapper(io.BytesIO(read.data), encoding="utf-8").read()
    except UnicodeDecodeError:
        return f"[Binary file — not included in review. Read from: {full}]"


def _section(
    *,
    title: str,
    files: list[tuple[str, str]],
    label: str,
    project_root: Path,
    max_inline_files: int,
) -> list[str]:
    parts = [f"{MARK} BEGIN {title} {MARK}"]
    if len(files) > max_inline_files:
        count = f"{len(files)} {'file' if len(files) == 1 else 'files'}"
        # A self-review lists every file by design (the agent has them open already); only a
        # reviewer given a few files inline is told that these were too many.
        why = (
            "listed, not included inline" if max_inline_files == 0 else "too many to include inline"
        )
        listing = [
            f"[{count} — {why}. Paths listed below. Read files as needed to evaluate criteria.]"
        ]
        listing.extend(f"- {path}  ({label}: {name})" for name, path in files)
        parts.append("\n".join(listing))
    else:
        parts.extend(f"{RULE} {path} {RULE}\n{_file_text(project_root, path)}" for _, path in files)
    parts.append(f"{MARK} END {title} {MARK}")
    return parts


# Paths beyond this many are counted, not listed: the list tells what to look at, no more.
MAX_LISTED_CHANGES = 200


def _files_changed_section(files: RunFiles) -> list[str]:
    """The files the step changed, by path (A added, M modified, D deleted): never inlined,
    since the outputs are, and a reviewer reads the others as it needs them."""
    lines: list[str] = []
    if files.status == "recorded":
        rows = [
            *(f"A {path}" for path in files.added),
            *(f"M {path}" for path in files.modified),
            *(f"D {path}" for path in files.deleted),
        ]
        if rows:
            lines.append(
                "Files this step changed in the project since it started "
                "(A added, M modified, D deleted). Read them as needed:"
            )
            lines.extend(rows[:MAX_LISTED_CHANGES])
            if len(rows) > MAX_LISTED_CHANGES:
                lines.append(f"[... and {len(rows) - MAX_LISTED_CHANGES} more]")
        else:
            lines.append("This step changed no file in the project since it started.")
    else:
        lines.append("The files this step changed in the project are unknown.")
    lines.extend(f"Note: {warning}" for warning in files.warnings)
    return [
        f"{MARK} BEGIN FILES CHANGED {MARK}",
        "\n".join(lines),
        f"{MARK} END FILES CHANGED {MARK}",
    ]


def build_payload(
    *,
    task: ReviewTask,
    project_root: Path,
    max_inline_files: int,
    notes: str | None,
    include_notes: bool,
) -> str:
    """The material a reviewer reads: inputs from earlier steps, then the outputs, then notes."""
    parts: list[str] = []
    if task.inputs:
        parts.extend(
            _section(
                title="INPUTS",
                files=list(task.inputs),
                label="input",
                project_root=project_root,
                max_inline_files=max_inline_files,
            )
        )
    files = _output_files(task.outputs)
    if files:
        parts.extend(
            _section(
                title="OUTPUTS",
                files=files,
                label="output",
                project_root=project_root,
                max_inline_files=max_inline_files,
            )
        )
    if task.files_changed is not None:
        parts.extend(_files_changed_section(task.files_changed))
    if include_notes and notes:
        parts.extend([f"{MARK} AUTHOR NOTES {MARK}", notes, f"{MARK} END AUTHOR NOTES {MARK}"])
    return "\n\n".join(parts) if parts else "[No files provided]"


def system_prompt(task: ReviewTask, notes: str | None) -> str:
    """Instructions for an external reviewer: who it is, the criteria, the answer format."""
    lines = [
        "You are an editor reviewing the files handed in as the outputs of one workflow step.",
        "Judge them against the quality criteria below and answer with the JSON verdict only.",
        "",
        "## Criteria to Evaluate",
        *(f"- **{name}**: {text}" for name, text in task.criteria.items()),
    ]
    if notes:
        lines += ["", "## Author Notes", "The author of the work left these notes:", "", notes]
    if task.guidance:
        lines += ["", "## Additional Context", task.guidance]
    lines += [
        "",
        "## Response Format",
        "```json",
        json.dumps(
            {
                "passed": True,
                "feedback": "One paragraph: what is good and what must change.",
                "criteria_results": [
                    {
                        "criterion": "<criterion name>",
                        "passed": True,
                        "feedback": "What fails and how to fix it, or null if passed",
                    }
                ],
            },
            indent=2,
        ),
        "```",
        "",
        "## Guidelines",
        "- Hold the work to each criterion firmly but fairly.",
        "- A criterion that does not apply to these files counts as passed.",
        "- Pass a criterion only when it is clearly met (or does not apply).",
        "- Make every piece of feedback specific enough to act on.",
        "- The overall verdict passes only if ALL criteria pass.",
    ]
    return "\n".join(lines)


def self_review_instructions(
    *, tasks: list[ReviewTask], project_root: Path, notes: str | None
) -> str:
    """The file an agent's reviewing sub-agent reads in self-review mode (paths, not content)."""
    outputs: dict[str, str | list[str]] = {}
    inputs: list[tuple[str, str]] = []
    for task in tasks:
        outputs.update(task.outputs)
        inputs.extend(i for i in task.inputs if i not in inputs)
    listing = build_payload(
        task=ReviewTask(
            step_id=tasks[0].step_id,
            run_each="step",
            criteria={},
            guidance=None,
            outputs=outputs,
            target_file=None,
            inputs=tuple(inputs),
            # The members of a concurrent entry share one start snapshot, so one list.
            files_changed=tasks[0].files_changed,
        ),
        project_root=project_root,
        max_inline_files=0,
        notes=None,
        include_notes=False,
    )
    lines = [
        "# Quality Review Instructions",
        "",
        "You are an editor checking the outputs of a workflow step against quality criteria. "
        "Read the files, judge every criterion, and report a clear verdict.",
        "",
        listing,
        "",
    ]
    reviews: list[ReviewTask] = []
    for task in tasks:  # one section per `reviews` entry, not per expanded file
        if not any(
            r.step_id == task.step_id
            and r.run_each == task.run_each
            and r.criteria == task.criteria
            for r in reviews
        ):
            reviews.append(task)
    for number, review in enumerate(reviews, start=1):
        if len(reviews) == 1:
            lines.append("## Criteria to Evaluate")
        elif review.run_each == "step":
            lines.append(f"## Review {number} (scope: all outputs together)")
        else:
            lines.append(f"## Review {number} (scope: output '{review.run_each}')")
        lines.append("")
        lines.extend(f"- **{name}**: {text}" for name, text in review.criteria.items())
        per_file = [
            t.target_file
            for t in tasks
            if t.step_id == review.step_id
            and t.run_each == review.run_each
            and isinstance(outputs.get(review.run_each), list)
        ]
        if per_file:
            lines += [
                "",
                f"Evaluate the above criteria for **each file** in output '{review.run_each}':",
                *(f"- {path}" for path in per_file),
            ]
        if review.guidance:
            lines += ["", "### Additional Context", review.guidance]
        lines.append("")
    if notes:
        lines += ["## Author Notes", "", notes, ""]
    lines += [
        "## Guidelines",
        "",
        "- Hold the work to each criterion firmly but fairly.",
        "- A criterion that does not apply to these files counts as passed.",
        "- Pass a criterion only when it is clearly met (or does not apply).",
        "- Make every piece of feedback specific enough to act on.",
        "- The review PASSES only if every criterion of every review passes.",
        "",
        "## Your Task",
        "",
        "1. Read each output file listed above (and the inputs, for context).",
        "2. Evaluate every criterion.",
        "3. Report **PASS** or **FAIL** for each criterion, with a reason.",
        "4. Give the overall result: **PASSED** or **FAILED**.",
        "5. For every failure, say exactly what must change.",
    ]
    return "\n".join(lines) + "\n"


def review_timeout(base_seconds: int, task: ReviewTask) -> int:
    """More files, more time: the base plus 30 s for each file beyond five."""
    return base_seconds + 30 * max(0, len(_output_files(task.outputs)) - 5)


def _verdict_from(data: object, raw: str, *, who: str) -> Verdict:
    if not isinstance(data, dict):
        raise ReviewerError(f"{who} answered with JSON that is not an object: {raw[:500]}")
    results: list[CriterionResult] = []
    for item in data.get("criteria_results") or []:
        item = item if isinstance(item, dict) else {}
        results.append(
            {
                "criterion": str(item.get("criterion", "")),
                "passed": bool(item.get("passed", False)),
                "feedback": item.get("feedback"),
            }
        )
    return Verdict(
        passed=bool(data.get("passed", False)),
        feedback=str(data.get("feedback") or "No feedback provided"),
        criteria_results=results,
    )


def _encoded(text: str) -> bytes:
    # A lone surrogate (possible in JSON input) has no UTF-8 form; it must not stop a review.
    return text.encode("utf-8", "replace")


@contextlib.contextmanager
def _temporary_text(text: str, *, who: str, what: str) -> Iterator[Path]:
    """``text`` in a private temporary file (0600) for the reviewer to read, removed after.

    Text that may be long or hold NUL goes to a reviewer on stdin or in a file, never in its
    argv or environment: exec refuses a string over 128 KiB (E2BIG) and cannot carry NUL.
    """
    try:
        fd, name = tempfile.mkstemp(prefix="deepwork-review-", suffix=".md")
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(_encoded(text))
        except BaseException:
            os.unlink(name)
            raise
    except OSError as exc:
        raise ReviewerCouldNotRun(
            f"{who} could not run: the {what} could not be written to a temporary file: {exc}"
        ) from None
    try:
        yield Path(name)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(name)


def _spawn_failure(exc: BaseException, *, argv: list[str], cwd: Path, who: str) -> str:
    """Why ``argv`` could not be started, in words an operator can act on."""
    if isinstance(exc, ValueError):  # "embedded null byte"
        return f"{who} could not run: its command or environment contains a NUL byte"
    assert isinstance(exc, OSError)
    if exc.errno == errno.E2BIG:
        return (
            f"{who} could not run: its command line and environment are too large for the "
            "system (E2BIG)"
        )
    if isinstance(exc, FileNotFoundError) and exc.filename == str(cwd):
        return f"{who} could not run: its working folder does not exist: {cwd}"
    if isinstance(exc, FileNotFoundError):
        return f"{who} could not run: command not found: {argv[0]}"
    if isinstance(exc, PermissionError):
        return f"{who} could not run: command is not executable: {argv[0]}"
    return f"{who} could not run: {argv[0]}: {exc.strerror or exc}"


async def _kill(process: asyncio.subprocess.Process) -> None:
    with contextlib.suppress(ProcessLookupError):  # it ended on its own meanwhile
        process.kill()
    await process.wait()


async def _run(
    argv: list[str],
    stdin: bytes,
    *,
    timeout_seconds: int,
    cwd: Path,
    env: dict[str, str],
    who: str,
) -> str:
    """Run a reviewer and return what it printed; ``ReviewerCouldNotRun`` if it never started,
    ``ReviewerError`` if it ran and failed."""
    try:
        process = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            cwd=str(cwd),
            env=env,
        )
    except (OSError, ValueError) as exc:
        raise ReviewerCouldNotRun(_spawn_failure(exc, argv=argv, cwd=cwd, who=who)) from None
    try:
        stdout, stderr = await asyncio.wait_for(process.communicate(stdin), timeout=timeout_seconds)
    except TimeoutError:
        await _kill(process)
        raise ReviewerError(f"{who} timed out after {timeout_seconds} seconds") from None
    except BaseException:
        # Cancelled (an abort won, the server is stopping): do not leave the reviewer running.
        await _kill(process)
        raise
    if process.returncode != 0:
        raise ReviewerError(
            f"{who} failed with exit code {process.returncode}:\n"
            f"stderr: {stderr.decode('utf-8', 'replace').strip()}"
        )
    return stdout.decode("utf-8", "replace")


class ClaudeReviewer:
    """Runs `claude --print` as DeepWork 0.9.1 does (payload on stdin, the verdict schema), with
    one difference: the system prompt, which carries the author's notes, is handed over in a
    file (``--system-prompt-file``) instead of in argv, so long notes or notes holding NUL
    still reach the reviewer."""

    kind = "claude"
    who = "Claude CLI"

    def __init__(self, command: str = "claude") -> None:
        self.command = command

    @property
    def name(self) -> str:
        return self.command

    def argv(self, system_file: Path) -> list[str]:
        return [
            self.command,
            "--print",
            "--output-format",
            "json",
            "--system-prompt-file",
            str(system_file),
            "--json-schema",
            json.dumps(VERDICT_SCHEMA),
            "-p",
            "--",
        ]

    async def review(
        self, *, system: str, payload: str, timeout_seconds: int, cwd: Path
    ) -> Verdict:
        started = time.monotonic()
        with _temporary_text(system, who=self.who, what="system prompt") as system_file:
            raw = await _run(
                self.argv(system_file),
                _encoded(payload),
                timeout_seconds=timeout_seconds,
                cwd=cwd,
                env=dict(os.environ),
                who=self.who,
            )
        try:
            wrapper = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise ReviewerError(
                f"Failed to parse Claude CLI response as JSON: {exc}\nResponse was: {raw[:500]}..."
            ) from None
        if not isinstance(wrapper, dict):
            raise ReviewerError(f"Claude CLI response is not a JSON object: {raw[:500]}...")
        if wrapper.get("is_error"):
            raise ReviewerError(
                f"Claude CLI returned error: {wrapper.get('result') or 'Unknown error'}"
            )
        if "structured_output" not in wrapper:
            raise ReviewerError(
                "Claude CLI response missing 'structured_output' field. "
                f"Response was: {raw[:500]}..."
            )
        verdict = _verdict_from(wrapper["structured_output"], raw, who=self.who)
        return Verdict(
            verdict.passed,
            verdict.feedback,
            verdict.criteria_results,
            duration_ms=int((time.monotonic() - started) * 1000),
        )


class CommandReviewer:
    """Any reviewer program: the whole prompt on stdin, a JSON verdict on stdout.

    The verdict may be bare (``{"passed": ..., "feedback": ...}``) or wrapped the way
    ``claude --output-format json`` wraps it (``{"structured_output": {...}}``). For programs
    that want them separately, the system prompt is also in a file named by
    ``DEEPWORK_REVIEW_SYSTEM_PROMPT_FILE`` and the verdict schema is in
    ``DEEPWORK_REVIEW_JSON_SCHEMA`` (the prompt is not put in the environment itself: exec
    refuses a string over 128 KiB and cannot carry NUL).
    """

    kind = "command"
    who = "Reviewer command"

    def __init__(self, command: str) -> None:
        self.argv_base = shlex.split(command)
        if not self.argv_base:
            raise ValueError("the external reviewer command is empty")
        self.command = command

    @property
    def name(self) -> str:
        return self.command

    async def review(
        self, *, system: str, payload: str, timeout_seconds: int, cwd: Path
    ) -> Verdict:
        started = time.monotonic()
        with _temporary_text(system, who=self.who, what="system prompt") as system_file:
            env = {
                **os.environ,
                "DEEPWORK_REVIEW_SYSTEM_PROMPT_FILE": str(system_file),
                "DEEPWORK_REVIEW_JSON_SCHEMA": json.dumps(VERDICT_SCHEMA),
            }
            raw = await _run(
                self.argv_base,
                _encoded(f"{system}\n\n{payload}"),
                timeout_seconds=timeout_seconds,
                cwd=cwd,
                env=env,
                who=self.who,
            )
        try:
            data = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise ReviewerError(
                f"Reviewer command printed invalid JSON: {exc}\nOutput was: {raw[:500]}"
            ) from None
        if isinstance(data, dict) and data.get("is_error"):
            raise ReviewerError(
                f"Reviewer command returned error: {data.get('result') or 'Unknown error'}"
            )
        if isinstance(data, dict) and "structured_output" in data:
            data = data["structured_output"]
        if not isinstance(data, dict) or "passed" not in data:
            raise ReviewerError(f"Reviewer command's JSON has no 'passed' verdict: {raw[:500]}")
        verdict = _verdict_from(data, raw, who=self.who)
        return Verdict(
            verdict.passed,
            verdict.feedback,
            verdict.criteria_results,
            duration_ms=int((time.monotonic() - started) * 1000),
        )


@dataclass(frozen=True)
class GateConfig:
    """How a server reviews: ``reviewer`` None means the agent reviews itself."""

    reviewer: ClaudeReviewer | CommandReviewer | None = None
    timeout: int = REVIEW_TIMEOUT_SECONDS
    max_attempts: int = 3
    concurrency: int = 4

    @property
    def max_inline_files(self) -> int:
        return 0 if self.reviewer is None else 5
