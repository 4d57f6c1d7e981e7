"""First-run migration for ``mcpserve``, safe when several servers start at the same moment.

Only one process migrates at a time: on SQLite it holds an exclusive ``flock`` on a lock file
next to the database, on PostgreSQL a session-level advisory lock. Whoever gets the lock second
finds nothing left to apply.
"""

from __future__ import annotations

import fcntl
import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from django.db import connection
from django.db.migrations.executor import MigrationExecutor

logger = logging.getLogger("deepwork.mcpserve")

# An arbitrary constant naming "deepwork-server migrates" among PostgreSQL advisory locks.
PG_MIGRATION_LOCK_KEY = 0x6465_6570_776F_726B & 0x7FFF_FFFF_FFFF_FFFF


def _pending() -> int:
    executor = MigrationExecutor(connection)
    return len(executor.migration_plan(executor.loader.graph.leaf_nodes()))


@contextmanager
def migration_lock() -> Iterator[None]:
    """Hold the database's migration lock (blocking until it is free)."""
    if connection.vendor == "sqlite":
        name = str(connection.settings_dict["NAME"])
        if name == ":memory:" or name.startswith("file:"):
            yield
            return
        lock_path = Path(f"{name}.migrate.lock")
        lock_path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # closing releases the flock
    elif connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_lock(%s)", [PG_MIGRATION_LOCK_KEY])
        try:
            yield
        finally:
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_advisory_unlock(%s)", [PG_MIGRATION_LOCK_KEY])
    else:
        yield


def migrate_if_needed() -> None:
    """Bring the database schema up to date so a fresh install just works."""
    if not _pending():
        return
    with migration_lock():
        # Another server may have migrated while this one waited for the lock.
        pending = _pending()
        if not pending:
            return
        from django.core.management import call_command

        logger.info("Applying %d database migrations", pending)
        call_command("migrate", interactive=False, verbosity=0)
