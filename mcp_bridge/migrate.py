"""First-run migration for ``mcpserve``, safe when several servers start at the same moment.

``mcpserve`` runs with a lean app registry (settings.MCP_APPS), but its migration must give the
schema ``manage.py migrate`` gives: every app of settings.ALL_APPS, with their post-migrate
work (the dashboard's groups). So the check for pending migrations reads the migration files of
ALL_APPS from disk without importing those apps, and when something is pending, a child
``migrate`` with the full registry applies it.

Only one process migrates at a time: on SQLite it holds an exclusive ``flock`` on a lock file
next to the database, on PostgreSQL a session-level advisory lock. Whoever gets the lock second
finds nothing left to apply.
"""

from __future__ import annotations

import fcntl
import importlib.util
import logging
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from django.apps import apps
from django.conf import settings
from django.core.management import call_command
from django.db import DatabaseError, connection

logger = logging.getLogger("deepwork.mcpserve")

# An arbitrary constant naming "deepwork-server migrates" among PostgreSQL advisory locks.
PG_MIGRATION_LOCK_KEY = 0x6465_6570_776F_726B


def _app_label(app: str) -> str:
    # Every app of ours and of django.contrib is labelled by its last dotted part.
    return app.rsplit(".", 1)[-1]


def _migration_names_on_disk(app: str) -> set[str]:
    spec = importlib.util.find_spec(f"{app}")
    if spec is None or not spec.submodule_search_locations:
        return set()
    folder = Path(next(iter(spec.submodule_search_locations))) / "migrations"
    if not folder.is_dir():
        return set()
    return {
        path.stem
        for path in folder.glob("*.py")
        if path.stem != "__init__" and not path.stem.startswith(("_", "~"))
    }


def pending_migrations() -> set[tuple[str, str]]:
    """(app, migration) pairs present on disk for ALL_APPS but not recorded as applied."""
    on_disk = {
        (_app_label(app), name)
        for app in settings.ALL_APPS
        for name in _migration_names_on_disk(app)
    }
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT app, name FROM django_migrations")
            applied = {(app, name) for app, name in cursor.fetchall()}
    except DatabaseError:
        applied = set()  # a fresh database: not even the migrations table exists yet
        if connection.vendor == "postgresql" and not connection.get_autocommit():
            connection.rollback()
    return on_disk - applied


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


def _migrate_all_apps() -> None:
    if all(apps.is_installed(app) for app in settings.ALL_APPS):
        call_command("migrate", interactive=False, verbosity=0)
        return
    # The same code as this process (a clone's checkout first on the path; installed, it is
    # already there), and never a folder of the project it serves: -P keeps the current
    # folder, where a project may have its own `workflows` package, off the child's path.
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(settings.BASE_DIR), *filter(None, [os.environ.get("PYTHONPATH")])]
    )
    done = subprocess.run(
        [sys.executable, "-P", "-m", "deepwork_site", "manage", "migrate", "--no-input"]
        + ["--verbosity", "0"],
        stdin=subprocess.DEVNULL,
        stdout=sys.stderr,  # stdout is the protocol
        stderr=sys.stderr,
        env=env,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"migrate failed with exit status {done.returncode}")


def migrate_if_needed() -> None:
    """Bring the database schema up to date so a fresh install just works."""
    if not pending_migrations():
        return
    with migration_lock():
        # Another server may have migrated while this one waited for the lock.
        pending = pending_migrations()
        if not pending:
            return
        logger.info("Applying %d database migrations", len(pending))
        _migrate_all_apps()
