"""The one place the server starts ``git``.

Every look at a project's repository (the tracker's and each step's file changes, the review
tools' changed files, the quality gate's check of submitted files) runs git here, because a
repository's own configuration can name programs for git to run: a clean or smudge filter, an
fsmonitor, hooks (``post-index-change`` runs whenever git rewrites the index), a textconv or
external diff driver, a pager. A checkout is not trusted, so none of them may run:

* the environment is an allow-list: ``PATH`` and ``HOME`` (git finds the user's default ignore
  file under it; it names no program), ``LANG``/``LC_ALL=C`` so messages are parseable,
  ``GIT_CEILING_DIRECTORIES`` (it only narrows where git looks) and git's own switches below.
  System and global config are off (``GIT_CONFIG_NOSYSTEM``, ``GIT_CONFIG_GLOBAL=/dev/null``):
  a server's global config is an operator's, not a project's, but it can name programs too, and
  it can change the output formats this module's callers parse. Nothing else of the server's
  environment (its secret key, database URL) reaches git or anything git might start;
* settings passed to git override the repository's: no fsmonitor, hooks looked up in
  ``/dev/null``, no optional locks (so the index is never rewritten and no hook has a reason to
  run), no untracked cache or split index, no implicit bare repository, no transport (a partial
  clone must not fetch, which could start ``ssh`` or a credential helper), and every filter driver
  the repository's configuration defines has its clean, smudge and process commands emptied and
  is not required. They travel in ``GIT_CONFIG_COUNT``/``KEY``/``VALUE`` variables rather than
  ``-c``, which would misread a driver named with an ``=``;
* callers add ``--no-ext-diff --no-textconv`` to diffs and ``--ignore-submodules=dirty`` to
  status and diff, so git never starts itself inside a submodule whose configuration was not read;
* each git runs in its own process group with a timeout; when it passes, the whole group is
  killed, so nothing git started outlives the call;
* ``core.worktree`` is read from the repository's own file and cannot be overridden by a
  setting: when it points git away from the folder holding ``.git`` (``/`` or ``/etc``),
  ``GIT_WORK_TREE`` puts git back there and the caller gets a warning saying so, instead of
  paths of another folder.

The drivers are read with ``git config --list`` just before the first command of a ``Git``: a
configuration rewritten between that read and a later command could name a new driver. Whoever
can write into ``.git`` while the server reads it is already running code on the machine.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

DEFAULT_TIMEOUT_SECONDS = 20.0
# How long to wait for the pipes to close once the group was killed.
_REAP_SECONDS = 5.0

# Variables of the server's environment git may see; everything else is dropped.
_KEPT_VARIABLES = ("PATH", "HOME", "GIT_CEILING_DIRECTORIES", "XDG_CONFIG_HOME")

# Settings that override the repository's, whatever it says.
_OVERRIDES: tuple[tuple[str, str], ...] = (
    ("core.fsmonitor", "false"),
    ("core.hooksPath", "/dev/null"),
    ("core.untrackedCache", "false"),
    ("core.splitIndex", "false"),
    ("core.quotepath", "off"),
    ("core.pager", "cat"),
    ("safe.bareRepository", "explicit"),
    ("protocol.allow", "never"),
    ("submodule.recurse", "false"),
    ("status.submoduleSummary", "false"),
)
_FILTER_KEYS = ("clean", "smudge", "process")


class GitTrouble(Exception):
    """Git could not be run or did not answer in time; str() says which, for a warning."""


class GitNotInstalled(GitTrouble):
    pass


class GitTimedOut(GitTrouble):
    pass


@dataclass(frozen=True)
class Completed:
    """What one git process gave back."""

    returncode: int
    stdout: bytes
    stderr: bytes

    @property
    def ok(self) -> bool:
        return self.returncode == 0

    def message(self) -> str:
        """Git's complaint, for an error or a warning."""
        return self.stderr.decode("utf-8", "replace").strip() or f"exit {self.returncode}"


def repository_holder(root: Path) -> Path | None:
    """The folder from ``root`` up that holds a ``.git`` (the work tree git should use), as git
    looks for it (its location variables are scrubbed), or None when there is none. An entry
    that cannot be read raises ``OSError``: only git can say what it makes of it."""
    for folder in (root, *root.parents):
        try:
            (folder / ".git").lstat()
        except FileNotFoundError:
            continue
        return folder
    return None


def _same_folder(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve()
    except (OSError, RuntimeError):
        return False


@dataclass
class Git:
    """Git for the project at ``root`` (an absolute path; git runs with ``-C root``).

    ``warnings`` gathers what the caller should pass on (a misdirected work tree)."""

    root: Path
    # None: ``DEFAULT_TIMEOUT_SECONDS`` as it is when git runs.
    timeout: float | None = None
    warnings: list[str] = field(default_factory=list)
    _env: dict[str, str] | None = field(default=None, repr=False)

    def run(self, *args: str, stdin: bytes = b"") -> Completed:
        """Git ``args`` in ``root``; ``GitTrouble`` when git is missing, cannot start or does
        not answer within the timeout. A non-zero exit is returned, not raised."""
        return self._spawn(self._prepared(), args, stdin)

    def output(self, *args: str, stdin: bytes = b"") -> bytes:
        """Stdout of a command that must succeed; ``GitTrouble`` naming it otherwise."""
        done = self.run(*args, stdin=stdin)
        if not done.ok:
            raise GitTrouble(f"git {args[0]} failed: {done.message()}")
        return done.stdout

    def _prepared(self) -> dict[str, str]:
        if self._env is None:
            env = _base_env()
            listed = self._spawn(env, ("config", "--list", "-z"), b"")
            if not listed.ok:
                raise GitTrouble(f"git config failed: {listed.message()}")
            keys = [entry.split(b"\n", 1)[0] for entry in listed.stdout.split(b"\0") if entry]
            settings = list(_OVERRIDES)
            for driver in _filter_drivers(keys):
                settings += [(f"filter.{driver}.{key}", "") for key in _FILTER_KEYS]
                settings.append((f"filter.{driver}.required", "false"))
            _add_settings(env, settings)
            if b"core.worktree" in keys:
                self._direct_work_tree(env)
            self._env = env
        return self._env

    def _direct_work_tree(self, env: dict[str, str]) -> None:
        try:
            holder = repository_holder(self.root)
        except OSError:
            return
        if holder is None:
            return
        top = self._spawn(env, ("rev-parse", "--show-toplevel"), b"")
        named = top.stdout.decode("utf-8", "surrogateescape").strip() if top.ok else ""
        if named and _same_folder(Path(named), holder):
            return
        where = f"at {named}" if named else f"at a folder git cannot use ({top.message()})"
        self.warnings.append(
            f"the repository's core.worktree setting points git {where}, not at {holder} "
            f"where its .git is; {holder} was read instead"
        )
        env["GIT_WORK_TREE"] = os.fsdecode(holder)

    def _spawn(self, env: dict[str, str], args: tuple[str, ...], stdin: bytes) -> Completed:
        command = ["git", "--no-pager", "--no-optional-locks", "-C", os.fsdecode(self.root)]
        try:
            process = subprocess.Popen(
                [*command, *args],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=env,
                start_new_session=True,
            )
        except FileNotFoundError:
            raise GitNotInstalled("git is not installed (no git executable on PATH)") from None
        except OSError as exc:
            raise GitTrouble(f"git could not be run: {exc}") from None
        timeout = DEFAULT_TIMEOUT_SECONDS if self.timeout is None else self.timeout
        try:
            stdout, stderr = process.communicate(stdin, timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill_group(process)
            raise GitTimedOut(f"git {args[0]} did not answer within {timeout:g} seconds") from None
        return Completed(process.returncode, stdout, stderr)


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
    try:
        process.communicate(timeout=_REAP_SECONDS)
    except subprocess.TimeoutExpired:
        # Something that left the group still holds the pipes; stop waiting for it.
        process.kill()
        process.wait()


def _base_env() -> dict[str, str]:
    env = {name: os.environ[name] for name in _KEPT_VARIABLES if name in os.environ}
    env.setdefault("PATH", os.defpath)
    env.update(
        LANG="C",
        LC_ALL="C",
        GIT_CONFIG_NOSYSTEM="1",
        GIT_CONFIG_GLOBAL=os.devnull,
        GIT_ATTR_NOSYSTEM="1",
        GIT_TERMINAL_PROMPT="0",
        GIT_OPTIONAL_LOCKS="0",
        GIT_NO_LAZY_FETCH="1",
        GIT_PAGER="cat",
        PAGER="cat",
    )
    return env


def _add_settings(env: dict[str, str], settings: list[tuple[str, str]]) -> None:
    for index, (key, value) in enumerate(settings):
        env[f"GIT_CONFIG_KEY_{index}"] = key
        env[f"GIT_CONFIG_VALUE_{index}"] = value
    env["GIT_CONFIG_COUNT"] = str(len(settings))


def _filter_drivers(keys: list[bytes]) -> list[str]:
    """Every ``<driver>`` of a ``filter.<driver>.<key>`` setting (a driver's name may hold
    dots; the key is after the last one)."""
    drivers: dict[str, None] = {}
    for raw in keys:
        key = raw.decode("utf-8", "surrogateescape")
        if key.lower().startswith("filter.") and key.count(".") >= 2:
            drivers[key[len("filter.") : key.rindex(".")]] = None
    return list(drivers)
