"""Reading files that agents or project owners control, without ever blocking on them.

Opening a named pipe for reading waits until something opens it for writing, and a server
reads job definitions, instructions and outputs in its request threads: one pipe named like an
output would freeze every request behind it. So a file is opened non-blocking, checked with
``fstat`` on that very descriptor (a check on the path could be raced) and read only when it is
a regular file.
"""

from __future__ import annotations

import contextlib
import errno
import io
import os
import secrets
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import BinaryIO

_NOT_REGULAR = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a named pipe"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
)


class NotRegularFile(OSError):
    """The path names something other than a regular file; it was not read."""

    def __init__(self, path: str | os.PathLike[str], kind: str) -> None:
        super().__init__(f"{os.fspath(path)} is not a regular file (it is {kind})")
        self.path = os.fspath(path)
        self.kind = kind


def _kind(mode: int) -> str:
    for test, kind in _NOT_REGULAR:
        if test(mode):
            return kind
    return "an unknown kind of file"


def open_regular_file(
    path: str | os.PathLike[str], *, dir_fd: int | None = None, follow_symlinks: bool = True
) -> BinaryIO:
    """``path`` opened for binary reading, or ``NotRegularFile`` if it is not a regular file.

    ``dir_fd`` and ``follow_symlinks`` mean what they mean for ``os.open``; without following,
    a symbolic link raises ``OSError`` (ELOOP). Other failures raise the usual ``OSError``.
    """
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
    if not follow_symlinks:
        flags |= os.O_NOFOLLOW
    fd = os.open(path, flags, dir_fd=dir_fd)
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise NotRegularFile(path, _kind(mode))
        # Reads of a regular file never wait anyway; blocking mode keeps buffered reads simple.
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_regular_file(path: str | os.PathLike[str], *, limit: int | None) -> bytes:
    """At most ``limit`` bytes (all of it for None) of the regular file ``path``.

    ``NotRegularFile`` for a directory, pipe or device; ``OSError`` as ``open`` raises it.
    """
    with open_regular_file(path) as handle:
        return handle.read() if limit is None else handle.read(limit)


def read_regular_text(
    path: str | os.PathLike[str], *, limit: int | None = None, encoding: str = "utf-8"
) -> str:
    """The regular file ``path`` as text, decoded like ``Path.read_text`` (universal newlines).

    With ``limit``, a file over that many bytes raises ``FileTooLarge`` after reading at most
    one byte past it, so a huge or sparse file is never loaded whole. Raises what
    ``read_regular_file`` raises, and ``UnicodeDecodeError``.
    """
    if limit is None:
        with open_regular_file(path) as handle, io.TextIOWrapper(handle, encoding=encoding) as text:
            return text.read()
    data = read_regular_file(path, limit=limit + 1)
    if len(data) > limit:
        raise FileTooLarge(os.fspath(path), os.stat(path).st_size, limit)
    with io.TextIOWrapper(io.BytesIO(data), encoding=encoding) as text:
        return text.read()


# --- Files inside a project ------------------------------------------------------------------
#
# An agent works in the very folder the server reads from and writes into, so every entry on
# the way to a project file may be swapped for a symbolic link, a pipe or a folder at any time,
# including the project folder itself. One mechanism serves every read and write:
#
# 1. the root is opened component by component from ``/`` without following links, so it is the
#    directory recorded (root paths are stored resolved), not wherever a link now points;
# 2. the path below it is resolved once (links inside the project are fine) and must stay
#    inside; then each directory is opened from the one before without following links, so an
#    entry swapped after the resolution is refused, never followed out;
# 3. files are opened non-blocking and used only when ``fstat`` says regular; writes go to a
#    fresh exclusive temporary name and are renamed over the target, which replaces a planted
#    link or pipe instead of writing through it.

_PATH_FLAGS = getattr(os, "O_PATH", os.O_RDONLY)
_DIR_FLAGS = _PATH_FLAGS | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
_TMP_SUFFIX = ".tmp"


class ProjectRootChanged(OSError):
    """The recorded project root is no longer that directory (a link or a file took its place)."""

    def __init__(self, root: Path) -> None:
        super().__init__(
            f"the project folder {root} is no longer the directory recorded for the project "
            "(a symbolic link or another file took its place)"
        )
        self.root = root


LINK_OUT = "is a symbolic link to a file outside the project root"


class OutsideProject(OSError):
    """The path leads outside the project root (``..``, an absolute path, or a link)."""

    def __init__(self, relative: str, reason: str) -> None:
        super().__init__(f"'{relative}' {reason}")
        self.relative = relative
        self.reason = reason


class FileTooLarge(OSError):
    """A regular file over the byte cap of the read; nothing of it was decoded."""

    def __init__(self, relative: str, size: int, limit: int) -> None:
        super().__init__(f"'{relative}' is {size} bytes, over the limit of {limit} bytes")
        self.relative = relative
        self.size = size
        self.limit = limit


def file_kind(mode: int) -> str:
    """'a regular file', 'a directory', 'a named pipe' …: what ``mode`` says the entry is."""
    return "a regular file" if stat.S_ISREG(mode) else _kind(mode)


def _open_root(root: Path) -> int:
    if not root.is_absolute():
        raise ValueError(f"project root must be absolute: {root}")
    try:
        return _walk(os.open("/", _DIR_FLAGS), root.parts[1:], create=False)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise ProjectRootChanged(root) from None
        raise


def _lexical(root: Path, relative: str) -> PurePosixPath:
    """``relative`` (or an absolute path under ``root``) as clean parts below the root."""
    if "\x00" in relative:
        raise OutsideProject(relative.replace("\x00", "\\0"), "contains a NUL byte")
    given = Path(relative)
    if given.is_absolute():
        normal = Path(os.path.normpath(given))
        if not normal.is_relative_to(root):
            raise OutsideProject(relative, "is an absolute path outside the project root")
        inside = PurePosixPath(normal.relative_to(root).as_posix())
    else:
        inside = PurePosixPath(os.path.normpath(relative))
        if inside.parts[:1] == ("..",):
            raise OutsideProject(relative, "leads outside the project root with '..'")
    if inside.parts in ((), (".",)):
        raise OutsideProject(relative, "names the project root, not a file")
    return inside


def _resolved_inside(root: Path, inside: PurePosixPath, relative: str) -> PurePosixPath:
    # ``Path.resolve`` follows links as the path stands now; whatever it answers, the walk
    # below is made again without following anything, so a change in between is refused.
    resolved = (root / inside).resolve()
    if not resolved.is_relative_to(root):
        raise OutsideProject(relative, LINK_OUT)
    return PurePosixPath(resolved.relative_to(root).as_posix())


# What the server writes into a project quotes other files of it (a review instruction file
# inlines the file under review), whatever their own modes: readable by the server's user
# alone, as are the folders it makes for them.
PRIVATE_FILE_MODE = 0o600
PRIVATE_FOLDER_MODE = 0o700

# The server's scratch folder inside a project: made with a ``.gitignore`` of its own, so what
# the server writes there never shows in the project's ``git status``.
SCRATCH_FOLDER = (".deepwork", "tmp")


def _walk(fd: int, folders: tuple[str, ...], *, create: bool) -> int:
    """Descriptor of ``folders`` below ``fd`` (which is consumed), links refused (ENOTDIR)."""
    try:
        for depth, folder in enumerate(folders, start=1):
            made = False
            if create:
                # mkdirat never follows: a planted link here is EEXIST, then refused below.
                with contextlib.suppress(FileExistsError):
                    os.mkdir(folder, PRIVATE_FOLDER_MODE, dir_fd=fd)
                    made = True
            inner = os.open(folder, _DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = inner
            if made and folders[:depth] == SCRATCH_FOLDER:
                _ignore_everything(fd)
        return fd
    except BaseException:
        os.close(fd)
        raise


def _ignore_everything(dir_fd: int) -> None:
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    with contextlib.suppress(OSError):  # a folder git cannot ignore is no reason to fail
        handle = os.open(".gitignore", flags, 0o644, dir_fd=dir_fd)
        try:
            os.write(handle, b"*\n")
        finally:
            os.close(handle)


def open_below(root: Path, relative: PurePosixPath) -> BinaryIO:
    """The regular file ``root/relative`` with no link anywhere on the way, root included.

    ``relative`` must already name no link (it comes from a resolution): a directory on the way
    that is now a link is ENOTDIR, a final link ELOOP, a pipe or device ``NotRegularFile`` at
    once, and a root that is no longer the directory ``ProjectRootChanged``.
    """
    *folders, name = relative.parts or (".",)
    fd = _walk(_open_root(root), tuple(folders), create=False)
    try:
        return open_regular_file(name, dir_fd=fd, follow_symlinks=False)
    finally:
        os.close(fd)


def open_project_file(*, root: Path, relative: str) -> BinaryIO:
    """The regular file ``relative`` of the project at ``root`` (resolved, as recorded).

    Links inside the project are followed; anything leading outside raises ``OutsideProject``.
    Raises ``ProjectRootChanged``, ``NotRegularFile``, ``FileNotFoundError`` and other
    ``OSError`` (ELOOP or ENOTDIR when an entry on the way changed while it was opened).
    """
    inside = _lexical(root, relative)
    os.close(_open_root(root))  # the root is checked before resolving anything below it
    return open_below(root, _resolved_inside(root, inside, relative))


@dataclass(frozen=True)
class FileRead:
    data: bytes  # at most the limit
    size: int  # of the whole file, as fstat saw it (or as read, if it grew)
    truncated: bool


def read_project_file(*, root: Path, relative: str, limit: int) -> FileRead:
    """At most ``limit`` bytes of the project file ``relative``; raises as ``open_project_file``."""
    with open_project_file(root=root, relative=relative) as handle:
        size = os.fstat(handle.fileno()).st_size
        data = handle.read(limit + 1)
    truncated = len(data) > limit
    return FileRead(data=data[:limit], size=max(size, len(data)), truncated=truncated)


def read_project_text(*, root: Path, relative: str, limit: int) -> str:
    """The project file ``relative`` decoded like ``Path.read_text``; ``FileTooLarge`` over
    ``limit`` bytes (nothing past the limit is read), ``UnicodeDecodeError`` if not UTF-8."""
    read = read_project_file(root=root, relative=relative, limit=limit)
    if read.truncated:
        raise FileTooLarge(relative, read.size, limit)
    return io.TextIOWrapper(io.BytesIO(read.data), encoding="utf-8").read()


@contextmanager
def project_directory(*, root: Path, relative: str, create: bool = False) -> Iterator[int]:
    """A descriptor of the project directory ``relative``, made (0700) when ``create`` says so.

    Links inside the project are followed, never out of it; raises as ``open_project_file``.
    """
    fd = _directory_fd(root, _lexical(root, relative), relative, create=create)
    try:
        yield fd
    finally:
        os.close(fd)


def _directory_fd(root: Path, inside: PurePosixPath, relative: str, *, create: bool) -> int:
    os.close(_open_root(root))
    resolved = _resolved_inside(root, inside, relative)
    return _walk(_open_root(root), resolved.parts, create=create)


def open_regular_at(dir_fd: int, name: str, *, create: bool = False) -> int:
    """A read-write descriptor of the regular file ``name`` in ``dir_fd`` (for locks and the
    like), created when missing if ``create``; a link there is ELOOP, a pipe ``NotRegularFile``."""
    flags = os.O_RDWR | os.O_NOFOLLOW | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(name, flags | (os.O_CREAT if create else 0), PRIVATE_FILE_MODE, dir_fd=dir_fd)
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise NotRegularFile(name, _kind(mode))
        return fd
    except BaseException:
        os.close(fd)
        raise


def write_text_at(dir_fd: int, name: str, text: str) -> None:
    """Put ``text`` (UTF-8) at ``name`` in ``dir_fd``: a new file (0600) renamed over the entry.

    Whatever stood there (a link, a pipe, an older file) is replaced, never written through; a
    directory there raises ``IsADirectoryError``. Readers see the old file or the new, whole.
    """
    if not name or "/" in name or name in (".", ".."):
        raise ValueError(f"not a file name: {name!r}")
    # Named so that the stale-file sweep of the review scratch folder also removes orphans.
    tmp = f".{name[:100]}.{secrets.token_hex(8)}{_TMP_SUFFIX}"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(tmp, flags, PRIVATE_FILE_MODE, dir_fd=dir_fd)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(text.encode("utf-8"))
        try:
            os.rename(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        except IsADirectoryError:
            raise IsADirectoryError(
                errno.EISDIR, f"'{name}' is a directory; the file cannot be written there"
            ) from None
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp, dir_fd=dir_fd)
        raise


def project_write_text(*, root: Path, relative: str, text: str) -> Path:
    """Write ``text`` to the project file ``relative``, making its folders; the path written.

    The one way the server writes into a project: see ``write_text_at`` for what happens to
    whatever stood at the path; raises ``ProjectRootChanged``, ``OutsideProject`` and ``OSError``.
    """
    inside = _lexical(root, relative)
    if inside.parent == PurePosixPath("."):
        fd = _open_root(root)
    else:
        fd = _directory_fd(root, inside.parent, relative, create=True)
    try:
        write_text_at(fd, inside.name, text)
    finally:
        os.close(fd)
    return root / inside


def project_makedirs(*, root: Path, relative: str) -> None:
    """Make the project folder ``relative`` and its parents, without following links out."""
    with project_directory(root=root, relative=relative, create=True):
        pass
