"""Which files a task (or a step) changed: a snapshot at its start, a comparison at its end.

The original tracker asked git in the server's working directory, missed untracked files, never
compared its non-git snapshots and returned nothing when the start commit was gone. Here:

* In a git work tree the snapshot records HEAD, the branch and a fingerprint of every path that
  was already dirty or untracked. At the end the start commit is compared with the working
  tree (``git status`` when HEAD has not moved; ``git diff <start>`` otherwise, which covers
  commits, staged and unstaged changes in one pass, so a file added in a commit and deleted
  again nets out), untracked files are added, and every path the snapshot fingerprinted is
  judged by its fingerprint alone: a file that was dirty before the task and is byte-for-byte
  the same now was not changed by the task, whatever was committed.
* Anywhere else (no repository, or no git binary) every file of the tree is fingerprinted and
  the two trees are really compared.

Nothing here raises for trouble with git or the files: what cannot be known is left out and
said in a warning. Git runs through ``workflows.git``: with ``-C root`` and an allow-listed
environment, so neither the server's working directory nor a ``GIT_DIR`` it inherited can point
it at another repository, and nothing the repository's configuration names is run.

A watched look (a project ``workflows.watch`` follows) asks git only about the paths touched
since the snapshot, and judges them with the same ``_judge_git`` as a whole look; whenever the
watch cannot vouch for the answer the look is a whole one.

Why one module of some 1,100 lines: snapshot, comparison and the watched look must read files,
git and racy timestamps by the same rules, or a change would be counted twice or lost, and the
tests hold the watched look to the whole look's answer path by path. It is past the size at
which it was to be split: the seams are its section headers (values, git, files, snapshot,
comparison, watched looks), and the next change to it should first move git and the files'
reading into modules of their own.
"""

from __future__ import annotations

import base64
import binascii
import errno
import hashlib
import os
import stat
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path, PurePosixPath
from typing import Any, Literal

from workflows import watch
from workflows.files import NotRegularFile, file_kind, open_regular_file
from workflows.git import DEFAULT_TIMEOUT_SECONDS, Git, GitTrouble, repository_holder

GIT_TIMEOUT_SECONDS = DEFAULT_TIMEOUT_SECONDS
# A snapshot is stored in a JSON column and hashes what it records: both stay bounded.
MAX_PATHS = 20_000
MAX_HASHED_BYTES = 256 * 1024 * 1024
# A recorded state vouches for a file's content later, by size and modification time alone,
# only if it was modified at least this long before a snapshot began: a file written within
# the file system's timestamp granularity of the snapshot could change again without its time
# moving (git calls such entries "racy" and re-reads them too).
RACY_NS = 2_000_000_000

# Never part of a task's work, and often huge: version-control internals, dependency and tool
# caches, the server's own scratch folder.
SKIPPED_DIRS = frozenset(
    {
        ".git",
        ".hg",
        ".svn",
        "node_modules",
        ".venv",
        "venv",
        "__pycache__",
        ".mypy_cache",
        ".pytest_cache",
        ".ruff_cache",
        ".tox",
        ".nox",
    }
)
SKIPPED_PATHS = frozenset({".deepwork/tmp"})

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
_CHUNK = 1024 * 1024


# --- Values ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class FileState:
    """One file as it stood: ``digest`` is ``sha256:<hex>`` for a regular file, ``symlink:<hex>``
    (of the link's target text) for a link, the kind for anything else, and None when it was
    not hashed (over a cap, or unreadable); then size and mtime stand in for the content."""

    size: int
    mtime_ns: int
    digest: str | None

    def same_as(self, other: FileState) -> bool:
        if self.digest is not None and other.digest is not None:
            return self.digest == other.digest
        return (self.size, self.mtime_ns) == (other.size, other.mtime_ns)

    def to_json(self) -> list[Any]:
        return [self.size, self.mtime_ns, self.digest]

    @classmethod
    def from_json(cls, data: Any, *, where: str) -> FileState:
        if not (
            isinstance(data, list)
            and len(data) == 3
            and all(isinstance(n, int) and not isinstance(n, bool) for n in data[:2])
            and (data[2] is None or isinstance(data[2], str))
        ):
            raise ValueError(f"{where} must be [size, mtime_ns, digest or null], not {data!r}")
        return cls(size=data[0], mtime_ns=data[1], digest=data[2])


@dataclass(frozen=True)
class Snapshot:
    """What a project looked like at a task's (or step's) start.

    ``kind`` "git": ``head`` (None before the first commit), ``branch`` (None when detached) and
    ``files`` holding every path that was dirty or untracked then (None: a tracked file that was
    deleted). ``kind`` "tree": ``files`` holds every file of the tree; when the walk stopped at
    the cap, ``truncated_after`` is the last path recorded, and later paths are not compared.
    ``warnings`` are carried into the comparison's result.
    """

    kind: Literal["git", "tree"]
    head: str | None = None
    branch: str | None = None
    files: Mapping[str, FileState | None] = field(default_factory=dict)
    truncated_after: str | None = None
    warnings: tuple[str, ...] = ()
    # When the look at the files began (time.time_ns()); None in snapshots stored before it was
    # recorded. It tells which recorded states may be trusted by their size and time alone.
    taken_at_ns: int | None = None
    # The file watch's mark at this look (``workflows.watch.Mark``), when the project was
    # watched: a later look in the same process asks git only about the paths touched since.
    watch: str | None = None

    def to_json(self) -> dict[str, Any]:
        files: dict[str, Any] = {}
        raw_files: dict[str, Any] = {}
        for path, state in self.files.items():
            value = None if state is None else state.to_json()
            if _is_text(path):
                files[path] = value
            else:
                # A file name that is not UTF-8 cannot be a JSON key stored by PostgreSQL.
                raw_files[base64.b64encode(os.fsencode(path)).decode()] = value
        return {
            "version": 1,
            "kind": self.kind,
            "head": self.head,
            "branch": self.branch,
            "files": files,
            "raw_files": raw_files,
            "truncated_after": self.truncated_after,
            "warnings": list(self.warnings),
            "taken_at_ns": self.taken_at_ns,
            "watch": self.watch,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Snapshot:
        """The snapshot ``to_json`` gave; ``ValueError`` naming the field when it is malformed."""
        if not isinstance(data, dict):
            raise ValueError(f"snapshot must be an object, not {type(data).__name__}")
        if data.get("version") != 1:
            raise ValueError(f"snapshot.version must be 1, not {data.get('version')!r}")
        kind = data.get("kind")
        if kind not in ("git", "tree"):
            raise ValueError(f"snapshot.kind must be 'git' or 'tree', not {kind!r}")
        for name in ("head", "branch", "truncated_after"):
            if data.get(name) is not None and not isinstance(data[name], str):
                raise ValueError(f"snapshot.{name} must be a string or null")
        head = data.get("head")
        if head is not None and not (
            len(head) in (40, 64) and all(c in "0123456789abcdef" for c in head)
        ):
            raise ValueError(
                f"snapshot.head must be a commit id (40 or 64 hex digits), not {head!r}"
            )
        files = data.get("files")
        if not isinstance(files, dict):
            raise ValueError("snapshot.files must be an object of path -> state")
        raw_files = data.get("raw_files", {})
        if not isinstance(raw_files, dict):
            raise ValueError("snapshot.raw_files must be an object of base64 path -> state")
        taken_at_ns = data.get("taken_at_ns")
        if taken_at_ns is not None and (
            not isinstance(taken_at_ns, int) or isinstance(taken_at_ns, bool)
        ):
            raise ValueError(
                f"snapshot.taken_at_ns must be an integer or null, not {taken_at_ns!r}"
            )
        watch = data.get("watch")
        if watch is not None and not isinstance(watch, str):
            raise ValueError(f"snapshot.watch must be a string or null, not {watch!r}")
        warnings = data.get("warnings")
        if not isinstance(warnings, list) or not all(isinstance(w, str) for w in warnings):
            raise ValueError("snapshot.warnings must be a list of strings")
        states: dict[str, FileState | None] = {}
        for path, state in files.items():
            where = f"snapshot.files[{path!r}]"
            states[path] = None if state is None else FileState.from_json(state, where=where)
        for key, state in raw_files.items():
            where = f"snapshot.raw_files[{key!r}]"
            try:
                path = os.fsdecode(base64.b64decode(key, validate=True))
            except (binascii.Error, ValueError):
                raise ValueError(f"{where} is not named in base64") from None
            states[path] = None if state is None else FileState.from_json(state, where=where)
        return cls(
            kind="git" if kind == "git" else "tree",
            head=data.get("head"),
            branch=data.get("branch"),
            files=states,
            truncated_after=data.get("truncated_after"),
            warnings=tuple(warnings),
            taken_at_ns=taken_at_ns,
            watch=watch,
        )


@dataclass(frozen=True)
class FilesChanged:
    """Sorted project-relative POSIX paths; a rename is a delete plus an add."""

    added: list[str]
    modified: list[str]
    deleted: list[str]
    warnings: list[str]

    def paths(self) -> list[str]:
        return sorted({*self.added, *self.modified, *self.deleted})


# --- Git ---------------------------------------------------------------------------------------


class _NotARepository(GitTrouble):
    pass


def _git(git: Git, *args: str, stdin: bytes = b"") -> bytes:
    """Git's stdout for ``args`` (``stdin`` its input; an empty one rather than the null
    device, which need not be what it should); ``GitTrouble`` on any failure."""
    done = git.run(*args, stdin=stdin)
    if not done.ok:
        message = done.message()
        if "not a git repository" in message:
            raise _NotARepository(message)
        raise GitTrouble(f"git {args[0]} failed: {message}")
    return done.stdout


def _git_for(root: Path) -> Git:
    # Read at call time: tests lower the timeout on this module.
    return Git(root, timeout=GIT_TIMEOUT_SECONDS)


@dataclass(frozen=True)
class _Status:
    head: str | None
    branch: str | None
    dirty: list[str]  # tracked paths that differ from HEAD in the index or the working tree
    against_head: dict[str, str]  # those of them that differ from HEAD on disk: A, M or D
    untracked: list[str]
    nested: list[str]  # untracked folders git reports whole (nested repositories)


def _is_top_of_work_tree(root: Path) -> bool:
    """Whether ``root`` holds its own repository (a ``.git`` folder with a HEAD, or the
    ``gitdir:`` file of a linked work tree or submodule): then git's paths need no prefix."""
    dot_git = root / ".git"
    try:
        info = dot_git.lstat()
        if stat.S_ISDIR(info.st_mode):
            return (dot_git / "HEAD").is_file()
        if stat.S_ISREG(info.st_mode) and info.st_size < 4096:
            return dot_git.read_bytes().startswith(b"gitdir: ")
    except OSError:
        pass
    return False


def _outside_any_repository(root: Path) -> bool:
    """Whether no folder from ``root`` up holds a ``.git``: then git would only say "not a git
    repository"."""
    try:
        return repository_holder(root) is None
    except OSError:
        return False  # unreadable: let git decide


def _git_status(git: Git) -> _Status:
    root = git.root
    # The common case, a project at the top of its repository, costs one git process instead
    # of two: only a project inside a repository needs rev-parse to learn where it sits; a
    # plain folder costs none.
    if _outside_any_repository(root):
        raise _NotARepository(f"no git repository at or above {root}")
    if _is_top_of_work_tree(root):
        prefix = ""
    else:
        inside = _git(git, "rev-parse", "--is-inside-work-tree", "--show-prefix").split(b"\n")
        if inside[0] != b"true":
            raise _NotARepository("not inside a git work tree")
        prefix = os.fsdecode(inside[1]) if len(inside) > 1 else ""
    out = _git(
        git,
        "status",
        "--porcelain=v2",
        "--branch",
        # Counting commits against an upstream far away can take longer than the rest.
        "--no-ahead-behind",
        "-z",
        "--untracked-files=all",
        "--ignored=no",
        "--no-renames",
        # Looking inside a submodule starts another git, in a repository whose configuration
        # (and so its filter drivers) was not read: a submodule counts by its commit only.
        "--ignore-submodules=dirty",
        "--",
        ".",
    )
    head: str | None = None
    branch: str | None = None
    dirty: list[str] = []
    against_head: dict[str, str] = {}
    untracked: list[str] = []
    nested: list[str] = []
    tokens = iter(out.split(b"\0"))
    for token in tokens:
        if token.startswith(b"# branch.oid "):
            oid = token[len(b"# branch.oid ") :].decode()
            head = None if oid == "(initial)" else oid
        elif token.startswith(b"# branch.head "):
            name = os.fsdecode(token[len(b"# branch.head ") :])
            branch = None if name == "(detached)" else name
        elif token[:2] == b"1 ":
            path = os.fsdecode(token.split(b" ", 8)[8])
            dirty.append(path)
            letter = _against_head(token[2:4].decode())
            if letter is not None:
                against_head[path] = letter
        elif token[:2] == b"2 ":
            # Renames are off, but a path pair must still be read as a pair if one comes.
            new, old = os.fsdecode(token.split(b" ", 9)[9]), os.fsdecode(next(tokens, b""))
            dirty += [new, old]
            against_head.update({new: "A", old: "D"})
        elif token[:2] == b"u ":
            path = os.fsdecode(token.split(b" ", 10)[10])
            dirty.append(path)
            against_head[path] = "M"
        elif token[:2] == b"? ":
            name = os.fsdecode(token[2:])
            (nested if name.endswith("/") else untracked).append(name)

    def below(paths: list[str]) -> list[str]:
        # Porcelain paths are relative to the repository's top, not to the project root.
        return [p[len(prefix) :] for p in paths if p.startswith(prefix) and p != prefix]

    changed = {p[len(prefix) :]: v for p, v in against_head.items() if p.startswith(prefix)}
    return _Status(head, branch, below(dirty), changed, below(untracked), below(nested))


def _against_head(xy: str) -> str | None:
    """A, M or D for a status entry (X: index against HEAD, Y: disk against the index)."""
    index, disk = xy[0], xy[1]
    if disk == "D":
        return None if index == "A" else "D"  # staged as new, then removed: never existed
    if index in ("A", "D"):
        return index  # D: dropped from the index; if still on disk it is listed as untracked
    return "M"


def _git_diff(git: Git, base: str) -> dict[str, str]:
    """Path -> A, M or D between commit ``base`` and the working tree, below the root."""
    out = _git(
        git,
        "diff",
        "--name-status",
        "-z",
        "--no-renames",
        "--no-ext-diff",
        "--no-textconv",
        "--ignore-submodules=dirty",
        "--relative",
        base,
    )
    changes: dict[str, str] = {}
    tokens = iter(out.split(b"\0"))
    for token in tokens:
        if not token:
            continue
        letter = token[:1].decode()
        if letter in ("R", "C"):
            old, new = next(tokens, b""), next(tokens, b"")
            if letter == "R":
                changes[os.fsdecode(old)] = "D"
            changes[os.fsdecode(new)] = "A"
            continue
        path = os.fsdecode(next(tokens, b""))
        changes[path] = letter if letter in ("A", "D") else "M"
    return changes


def _commit_exists(git: Git, sha: str) -> bool:
    try:
        _git(git, "rev-parse", "--verify", "--quiet", "--end-of-options", f"{sha}^{{commit}}")
    except GitTrouble:
        return False
    return True


def _empty_tree(git: Git) -> str:
    # The empty tree's id depends on the repository's hash (SHA-1 or SHA-256); ask git.
    return _git(git, "hash-object", "-t", "tree", "--stdin").decode().strip()


# --- Files -------------------------------------------------------------------------------------


class _Budget:
    """Bytes still to be hashed; past it, files are fingerprinted by size and mtime only."""

    def __init__(self) -> None:
        self.left = MAX_HASHED_BYTES
        self.exhausted = False


def _state_at(
    dir_fd: int, name: str, budget: _Budget, trusted: FileState | None = None
) -> FileState | None:
    """The state of entry ``name`` of ``dir_fd``, never following a link; None if absent.
    ``trusted`` is returned as it is while the entry's size and modification time match it."""
    try:
        info = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except (FileNotFoundError, NotADirectoryError):
        return None
    if trusted is not None and (info.st_size, info.st_mtime_ns) == (
        trusted.size,
        trusted.mtime_ns,
    ):
        return trusted
    if stat.S_ISLNK(info.st_mode):
        target = os.fsencode(os.readlink(name, dir_fd=dir_fd))
        return FileState(
            info.st_size, info.st_mtime_ns, "symlink:" + hashlib.sha256(target).hexdigest()
        )
    if not stat.S_ISREG(info.st_mode):
        return FileState(info.st_size, info.st_mtime_ns, file_kind(info.st_mode).split()[-1])
    if info.st_size > budget.left:
        budget.exhausted = True
        return FileState(info.st_size, info.st_mtime_ns, None)
    digest = hashlib.sha256()
    read = 0
    with open_regular_file(name, dir_fd=dir_fd, follow_symlinks=False) as handle:
        after = os.fstat(handle.fileno())
        while chunk := handle.read(min(_CHUNK, budget.left - read + 1)):
            read += len(chunk)
            if read > budget.left:  # it grew while being read
                budget.exhausted = True
                return FileState(after.st_size, after.st_mtime_ns, None)
            digest.update(chunk)
    budget.left -= read
    return FileState(read, after.st_mtime_ns, "sha256:" + digest.hexdigest())


# Digests this process computed, by (root, path), kept only for files that had not been modified
# for ``RACY_NS`` when read: while such a file's size and time are unchanged its content is
# too, so the next snapshot or comparison need not read it again. Bounded: cleared when full.
_KNOWN_STATES: dict[tuple[str, str], FileState] = {}
_KNOWN_STATES_MAX = 50_000


def _remember(root: Path, path: str, state: FileState | None, horizon_ns: int) -> None:
    if state is None or state.digest is None or state.mtime_ns >= horizon_ns:
        return
    if len(_KNOWN_STATES) >= _KNOWN_STATES_MAX:
        _KNOWN_STATES.clear()
    _KNOWN_STATES[(str(root), path)] = state


def _known(root: Path, path: str) -> FileState | None:
    return _KNOWN_STATES.get((str(root), path))


class _Reader:
    """Reads the state of project paths, never following a link on the way, opening each
    folder once however many of its files are read. ``close`` releases the folders."""

    def __init__(self, root: Path, budget: _Budget, warnings: list[str]) -> None:
        self.root = root
        self.budget = budget
        self.warnings = warnings
        self._dirs: dict[tuple[str, ...], int] = {}
        self._horizon_ns = time.time_ns() - RACY_NS

    def _dir(self, folders: tuple[str, ...]) -> int:
        fd = self._dirs.get(folders)
        if fd is not None:
            return fd
        if folders:
            fd = os.open(folders[-1], _DIR_FLAGS, dir_fd=self._dir(folders[:-1]))
        else:
            fd = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_CLOEXEC", 0))
        self._dirs[folders] = fd
        return fd

    def close(self) -> None:
        for fd in self._dirs.values():
            os.close(fd)
        self._dirs.clear()

    def state(self, relative: str, trusted: FileState | None = None) -> FileState | None:
        """The state of the project path ``relative``; None if it does not exist.

        ``trusted`` is a state recorded earlier that may stand for the file while its size and
        modification time are unchanged, so an untouched file is not read again."""
        *folders, name = PurePosixPath(relative).parts
        try:
            state = _state_at(
                self._dir(tuple(folders)),
                name,
                self.budget,
                trusted or _known(self.root, relative),
            )
            _remember(self.root, relative, state, self._horizon_ns)
            return state
        except FileNotFoundError:
            return None
        except (NotRegularFile, OSError) as exc:
            if isinstance(exc, OSError) and exc.errno in (errno.ENOTDIR, errno.ELOOP):
                # A folder on the way is now a file or a link: the path itself is gone.
                return None
            self.warnings.append(
                f"'{relative}' could not be read ({exc}); compared by size and time only"
            )
            try:
                info = (self.root / relative).lstat()
            except OSError:
                return None
            return FileState(info.st_size, info.st_mtime_ns, None)


def _budget_warning(budget: _Budget) -> list[str]:
    if not budget.exhausted:
        return []
    return [
        f"more than {MAX_HASHED_BYTES} bytes to hash: the remaining files are compared by size "
        "and modification time only"
    ]


def _walk(root: Path) -> Iterator[tuple[int, str, str]]:
    """(directory descriptor, name, project path) of every non-directory entry, in path order
    (children sorted by name, depth first), skipping ``SKIPPED_DIRS`` and never following links.
    The descriptor is valid until the next item is taken."""

    def visit(fd: int, prefix: str) -> Iterator[tuple[int, str, str]]:
        with os.scandir(fd) as listing:
            entries = sorted(listing, key=lambda entry: entry.name)
        for entry in entries:
            path = prefix + entry.name
            if entry.is_dir(follow_symlinks=False):
                if entry.name in SKIPPED_DIRS or path in SKIPPED_PATHS:
                    continue
                try:
                    inner = os.open(entry.name, _DIR_FLAGS, dir_fd=fd)
                except OSError:
                    continue  # unreadable, or swapped for a link since it was listed
                try:
                    yield from visit(inner, path + "/")
                finally:
                    os.close(inner)
            else:
                yield fd, entry.name, path

    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_CLOEXEC", 0))
    try:
        yield from visit(fd, "")
    finally:
        os.close(fd)


def _is_text(path: str) -> bool:
    """False for a file name that is not valid UTF-8 (held with surrogate escapes)."""
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _shown(path: str) -> str:
    # Results go to agents and JSON columns: undecodable bytes are shown as \xNN escapes.
    return path if _is_text(path) else os.fsencode(path).decode("utf-8", "backslashreplace")


def _is_scratch(path: str) -> bool:
    return any(path == skipped or path.startswith(skipped + "/") for skipped in SKIPPED_PATHS)


def _order(path: str) -> tuple[str, ...]:
    return tuple(path.split("/"))


def _tree_files(
    root: Path, warnings: list[str], trusted: Mapping[str, FileState | None] | None = None
) -> tuple[dict[str, FileState], str | None]:
    """Every file of the tree, each hashed unless ``trusted`` holds a state its size and time
    still match."""
    files: dict[str, FileState] = {}
    budget = _Budget()
    walked: str | None = None
    last: str | None = None
    trusted = trusted or {}
    horizon_ns = time.time_ns() - RACY_NS
    try:
        for dir_fd, name, path in _walk(root):
            if len(files) >= MAX_PATHS:
                last = walked
                warnings.append(
                    f"the project has more than {MAX_PATHS} files: only the first {MAX_PATHS} "
                    f"(up to '{last}') are compared"
                )
                break
            try:
                state = _state_at(dir_fd, name, budget, trusted.get(path) or _known(root, path))
                _remember(root, path, state, horizon_ns)
            except OSError as exc:
                warnings.append(f"'{path}' could not be read ({exc}); compared by size only")
                state = None
            if state is not None:
                files[path] = state
                walked = path
    except OSError as exc:
        warnings.append(f"the project folder could not be read: {exc}")
    warnings.extend(_budget_warning(budget))
    return files, last


# --- Snapshot ----------------------------------------------------------------------------------


def _require_absolute(root: Path) -> None:
    if not root.is_absolute():
        raise ValueError(f"root must be an absolute path, not {str(root)!r}")


def _trusted(snapshot: Snapshot) -> dict[str, FileState | None]:
    """The snapshot's states that may stand for their files while size and time match."""
    if snapshot.taken_at_ns is None:
        return {}
    before = snapshot.taken_at_ns - RACY_NS
    return {
        path: state
        for path, state in snapshot.files.items()
        if state is not None and state.mtime_ns < before
    }


def snapshot_take(*, root: Path, watched: bool = False) -> Snapshot:
    """The project at ``root`` as it stands; never raises for git or file trouble (it warns).
    ``watched``: start watching the project's files (``workflows.watch``) so that a later
    ``changes_and_snapshot(watched=True)`` in this process need not look at all of them."""
    _require_absolute(root)
    taken_at = time.time_ns()
    mark = _mark(root) if watched else None
    if mark is not None:
        # A session's first step starts from the watch's latest snapshot of the project, moved
        # on by the paths touched since, rather than from a look at every file.
        latest = _latest.get(root)
        partial = _watched_look(root, latest, mark, taken_at) if latest is not None else None
        if partial is not None:
            return partial[1]
    if not root.is_dir():
        # Asking git first would only add its own "cannot change to" to the same news.
        return Snapshot(
            kind="tree",
            warnings=(f"the project folder {root} is not a directory",),
            taken_at_ns=taken_at,
        )
    warnings: list[str] = []
    git = _git_for(root)
    try:
        status = _git_status(git)
    except _NotARepository:
        pass
    except GitTrouble as exc:
        warnings += [*git.warnings, f"{exc}; the project's files were snapshotted without git"]
    else:
        found = _git_snapshot(root, status, [*git.warnings, *warnings], taken_at, {})
        return _marked(found, mark, status, root)
    return _tree_snapshot(root, warnings, taken_at, {})


def _tree_snapshot(
    root: Path, warnings: list[str], taken_at: int, trusted: Mapping[str, FileState | None]
) -> Snapshot:
    files, last = _tree_files(root, warnings, trusted)
    return Snapshot(
        kind="tree",
        files=files,
        truncated_after=last,
        warnings=tuple(warnings),
        taken_at_ns=taken_at,
    )


def _git_snapshot(
    root: Path,
    status: _Status,
    warnings: list[str],
    taken_at: int,
    known: Mapping[str, FileState | None],
) -> Snapshot:
    """A git snapshot from ``status``; ``known`` holds states already read at this moment."""
    paths = sorted(p for p in {*status.dirty, *status.untracked} if not _is_scratch(p))
    if len(paths) > MAX_PATHS:
        warnings.append(
            f"{len(paths)} files were already changed or untracked at the start; only the first "
            f"{MAX_PATHS} are remembered, the others may be reported as changed"
        )
        paths = paths[:MAX_PATHS]
    budget = _Budget()
    reader = _Reader(root, budget, warnings)
    try:
        files = {path: known[path] if path in known else reader.state(path) for path in paths}
    finally:
        reader.close()
    warnings.extend(_budget_warning(budget))
    return Snapshot(
        kind="git",
        head=status.head,
        branch=status.branch,
        files=files,
        warnings=tuple(warnings),
        taken_at_ns=taken_at,
    )


# --- Comparison --------------------------------------------------------------------------------


class _Result:
    def __init__(self, warnings: list[str]) -> None:
        self.added: set[str] = set()
        self.modified: set[str] = set()
        self.deleted: set[str] = set()
        self.warnings = warnings

    def judge(self, path: str, before: FileState | None, after: FileState | None) -> None:
        if before is None and after is not None:
            self.added.add(path)
        elif before is not None and after is None:
            self.deleted.add(path)
        elif before is not None and after is not None and not before.same_as(after):
            self.modified.add(path)

    def done(self) -> FilesChanged:
        lists = [
            sorted(_shown(p) for p in paths if not _is_scratch(p))
            for paths in (self.added, self.modified, self.deleted)
        ]
        total = sum(map(len, lists))
        if total > MAX_PATHS:
            self.warnings.append(
                f"{total} files changed; only the first {MAX_PATHS} paths of each list are given"
            )
            lists = [paths[:MAX_PATHS] for paths in lists]
        return FilesChanged(
            added=lists[0],
            modified=lists[1],
            deleted=lists[2],
            warnings=list(dict.fromkeys(self.warnings)),  # a re-walk repeats the snapshot's caps
        )


def changes_since(*, root: Path, snapshot: Snapshot) -> FilesChanged:
    """What changed under ``root`` since ``snapshot`` was taken; never raises for git or file
    trouble: what cannot be known is left out and named in ``warnings``."""
    _require_absolute(root)
    result = _Result(list(snapshot.warnings))
    if snapshot.kind == "tree":
        _compare_trees(root, snapshot, result, [])
    else:
        _compare_git(root, snapshot, result)
    return result.done()


def changes_and_snapshot(
    *, root: Path, snapshot: Snapshot, watched: bool = False
) -> tuple[FilesChanged, Snapshot]:
    """``changes_since(snapshot)`` and a new snapshot of the same moment, from one look at the
    project: what the comparison ends on is where the next one starts, so a change made
    between two consecutive calls falls into exactly one of their results.

    ``watched``: when this process has watched the project's files since ``snapshot`` (its
    mark, ``workflows.watch``) and the repository's own state is unchanged, git is asked only
    about the paths touched since, with the same rules and results as a whole look; otherwise
    (and whenever that partial look is in doubt) the whole project is looked at."""
    _require_absolute(root)
    taken_at = time.time_ns()
    mark = _mark(root) if watched else None
    if mark is not None and snapshot.kind == "git":
        partial = _watched_look(root, snapshot, mark, taken_at)
        if partial is not None:
            return partial
    result = _Result(list(snapshot.warnings))
    if snapshot.kind == "tree" and root.is_dir() and not _is_top_of_work_tree(root):
        walk_warnings: list[str] = []
        now, last = _compare_trees(root, snapshot, result, walk_warnings)
        after = Snapshot(
            kind="tree",
            files=now,
            truncated_after=last,
            warnings=tuple(walk_warnings),
            taken_at_ns=taken_at,
        )
        return result.done(), after
    if snapshot.kind == "git":
        status, read = _compare_git(root, snapshot, result)
        if status is not None:
            after = _git_snapshot(root, status, [], taken_at, read)
            return result.done(), _marked(after, mark, status, root)
    else:
        _compare_trees(root, snapshot, result, [])
    # Git failed, the folder is gone, or the project became a repository: look again.
    return result.done(), snapshot_take(root=root, watched=watched)


def _compare_trees(
    root: Path, snapshot: Snapshot, result: _Result, walk_warnings: list[str]
) -> tuple[dict[str, FileState], str | None]:
    now, last = _tree_files(root, walk_warnings, _trusted(snapshot))
    result.warnings.extend(walk_warnings)
    limit = None if snapshot.truncated_after is None else _order(snapshot.truncated_after)
    for path in {*snapshot.files, *now}:
        if limit is not None and _order(path) > limit:
            continue
        result.judge(path, snapshot.files.get(path), now.get(path))
    return now, last


def _compare_git(
    root: Path, snapshot: Snapshot, result: _Result
) -> tuple[_Status | None, dict[str, FileState | None]]:
    """Judge every change since ``snapshot``; the status it used (None when git failed) and
    the states it read, for a snapshot of the same moment."""
    budget = _Budget()
    warnings = result.warnings
    reader = _Reader(root, budget, warnings)
    trusted = _trusted(snapshot)
    read: dict[str, FileState | None] = {}

    def now(path: str) -> FileState | None:
        read[path] = reader.state(path, trusted.get(path))
        return read[path]

    git = _git_for(root)
    try:
        try:
            status = _git_status(git)
            warnings.extend(git.warnings)
            if snapshot.head == status.head:
                # Nothing committed since the start: status already compared HEAD with the disk.
                diff = status.against_head
            else:
                diff = _git_diff(git, _git_base(git, snapshot, status, warnings))
        except GitTrouble as exc:
            warnings.extend(w for w in git.warnings if w not in warnings)
            warnings.append(
                f"{exc}; only the files that were already changed at the start could be compared"
            )
            for path, before in snapshot.files.items():
                result.judge(path, before, now(path))
            warnings.extend(_budget_warning(budget))
            return None, read

        _judge_git(snapshot, status, diff, result, now)
        warnings.extend(_budget_warning(budget))
        return status, read
    finally:
        reader.close()


def _judge_git(
    snapshot: Snapshot,
    status: _Status,
    diff: Mapping[str, str],
    result: _Result,
    now: Callable[[str], FileState | None],
) -> None:
    """The comparison's rules: ``diff`` holds A, M or D against the start commit."""
    warnings = result.warnings
    if snapshot.branch is not None and status.branch != snapshot.branch:
        moved = "a detached HEAD" if status.branch is None else f"branch '{status.branch}'"
        warnings.append(
            f"the checkout moved from branch '{snapshot.branch}' to {moved} during the task; "
            "the differences between them are counted as the task's changes"
        )
    for folder in status.nested:
        if folder not in snapshot.files:
            warnings.append(f"'{folder}' is a nested git repository; its files are not listed")

    untracked = set(status.untracked)
    for path in {*diff, *untracked, *snapshot.files}:
        if path in snapshot.files:
            # Dirty or untracked at the start: only its content then and now tell.
            result.judge(path, snapshot.files[path], now(path))
        elif path in diff:
            letter = diff[path]
            if letter == "D" and path in untracked:
                result.modified.add(path)  # dropped from git but still on disk
            else:
                {"A": result.added, "D": result.deleted}.get(letter, result.modified).add(path)
        else:
            result.added.add(path)


# --- Watched looks -----------------------------------------------------------------------------

# Above this many paths touched since the mark, one whole ``git status`` is the cheaper look.
_MAX_ASKED = 2_000
# Files whose change can change what git says of paths that did not change themselves.
_GIT_RULE_FILES = frozenset({".gitignore", ".gitattributes", ".gitmodules"})


def _mark(root: Path) -> watch.Mark | None:
    """The watch's mark of now, read before the look it goes with: a change made during the
    look is then also reported to the next one, which checks it again."""
    if not root.is_dir() or not _is_top_of_work_tree(root):
        return None
    # A watch whose marks stopped counting at this look (its queue overflowed, a folder moved)
    # is replaced at once: the whole look that follows is then the new watch's first mark.
    for _ in range(2):
        tree = watch.tree_for(root)
        if tree is None:
            return None
        seq = tree.look()
        if tree.lost is None:
            break
    else:
        return None
    state = watch.git_state(root)
    if state is None:
        return None
    return watch.Mark(tree.id, seq, state)


# The latest watched snapshot of each project, where a session's first step starts from.
_latest: dict[Path, Snapshot] = {}


def _marked(snapshot: Snapshot, mark: watch.Mark | None, status: _Status, root: Path) -> Snapshot:
    # A snapshot that could not hold every dirty path, or a tree with nested repositories, is
    # never the base of a partial look.
    if mark is None or status.nested or len(snapshot.files) >= MAX_PATHS or snapshot.warnings:
        return snapshot
    marked = replace(snapshot, watch=mark.to_text())
    if len(_latest) >= 2 * watch.MAX_TREES:
        _latest.clear()
    _latest[root] = marked
    return marked


def _watched_look(
    root: Path, snapshot: Snapshot, mark: watch.Mark, taken_at: int
) -> tuple[FilesChanged, Snapshot] | None:
    """``changes_and_snapshot`` asking git only about the paths touched since ``snapshot``'s
    mark; None when that cannot be exact (another watch, the repository's state moved, rule
    files touched, git trouble): the caller then looks at everything."""
    before = watch.Mark.from_text(snapshot.watch) if snapshot.watch else None
    tree = watch.tree_for(root)
    if before is None or tree is None or before.watch != mark.watch or before.git != mark.git:
        return None
    touched = [p for p in tree.changed_since(before.seq) if not _is_scratch(p)]
    if len(touched) > _MAX_ASKED:
        return None
    if any(PurePosixPath(p).name in _GIT_RULE_FILES for p in touched):
        return None
    known = snapshot.files
    try:
        tags = _git_tags(root, touched) if touched else {}
    except GitTrouble:
        return None
    if any(tag in ("M", "S") for found in tags.values() for tag in found):
        return None  # unmerged or sparse entries: the whole look knows what to make of them
    asked = set(touched)
    # Known paths git was not asked about are as they were at the mark: still dirty.
    dirty = [p for p in known if not _asked_about(p, asked)]
    against_head: dict[str, str] = {}
    untracked: list[str] = []
    # Known paths the work tree now matches the index on: dirty only if staged.
    in_step = []
    for path, found in tags.items():
        if "?" in found:
            untracked.append(path)
        elif "R" in found or "C" in found:
            dirty.append(path)
            if path not in known:
                # Clean at the mark, with the index as it was: the work tree alone moved.
                against_head[path] = "D" if "R" in found else "M"
        elif path in known:
            in_step.append(path)
    try:
        dirty += _staged(root, in_step, snapshot.head) if in_step else []
    except GitTrouble:
        return None
    status = _Status(snapshot.head, snapshot.branch, dirty, against_head, untracked, [])

    result = _Result(list(snapshot.warnings))
    reader = _Reader(root, _Budget(), result.warnings)
    trusted = _trusted(snapshot)
    read: dict[str, FileState | None] = {}

    def now(path: str) -> FileState | None:
        read[path] = reader.state(path, trusted.get(path))
        return read[path]

    try:
        _judge_git(snapshot, status, against_head, result, now)
        result.warnings.extend(_budget_warning(reader.budget))
    finally:
        reader.close()
    after = _git_snapshot(root, status, [], taken_at, read)
    return result.done(), _marked(after, mark, status, root)


def _asked_about(path: str, asked: set[str]) -> bool:
    """Whether git was asked about ``path``: by name, or through a folder above it (one
    removed whole, or made anew)."""
    parts = path.split("/")
    return any("/".join(parts[:depth]) in asked for depth in range(1, len(parts) + 1))


def _staged(root: Path, paths: list[str], head: str | None) -> list[str]:
    """Those of ``paths`` whose index entry differs from commit ``head``."""
    if head is None:
        return paths  # no commit yet: everything in the index is staged
    out = _git(
        _git_for(root),
        "diff-index",
        "--cached",
        "--name-only",
        "-z",
        "--no-renames",
        "--ignore-submodules=dirty",
        head,
        "--",
        *(f":(literal){path}" for path in paths),
    )
    return [os.fsdecode(name) for name in out.split(b"\0") if name]


def _git_tags(root: Path, paths: list[str]) -> dict[str, set[str]]:
    """``git ls-files -t`` of ``paths``: per path listed, its tags (H in the index, C changed
    and R removed in the work tree, ? untracked and not ignored, M unmerged, S skip-worktree).
    Only the index is read, not HEAD's tree: the caller knows the index still matches HEAD
    wherever it did at the mark."""
    git = _git_for(root)
    out = _git(
        git,
        "ls-files",
        "-z",
        "-t",
        "--cached",
        "--modified",
        "--deleted",
        "--others",
        "--exclude-standard",
        "--",
        *(f":(literal){path}" for path in paths),
    )
    tags: dict[str, set[str]] = {}
    for token in out.split(b"\0"):
        if len(token) > 2 and token[1:2] == b" ":
            tags.setdefault(os.fsdecode(token[2:]), set()).add(token[:1].decode())
    return tags


def _git_base(git: Git, snapshot: Snapshot, status: _Status, warnings: list[str]) -> str:
    """The commit the working tree is compared with: the start commit whenever git has it."""
    if snapshot.head is None:
        return _empty_tree(git)
    if _commit_exists(git, snapshot.head):
        return snapshot.head
    warnings.append(
        f"the start commit {snapshot.head[:12]} is no longer in the repository (rebased away or "
        "pruned): changes committed during the task cannot be listed, only those not committed"
    )
    return status.head if status.head is not None else _empty_tree(git)
