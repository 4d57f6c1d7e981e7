"""0.14's ``precomputed_info_for_reviewer_bash_command`` (digest §5.3): run each rule's command
once, from the project root, before its instruction files are written, and keep what the
reviewer is to read under ``## Precomputed Context``.

A command's failure is the reviewer's information too, so it is rendered as text and never
raised. Commands run in their own process group: on timeout the whole group is killed, so a
``sleep`` inside a pipeline cannot outlive the call.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

logger = logging.getLogger(__name__)

# DeepWork 0.14's limits; tests lower the timeout rather than wait a minute.
TIMEOUT_SECONDS: float = 60
MAX_PARALLEL = 8
# A command that floods stdout must not make a huge instruction file.
MAX_OUTPUT_BYTES = 256 * 1024


def _seconds(value: float) -> str:
    return f"{value:g}s"


def _fenced(text: str) -> str:
    longest = 0
    run = 0
    for char in text:
        run = run + 1 if char == "`" else 0
        longest = max(longest, run)
    fence = "`" * max(3, longest + 1)
    return f"{fence}\n{text.rstrip(chr(10))}\n{fence}"


def _decode(data: bytes) -> tuple[str, bool]:
    cut = len(data) > MAX_OUTPUT_BYTES
    return data[:MAX_OUTPUT_BYTES].decode("utf-8", errors="replace"), cut


def run_command(command: str, project_root: Path) -> str:
    """The text for ``## Precomputed Context``: stdout, or what went wrong."""
    timeout = TIMEOUT_SECONDS
    try:
        proc = subprocess.Popen(  # noqa: S602 - the project's own rule asks for a shell command
            command,
            shell=True,
            cwd=project_root,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
    except OSError as exc:
        logger.warning("Precompute command could not start: %s: %s", command, exc)
        return f"**Precompute command failed** (could not start):\n\n{_fenced(str(exc))}"
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        try:
            proc.communicate(timeout=5)
        except subprocess.TimeoutExpired:
            # A grandchild that left the group still holds the pipes; stop waiting for it.
            proc.kill()
        logger.warning("Precompute command timed out after %s: %s", _seconds(timeout), command)
        return f"**Precompute command timed out** after {_seconds(timeout)}:\n\n{_fenced(command)}"
    if proc.returncode != 0:
        text, _cut = _decode(stderr)
        logger.warning("Precompute command exited with %s: %s", proc.returncode, command)
        return f"**Precompute command failed** (exit code {proc.returncode}):\n\n{_fenced(text)}"
    text, cut = _decode(stdout)
    if cut:
        text += f"\n\n(output cut after {MAX_OUTPUT_BYTES} bytes)"
    return text


def run_commands(commands: Iterable[str], project_root: Path) -> Mapping[str, str]:
    """Each distinct command run once, up to ``MAX_PARALLEL`` at a time: command → text."""
    unique = list(dict.fromkeys(commands))
    if not unique:
        return {}
    with ThreadPoolExecutor(max_workers=min(MAX_PARALLEL, len(unique))) as pool:
        results = pool.map(lambda command: run_command(command, project_root), unique)
        return dict(zip(unique, results, strict=True))
