"""Reading files that agents or project owners control, without ever blocking on them.

Opening a named pipe for reading waits until something opens it for writing, and a server
reads job definitions, instructions and outputs in its request threads: one pipe named like an
output would freeze every request behind it. So a file is opened non-blocking, checked with
``fstat`` on that very descriptor (a check on the path could be raced) and read only when it is
a regular file.
"""

from __future__ import annotations

import io
import os
import stat
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


def read_regular_text(path: str | os.PathLike[str], *, encoding: str = "utf-8") -> str:
    """The regular file ``path`` as text, decoded like ``Path.read_text`` (universal newlines).

    Raises what ``read_regular_file`` raises, and ``UnicodeDecodeError``.
    """
    with open_regular_file(path) as handle, io.TextIOWrapper(handle, encoding=encoding) as text:
        return text.read()
