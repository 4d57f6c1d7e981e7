"""First-run migration for ``mcpserve``, safe when several servers start at the same moment.

``mcpserve`` runs with a lean app registry (settings.MCP_APPS), but its migration must give the
schema ``manage.py migrate`` gives: every app of settings.ALL_APPS, with their post-migrate
work (the dashboard's groups). So the check for pending migrations reads the migration files of
ALL_APPS from disk without importing those apps, and when something is pending, a child
``migrate`` with the full registry applies it.

Only one process migrates at a time: on SQLite it holds an exclusive ``flock`` on a lock file
next to the database, on PostgreSQL a session-level advisory lock. Whoever gets the lock second
finds nothing left to apply.

A new SQLite database (a new install's first start) is not migrated step by step: Django
replays every migration's model states to apply them, some ten seconds of CPU before the first
tool call could be answered, on a machine where an agent's client gives a server ten seconds to
start. It is loaded instead from ``fresh_database.sql``: what those migrations leave in a new
database (tables, indexes, the migrations recorded as applied, content types, permissions, the
dashboard's groups), dumped by ``manage.py fresh_database --write`` and checked against a real
migration by the suite. Whatever the file lacks (a migration newer than it) is then applied
the usual way. A database that already has tables is always migrated, never loaded.
"""

from __future__ import annotations

import fcntl
import importlib.util
import logging
import os
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

from django.apps import apps
from django.conf import settings
from django.core.management import call_command
from django.db import DatabaseError, connection

logger = logging.getLogger("deepwork.mcpserve")

# An arbitrary constant naming "deepwork-server migrates" among PostgreSQL advisory locks.
PG_MIGRATION_LOCK_KEY = 0x6465_6570_776F_726B

# Set while this process sets a database up or migrates it, so a waiting call can say why;
# then how long that took.
SETTING_UP = threading.Event()
set_up_seconds: float | None = None

# What every migration of ALL_APPS leaves in a new SQLite database (see the module docstring).
FRESH_DATABASE_SQL = Path(__file__).resolve().parent / "fresh_database.sql"
FRESH_DATABASE_HEADER = (
    "-- What every migration leaves in a new SQLite database. Written by\n"
    "-- `manage.py fresh_database --write` (make fresh-database); do not edit.\n"
)


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


def migrate_in_child(env: dict[str, str] | None = None) -> None:
    """``migrate`` every app of ALL_APPS in a child process with the full app registry, with
    ``env`` (this process's environment if None)."""
    env = dict(os.environ if env is None else env)
    # The same code as this process (a clone's checkout first on the path; installed, it is
    # already there), and never a folder of the project it serves: -P keeps the current
    # folder, where a project may have its own `workflows` package, off the child's path.
    env["PYTHONPATH"] = os.pathsep.join(
        [str(settings.BASE_DIR), *filter(None, [env.get("PYTHONPATH")])]
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


def _migrate_all_apps() -> None:
    if all(apps.is_installed(app) for app in settings.ALL_APPS):
        call_command("migrate", interactive=False, verbosity=0)
        return
    migrate_in_child()


def _is_new_sqlite_database() -> bool:
    """An SQLite database without a single table of its own: nothing to keep, nothing to
    upgrade."""
    if connection.vendor != "sqlite":
        return False
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
        )
        (tables,) = cursor.fetchone()
    return tables == 0


def _load_fresh_database() -> bool:
    """Load ``fresh_database.sql`` into the new database; False if there is no such file
    (a checkout that lost it migrates the usual way)."""
    try:
        script = FRESH_DATABASE_SQL.read_text(encoding="utf-8")
    except FileNotFoundError:
        return False
    # The migrations are recorded as applied now, in the dump's one transaction (BEGIN ...
    # COMMIT): a start killed halfway leaves the database as new as it was, and the next
    # start loads it again.
    applied = datetime.now(UTC).replace(tzinfo=None).isoformat(sep=" ")
    body, commit, _ = script.rpartition("COMMIT;")
    if not commit:
        raise RuntimeError(f"{FRESH_DATABASE_SQL} does not end its transaction")
    # SQLite's dump orders tables by name, so a row may name a table made after it: keys are
    # checked once everything is in (foreign_key_check), not row by row.
    script = (
        "PRAGMA foreign_keys = OFF;\n"
        f"{body}UPDATE django_migrations SET applied = '{applied}';\nCOMMIT;\n"
        "PRAGMA foreign_keys = ON;\n"
    )
    connection.ensure_connection()
    raw = connection.connection
    try:
        raw.executescript(script)
    except sqlite3.Error:
        if raw.in_transaction:
            raw.rollback()
        raw.execute("PRAGMA foreign_keys = ON")
        raise
    broken = raw.execute("PRAGMA foreign_key_check").fetchall()
    if broken:
        raise RuntimeError(f"{FRESH_DATABASE_SQL.name} left rows naming missing rows: {broken[:5]}")
    return True


def fresh_database_dump(path: Path) -> str:
    """The text of ``fresh_database.sql`` for the SQLite database at ``path``: its schema and
    rows, in the order SQLite's own dump gives them."""
    source = sqlite3.connect(path)
    try:
        # When it was migrated is not part of what it is; loaded, the migrations are recorded
        # as applied at that moment.
        with source:
            source.execute("UPDATE django_migrations SET applied = '2000-01-01 00:00:00'")
        lines = list(source.iterdump())
    finally:
        source.close()
    return FRESH_DATABASE_HEADER + "\n".join(lines) + "\n"


def migrate_if_needed() -> None:
    """Bring the database schema up to date so a fresh install just works."""
    if not pending_migrations():
        return
    SETTING_UP.set()
    try:
        with migration_lock():
            # Another server may have migrated while this one waited for the lock.
            pending = pending_migrations()
            if pending:
                _bring_up_to_date(pending)
    finally:
        SETTING_UP.clear()


def _bring_up_to_date(pending: set[tuple[str, str]]) -> None:
    global set_up_seconds
    began = time.monotonic()
    if _is_new_sqlite_database():
        logger.info(
            "Setting up a new database at %s (first start)", connection.settings_dict["NAME"]
        )
        if _load_fresh_database():
            pending = pending_migrations()
    if pending:
        logger.info("Applying %d database migrations", len(pending))
        _migrate_all_apps()
    set_up_seconds = time.monotonic() - began
    logger.info("The database is ready (%.1f s)", set_up_seconds)
