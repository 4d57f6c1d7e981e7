"""Which paths of a git work tree changed since an earlier look, without asking git.

A look at a project (``workflows.changes``) used to run ``git status`` over the whole work
tree at every transition, a cost that grows with the repository. Here each watched project has
inotify watches (``inotify_simple``) on every folder of its work tree, and a look reads the
events queued since the previous one: the kernel queues an event before the write that caused
it returns, so reading the queue at the start of a look sees every change completed before it,
with no thread and no delay. ``Tree.look`` returns a mark; ``Tree.changed_since(mark)`` the
paths touched since. The caller asks git about those paths only, and only while the
repository's own state (index, HEAD, its branch, configuration, exclude files) is the one it
had at the mark: ``git_state`` fingerprints it with a few ``stat`` calls.

The watch is exact only where the kernel sees every change, so it is refused, and the caller
looks at the whole tree as before, when:

* inotify is missing (not Linux), or the kernel's limits are reached (``fs.inotify
  .max_user_instances``, ``max_user_watches``), or the tree has more than ``MAX_FOLDERS``
  folders;
* the project is on a file system where changes can come from elsewhere (NFS, SMB, FUSE, 9p,
  virtiofs: anything not in ``LOCAL_FILE_SYSTEMS``), or a folder inside it is another mount;
* the tree holds another repository (a nested ``.git``: a submodule or a cloned folder).

And a mark stops counting (the next look is a whole one, and the watch starts over) when the
kernel's event queue overflowed (``fs.inotify.max_queued_events``), a folder was moved or the
project folder itself went away, or more than ``MAX_CHANGED`` paths were touched. Changes that
inotify never reports are outside its reach: writes through a shared memory mapping, and writes
to a hard link of a file from outside the project. ``DEEPWORK_FILE_WATCH=off`` turns it off.
"""

from __future__ import annotations

import hashlib
import logging
import os
import stat
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings

logger = logging.getLogger(__name__)

try:  # Linux only
    from inotify_simple import INotify  # type: ignore[import-untyped]
    from inotify_simple import flags as _flags
except (ImportError, OSError):  # pragma: no cover - other systems
    INotify = None

# More folders than this (or than the kernel allows watches for) and the tree is not watched.
MAX_FOLDERS = 20_000
# More paths touched since a mark than this, and asking git about each costs more than a
# whole look: the mark stops counting.
MAX_CHANGED = 5_000
# Projects watched at once by a process; the least recently looked at is dropped first.
MAX_TREES = 32
# File systems where every change to a file goes through this kernel (``/proc/self/mounts``).
LOCAL_FILE_SYSTEMS = frozenset(
    {"ext2", "ext3", "ext4", "xfs", "btrfs", "tmpfs", "overlay", "zfs", "f2fs", "bcachefs"}
)
# Never part of the project's files (``workflows.changes`` leaves them out too).
_SCRATCH = ".deepwork/tmp"

if INotify is not None:
    _MASK = (
        _flags.CREATE
        | _flags.DELETE
        | _flags.MODIFY
        | _flags.CLOSE_WRITE
        | _flags.ATTRIB
        | _flags.MOVED_FROM
        | _flags.MOVED_TO
        | _flags.DELETE_SELF
        | _flags.MOVE_SELF
        | _flags.DONT_FOLLOW
        | _flags.ONLYDIR
        | _flags.EXCL_UNLINK
    )
    # Events after which the folders watched no longer match the paths they stand for.
    _LOST = _flags.Q_OVERFLOW | _flags.MOVE_SELF
    _DIR_MOVED = _flags.MOVED_FROM | _flags.MOVED_TO


class Unavailable(Exception):
    """The tree cannot be watched exactly; str() says why."""


def enabled() -> bool:
    """``DEEPWORK_FILE_WATCH`` (a setting, else the environment): "on" (the default) or
    "off"."""
    value = getattr(settings, "DEEPWORK_FILE_WATCH", None)
    if value is None:
        value = os.environ.get("DEEPWORK_FILE_WATCH", "on")
    return str(value).strip().lower() not in ("off", "0", "false", "no")


@dataclass(frozen=True)
class Mark:
    """A moment of one watch: the changes before it were read at a look, later ones will be."""

    watch: str
    seq: int
    git: str

    def to_text(self) -> str:
        return f"{self.watch}:{self.seq}:{self.git}"

    @classmethod
    def from_text(cls, text: str) -> Mark | None:
        watch, _, rest = text.partition(":")
        seq, _, git = rest.partition(":")
        return cls(watch, int(seq), git) if seq.isdigit() and watch and git else None


class Tree:
    """The inotify watches of one work tree (its ``.git`` and scratch folder left out)."""

    def __init__(self, root: Path) -> None:
        if INotify is None:
            raise Unavailable("inotify is not available on this system")
        _require_local(root)
        self.root = root
        self.id = uuid.uuid4().hex[:16]
        self.seq = 0
        self.changed: dict[str, int] = {}
        self.lost: str | None = None  # why the watch no longer counts
        self._folders: dict[int, str] = {}
        self._device = root.stat().st_dev
        self._lock = threading.Lock()
        try:
            self._inotify = INotify(nonblocking=True)
        except OSError as exc:
            raise Unavailable(f"inotify could not be started ({exc})") from None
        try:
            for _ in self._watch_below(""):
                pass
        except Unavailable:
            self.close()
            raise

    def close(self) -> None:
        self._inotify.close()

    def look(self) -> int:
        """Read every event queued so far; the mark of now."""
        with self._lock:
            self.seq += 1
            self._read()
            if len(self.changed) > MAX_CHANGED:
                self.lost = f"more than {MAX_CHANGED} paths changed"
            return self.seq

    def changed_since(self, seq: int) -> list[str]:
        with self._lock:
            return sorted(path for path, at in self.changed.items() if at > seq)

    def _read(self) -> None:
        while self.lost is None:
            events = list(self._inotify.read(timeout=0))
            if not events:
                return
            for event in events:
                self._take(event.wd, event.mask, event.name)

    def _take(self, wd: int, mask: int, name: str) -> None:
        if mask & _LOST:
            self.lost = "the kernel's event queue overflowed or a watched folder moved"
            return
        if mask & _flags.IGNORED:
            self._folders.pop(wd, None)
            return
        folder = self._folders.get(wd)
        if folder is None:
            return
        if mask & _flags.DELETE_SELF:
            if folder == "":
                self.lost = "the project folder was removed"
            return
        if not name:
            return  # the folder's own attributes: its entries tell what changed in it
        path = f"{folder}{name}"
        if name == ".git" or (mask & _flags.ISDIR and mask & _DIR_MOVED):
            self.lost = f"'{path}' was moved, or is another repository"
            return
        if path == _SCRATCH or path.startswith(_SCRATCH + "/"):
            return
        self.changed[path] = self.seq
        if mask & _flags.ISDIR and mask & _flags.CREATE:
            # Files may have been written in it before its watch was added: all count.
            try:
                for inner in self._watch_below(path + "/"):
                    self.changed[inner] = self.seq
            except Unavailable as exc:
                self.lost = str(exc)

    def _watch_below(self, prefix: str) -> Iterator[str]:
        """Watch the folder ``prefix`` (project-relative, "" or ending in "/") and every folder
        below it; yield every other entry's path. The watch is added before the folder is
        listed, so an entry made meanwhile is either listed or reported."""
        where = self.root / prefix if prefix else self.root
        if len(self._folders) >= MAX_FOLDERS:
            raise Unavailable(f"the project has more than {MAX_FOLDERS} folders")
        try:
            wd = self._inotify.add_watch(where, _MASK)
        except OSError as exc:
            if exc.errno == 28:  # ENOSPC: fs.inotify.max_user_watches
                raise Unavailable(
                    "the kernel's limit on inotify watches (fs.inotify.max_user_watches) is reached"
                ) from None
            return  # gone or unreadable since it was listed: git will say what it sees
        self._folders[wd] = prefix
        try:
            entries = list(os.scandir(where))
        except OSError:
            return
        for entry in entries:
            path = prefix + entry.name
            if entry.name == ".git":
                if prefix:
                    raise Unavailable(f"'{path}' is another repository inside the project")
                continue
            try:
                info = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if stat.S_ISDIR(info.st_mode):
                if path == _SCRATCH:
                    continue
                if info.st_dev != self._device:
                    raise Unavailable(f"'{path}' is another file system mounted in the project")
                yield from self._watch_below(path + "/")
            else:
                yield path


def _require_local(root: Path) -> None:
    kind = _file_system(root)
    if kind not in LOCAL_FILE_SYSTEMS:
        raise Unavailable(
            f"the project is on a {kind or 'unknown'} file system, where changes made elsewhere "
            "are not reported"
        )


def _file_system(root: Path) -> str | None:
    """The type of the mount holding ``root``, from ``/proc/self/mounts``."""
    try:
        lines = Path("/proc/self/mounts").read_text().splitlines()
    except OSError:
        return None
    best, kind = "", None
    target = os.path.realpath(root)
    for line in lines:
        fields = line.split()
        if len(fields) < 3:
            continue
        mount = fields[1].encode().decode("unicode_escape")
        inside = target == mount or target.startswith(mount.rstrip("/") + "/")
        if inside and len(mount) >= len(best):
            best, kind = mount, fields[2]
    return kind


# --- The trees of this process -------------------------------------------------------------------

_trees: dict[Path, Tree] = {}
_refused: dict[Path, str] = {}
_trees_lock = threading.Lock()


def tree_for(root: Path) -> Tree | None:
    """The watch of ``root``, started at the first call; None when it cannot be watched (the
    reason is logged once) or watching is off. A watch whose marks stopped counting is
    replaced."""
    if not enabled():
        return None
    with _trees_lock:
        tree = _trees.pop(root, None)
        if tree is not None and tree.lost is not None:
            logger.info("Watching %s again: %s", root, tree.lost)
            tree.close()
            tree = None
        if tree is None:
            try:
                tree = Tree(root)
            except (Unavailable, OSError) as exc:
                if _refused.get(root) != str(exc):
                    logger.info("Not watching %s (whole looks instead): %s", root, exc)
                    _refused[root] = str(exc)
                return None
            _refused.pop(root, None)
            if len(_trees) >= MAX_TREES:
                oldest = next(iter(_trees))
                _trees.pop(oldest).close()
        _trees[root] = tree  # the most recently used last
        return tree


def forget(root: Path | None = None) -> None:
    """Stop watching ``root`` (every tree when None)."""
    with _trees_lock:
        for path in [root] if root is not None else list(_trees):
            tree = _trees.pop(path, None)
            if tree is not None:
                tree.close()
        _refused.clear()


# --- The repository's own state ----------------------------------------------------------------


def git_state(root: Path) -> str | None:
    """A fingerprint of what, beside the work tree's files, decides what ``git status`` says of
    a path: the index, HEAD and the branch it names, the packed refs, the configuration and the
    exclude and attribute files. None when ``root`` is not the top of a work tree this can
    read. Equal fingerprints: git would say the same of every path whose file did not change."""
    dot_git = root / ".git"
    try:
        info = dot_git.lstat()
        if stat.S_ISDIR(info.st_mode):
            git_dir = dot_git
        elif stat.S_ISREG(info.st_mode) and info.st_size < 4096:
            text = dot_git.read_bytes()
            if not text.startswith(b"gitdir: "):
                return None
            git_dir = (root / os.fsdecode(text[8:].strip())).resolve()
        else:
            return None
        common = git_dir
        if (git_dir / "commondir").is_file():
            common = (git_dir / (git_dir / "commondir").read_text().strip()).resolve()
        head = (git_dir / "HEAD").read_bytes()
    except OSError:
        return None
    watched = [
        git_dir / "index",
        git_dir / "HEAD",
        git_dir / "config.worktree",
        git_dir / "info" / "sparse-checkout",
        common / "config",
        common / "packed-refs",
        common / "info" / "exclude",
        common / "info" / "attributes",
        common / "reftable" / "tables.list",
        _user_ignore_file(),
    ]
    if head.startswith(b"ref: "):
        watched.append(common / os.fsdecode(head[5:].strip()))
    digest = hashlib.sha256(head)
    for path in watched:
        try:
            info = path.stat()
            digest.update(f"{path}|{info.st_ino}|{info.st_size}|{info.st_mtime_ns}\n".encode())
        except OSError:
            digest.update(f"{path}|-\n".encode())
    return digest.hexdigest()[:32]


def _user_ignore_file() -> Path:
    # Git's default core.excludesFile (global configuration is off for the server's git).
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return Path(base) / "git" / "ignore"
