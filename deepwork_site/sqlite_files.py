"""Keep the embedded database private: ``var/`` is 0700 and the SQLite files in it are 0600.

The SQLite file holds the dashboard's session keys (the cookie values) and API token digests,
so no other local user may read it. The folder is made private before the database is first
opened, so a new database file is never reachable by others, even for the moment before its
own mode is set. SQLite gives its ``-wal`` and ``-shm`` files the database file's mode, and
each new connection tightens all three anyway (a database made by an older version, a test
database made fresh). Settings call ``private_folder``; importing this module hooks the rest.
"""

from __future__ import annotations

import logging
import stat
from pathlib import Path
from typing import Any

from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.backends.signals import connection_created

logger = logging.getLogger(__name__)

FOLDER_MODE = 0o700
FILE_MODE = 0o600
# The main file, then what SQLite keeps beside it (WAL mode, or a rollback journal).
SQLITE_SUFFIXES = ("", "-wal", "-shm", "-journal")


def _tighten(path: Path, mode: int) -> None:
    """Take away every permission beyond ``mode`` from ``path`` if it exists and is ours."""
    try:
        info = path.stat()
    except FileNotFoundError:
        return
    if stat.S_IMODE(info.st_mode) & ~mode == 0:
        return
    try:
        path.chmod(stat.S_IMODE(info.st_mode) & mode)
    except OSError as exc:  # someone else's file: say so, do not stop the server
        logger.warning("Could not make %s private (mode %o): %s", path, mode, exc)
    else:
        logger.info("Made %s private (it was %o)", path, stat.S_IMODE(info.st_mode))


def private_folder(path: Path) -> Path:
    """Create ``path`` readable by this user only; tighten it if it already exists and others
    may enter it.

    Missing parents are made private too: ``mkdir(parents=True)`` gives them the umask's mode,
    0777 under ``umask 000``, and another user could then swap a world-writable parent, and
    the data folder with it. Parents that exist already are left as they are (``/tmp`` is
    meant to be world-writable)."""
    missing = [folder for folder in (path, *path.parents) if not folder.is_dir()]
    for folder in reversed(missing):
        folder.mkdir(mode=FOLDER_MODE, exist_ok=True)
    _tighten(path, FOLDER_MODE)
    return path


def private_file(path: Path) -> Path:
    """Tighten an existing file to readable by this user only (one an older install left
    readable)."""
    _tighten(path, FILE_MODE)
    return path


def database_file(settings_dict: dict[str, Any]) -> Path | None:
    """The file behind a SQLite connection's settings, or None for an in-memory database."""
    name = str(settings_dict.get("NAME") or "")
    if not name or name == ":memory:" or name.startswith("file:") or "mode=memory" in name:
        return None
    return Path(name)


def private_database_files(
    *, sender: type[BaseDatabaseWrapper], connection: BaseDatabaseWrapper, **kwargs: Any
) -> None:
    """``connection_created`` receiver: make a SQLite database's files 0600."""
    if connection.vendor != "sqlite":
        return
    database = database_file(connection.settings_dict)
    if database is None:
        return
    for suffix in SQLITE_SUFFIXES:
        _tighten(database.with_name(database.name + suffix), FILE_MODE)


connection_created.connect(private_database_files, dispatch_uid="deepwork-private-sqlite-files")
