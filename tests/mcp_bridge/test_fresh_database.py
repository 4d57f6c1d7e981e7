"""A first start loads a new SQLite database from ``fresh_database.sql`` instead of replaying
every migration, and that file is exactly what the migrations make; a database made at the
oldest migrations still upgrades, on SQLite and PostgreSQL, to the same schema.

Each test migrates in child processes of its own, on databases of its own.
"""

from __future__ import annotations

import shutil
import sqlite3
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from django.db import connection
from fastmcp import Client
from fastmcp.client.logging import LogMessage
from fastmcp.client.transports import StdioTransport

from mcp_bridge.migrate import FRESH_DATABASE_SQL, fresh_database_dump
from mcp_bridge.startup import SET_UP_MESSAGE, SETTING_UP_MESSAGE
from tests.support.processes import MANAGE, child_database_url, child_env

pytestmark = pytest.mark.e2e

# The oldest migration of the oldest app, and Django's own apps' first ones beside it.
OLDEST = [("workflows", "0001_initial")]


def _manage(env: dict[str, str], *args: str) -> None:
    done = subprocess.run(
        [sys.executable, MANAGE, *args],
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr


def sqlite_contents(path: Path) -> dict[str, Any]:
    """What a new database holds, whatever order its rows were made in: the schema, the
    migrations recorded, the permissions and what each group holds."""
    database = sqlite3.connect(path)
    try:
        schema = sorted(
            database.execute(
                "SELECT type, name, sql FROM sqlite_master WHERE name NOT LIKE 'sqlite_%'"
            ).fetchall()
        )
        migrations = sorted(database.execute("SELECT app, name FROM django_migrations"))
        permissions = sorted(
            database.execute(
                "SELECT ct.app_label, ct.model, p.codename FROM auth_permission p "
                "JOIN django_content_type ct ON ct.id = p.content_type_id"
            )
        )
        grants = sorted(
            database.execute(
                "SELECT g.name, ct.app_label, p.codename FROM auth_group_permissions gp "
                "JOIN auth_group g ON g.id = gp.group_id "
                "JOIN auth_permission p ON p.id = gp.permission_id "
                "JOIN django_content_type ct ON ct.id = p.content_type_id"
            )
        )
    finally:
        database.close()
    return {
        "schema": schema,
        "migrations": migrations,
        "permissions": permissions,
        "grants": grants,
    }


@pytest.fixture(scope="module")
def migrated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A new SQLite database that every migration made, one by one."""
    folder = tmp_path_factory.mktemp("migrated")
    path = folder / "migrated.sqlite3"
    _manage(
        child_env(DATABASE_URL=f"sqlite:///{path}", DEEPWORK_VAR_DIR=str(folder)),
        "migrate",
        "--no-input",
    )
    return path


def test_the_new_database_file_is_what_the_migrations_make(migrated: Path):
    assert fresh_database_dump(migrated) == FRESH_DATABASE_SQL.read_text(encoding="utf-8"), (
        "a migration changed: run `make fresh-database` and commit mcp_bridge/fresh_database.sql"
    )


async def test_a_first_start_loads_the_new_database_and_says_so(
    tmp_path: Path, demo_project: Path, migrated: Path
):
    database = tmp_path / "data" / "deepwork.sqlite3"
    database.parent.mkdir()
    stderr_path = tmp_path / "stderr.log"
    told: list[str] = []

    async def on_log(message: LogMessage) -> None:
        told.append(str(message.data.get("msg", message.data)))

    transport = StdioTransport(
        command=sys.executable,
        args=[MANAGE, "mcpserve", "--path", str(demo_project)],
        env=child_env(
            DATABASE_URL=f"sqlite:///{database}",
            DEEPWORK_VAR_DIR=str(database.parent),
            DEEPWORK_LOG_LEVEL="INFO",
        ),
        cwd=str(demo_project),
        log_file=stderr_path,
    )
    async with Client(transport, log_handler=on_log, timeout=120) as client:
        answer = await client.call_tool("get_workflows", {})
        assert "demo" in answer.content[0].text  # type: ignore[union-attr]
    stderr = stderr_path.read_text()

    assert "Setting up a new database" in stderr
    assert "Applying" not in stderr  # loaded, not migrated
    assert "The database is ready" in stderr
    assert len(told) == 1
    assert told[0] == SETTING_UP_MESSAGE or told[0].startswith(SET_UP_MESSAGE.split("{")[0])
    assert sqlite_contents(database) == sqlite_contents(migrated)


async def test_a_second_start_neither_loads_nor_says_anything(
    tmp_path: Path, demo_project: Path, migrated: Path
):
    database = tmp_path / "deepwork.sqlite3"
    shutil.copyfile(migrated, database)
    env = child_env(DATABASE_URL=f"sqlite:///{database}", DEEPWORK_LOG_LEVEL="INFO")
    stderr_path = tmp_path / "stderr.log"
    told: list[str] = []

    async def on_log(message: LogMessage) -> None:
        told.append(str(message.data))

    transport = StdioTransport(
        command=sys.executable,
        args=[MANAGE, "mcpserve", "--path", str(demo_project)],
        env=env,
        cwd=str(demo_project),
        log_file=stderr_path,
    )
    async with Client(transport, log_handler=on_log, timeout=120) as client:
        await client.call_tool("get_workflows", {})
    assert told == []
    assert "Setting up" not in stderr_path.read_text()


def test_a_database_made_at_the_oldest_migration_upgrades_to_the_new_one(
    tmp_path: Path, migrated: Path
):
    database = tmp_path / "old.sqlite3"
    env = child_env(DATABASE_URL=f"sqlite:///{database}", DEEPWORK_VAR_DIR=str(tmp_path))
    for app, name in OLDEST:
        _manage(env, "migrate", app, name, "--no-input")
    tables = {row[0] for row in sqlite3.connect(database).execute("SELECT name FROM sqlite_master")}
    assert "tracker_task" not in tables  # it really was old

    _manage(env, "migrate", "--no-input")

    assert sqlite_contents(database) == sqlite_contents(migrated)


def _postgres_columns(url: str) -> dict[str, list[tuple[str, str, str]]]:
    import psycopg

    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT table_name, column_name, data_type, is_nullable "
            "FROM information_schema.columns WHERE table_schema = 'public' "
            "ORDER BY table_name, column_name"
        ).fetchall()
    tables: dict[str, list[tuple[str, str, str]]] = {}
    for table, column, kind, nullable in rows:
        tables.setdefault(table, []).append((column, kind, nullable))
    return tables


@pytest.mark.postgres
@pytest.mark.django_db
def test_on_postgresql_a_database_made_at_the_oldest_migration_upgrades(tmp_path: Path):
    if connection.vendor != "postgresql":
        pytest.skip("needs DATABASE_URL pointing at PostgreSQL")
    import psycopg

    # The test database's own server, reached through the test database.
    admin_url = child_database_url()
    name = f"deepwork_oldest_{uuid.uuid4().hex[:8]}"
    base = admin_url.rsplit("/", 1)[0]
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        url = f"{base}/{name}"
        env = child_env(DATABASE_URL=url, DEEPWORK_VAR_DIR=str(tmp_path))
        for app, migration in OLDEST:
            _manage(env, "migrate", app, migration, "--no-input")
        assert "tracker_task" not in _postgres_columns(url)
        _manage(env, "migrate", "--no-input")
        # The same tables and columns as the test database, which was migrated in one go.
        assert _postgres_columns(url) == _postgres_columns(admin_url)
    finally:
        with psycopg.connect(admin_url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
