"""0.14's ``precomputed_info_for_reviewer_bash_command``: run each rule's command
once, from the project root, before its instruction files are written, and keep what the
reviewer is to read under ``## Precomputed Context``.

A command's failure is the reviewer's information too, so it is rendered as text and never
raised. Commands run in their own process group: on timeout the whole group is killed, so a
``sleep`` inside a pipeline cannot outlive the call.

A command is a program a project names, run as the server's user, so:

* whoever serves the call says whether the project's commands may run (``CommandPolicy``):
  over stdio the project is the user's own and they run, as in DeepWork 0.14; the web server
  runs them only for a project a person allowed them for in the admin. Otherwise nothing runs
  and the reviewer reads why instead of the output. A caller that says nothing gets nothing run;
* at most ``MAX_CONCURRENT`` commands run at once in the whole process, however many calls
  ask for them;
* a command sees ``PATH``, ``HOME``, ``LANG`` and ``PWD`` (the project root) and nothing else
  of the server's environment: not its secret key, not its database's address.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import threading
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

logger = logging.getLogger(__name__)

# DeepWork 0.14's limits; tests lower the timeout rather than wait a minute.
TIMEOUT_SECONDS: float = 60
MAX_PARALLEL = 8
# Commands running at once in this process, across every call (each call still runs its own
# commands in parallel, up to ``MAX_PARALLEL``, as slots come free).
MAX_CONCURRENT = 4
_SLOTS = threading.BoundedSemaphore(MAX_CONCURRENT)
# A command that floods stdout must not make a huge instruction file.
MAX_OUTPUT_BYTES = 256 * 1024


@dataclass(frozen=True)
class CommandPolicy:
    """Whether a project's precompute commands may run for this call; when not, ``reason``
    completes "Precomputed context skipped: ..." for the reviewer."""

    allowed: bool
    reason: str = ""

    def skipped(self) -> str:
        return f"**Precomputed context skipped:** {self.reason}"


# The user's own project, served over stdio: its commands run, as DeepWork 0.14 runs them.
RUN_COMMANDS = CommandPolicy(allowed=True)
# What a caller that did not decide gets.
NO_COMMANDS = CommandPolicy(
    allowed=False, reason="the server was not told that this project's commands may run."
)


def commands_not_allowed(project_name: str) -> CommandPolicy:
    """The web server's answer for a project no person has allowed commands for."""
    return CommandPolicy(
        allowed=False,
        reason=(
            "this server runs a project's precompute commands only once a person has allowed "
            f'them for the project (admin, Projects, "Allow review commands"), and no one has '
            f"for {project_name}."
        ),
    )


def _environment(project_root: Path) -> dict[str, str]:
    env = {name: os.environ[name] for name in ("PATH", "HOME", "LANG") if name in os.environ}
    env.setdefault("PATH", os.defpath)
    env["PWD"] = str(project_root)
    return env


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


def run_command(command: str, project_root: Path, policy: CommandPolicy = NO_COMMANDS) -> str:
    """The text for ``## Precomputed Context``: stdout, what went wrong, or why it did not
    run (``policy``)."""
    if not policy.allowed:
        return policy.skipped()
    with _SLOTS:
        return _run(command, project_root)


def _run(command: str, project_root: Path) -> str:
    timeout = TIMEOUT_SECONDS
    try:
        proc = subprocess.Popen(  # noqa: S602 - the project's own rule asks for a shell command
            command,
            shell=True,
            cwd=project_root,
            env=_environment(project_root),
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


def run_commands(
    commands: Iterable[str], project_root: Path, policy: CommandPolicy = NO_COMMANDS
) -> Mapping[str, str]:
    """Each distinct command run once, up to ``MAX_PARALLEL`` of this call at a time and
    ``MAX_CONCURRENT`` in the process: command → text (why it was skipped, by ``policy``)."""
    unique = list(dict.fromkeys(commands))
    if not unique:
        return {}
    if not policy.allowed:
        return dict.fromkeys(unique, policy.skipped())
    with ThreadPoolExecutor(max_workers=min(MAX_PARALLEL, len(unique))) as pool:
        results = pool.map(lambda command: run_command(command, project_root, policy), unique)
        return dict(zip(unique, results, strict=True))
