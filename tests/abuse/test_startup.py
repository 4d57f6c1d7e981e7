"""Issue 9 point 9: several ``mcpserve`` started at the same moment on a fresh database.

One of two used to die with ``table … already exists``. The first-run migration is serialised
(a lock file next to the SQLite database; a PostgreSQL advisory lock), so all of them come up,
and the schema they leave is the one ``manage.py migrate`` makes.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.processes import MANAGE, child_env, handshake

pytestmark = pytest.mark.e2e

SERVERS = 4
PG_ADMIN_URL = os.environ.get(
    "DEEPWORK_TEST_PG_ADMIN", "postgres://postgres@127.0.0.1:5432/postgres"
)
HANDSHAKE = handshake("startup")


def start_together(project: Path, env: dict[str, str], count: int) -> list[subprocess.Popen]:
    """``count`` servers spawned back to back, their requests already waiting on stdin."""
    payload = "".join(json.dumps(message) + "\n" for message in HANDSHAKE).encode()
    servers = [
        subprocess.Popen(
            [sys.executable, MANAGE, "mcpserve", "--path", str(project)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
        )
        for _ in range(count)
    ]
    for server in servers:
        server.stdin.write(payload)
        server.stdin.flush()
    return servers


def assert_all_serve(servers: list[subprocess.Popen]) -> None:
    failures = []
    for server in servers:
        try:
            lines = [server.stdout.readline() for _ in range(2)]
            server.stdin.close()
            code = server.wait(timeout=120)
        finally:
            if server.poll() is None:
                server.kill()
                server.wait()
        stderr = server.stderr.read().decode(errors="replace")
        answers = [json.loads(line) for line in lines if line.strip()]
        if code != 0 or [a.get("id") for a in answers] != [1, 2] or "result" not in answers[1]:
            failures.append(f"exit {code}, answers {answers!r}, stderr:\n{stderr[-2000:]}")
    assert not failures, "\n\n".join(failures)


def sqlite_schema(path: Path) -> list[tuple[str, str, str]]:
    with sqlite3.connect(path) as db:
        rows = db.execute(
            "SELECT type, name, sql FROM sqlite_master WHERE name NOT LIKE 'sqlite_%' ORDER BY name"
        ).fetchall()
    return [(kind, name, sql or "") for kind, name, sql in rows]


def applied(path: Path) -> set[tuple[str, str]]:
    with sqlite3.connect(path) as db:
        return set(db.execute("SELECT app, name FROM django_migrations").fetchall())


def groups(path: Path) -> set[str]:
    with sqlite3.connect(path) as db:
        return {name for (name,) in db.execute("SELECT name FROM auth_group")}


def test_servers_started_together_on_a_fresh_sqlite_file_all_come_up(demo_project, tmp_path):
    race_dir, reference_dir = tmp_path / "race", tmp_path / "reference"
    servers = start_together(demo_project, child_env(DEEPWORK_VAR_DIR=str(race_dir)), SERVERS)
    assert_all_serve(servers)

    reference_env = child_env(DEEPWORK_VAR_DIR=str(reference_dir))
    subprocess.run(
        [sys.executable, MANAGE, "migrate", "--no-input", "-v0"], env=reference_env, check=True
    )
    raced, reference = race_dir / "deepwork.sqlite3", reference_dir / "deepwork.sqlite3"
    assert sqlite_schema(raced) == sqlite_schema(reference)
    assert applied(raced) == applied(reference)
    # migrate's post-migrate work (the dashboard's groups) ran too, though mcpserve itself
    # loads no dashboard.
    assert groups(raced) == groups(reference) == {"Watchers", "Deciders"}
    assert (race_dir / "deepwork.sqlite3.migrate.lock").exists()


@pytest.fixture
def fresh_postgres_url() -> Iterator[str]:
    psycopg = pytest.importorskip("psycopg")
    try:
        admin = psycopg.connect(PG_ADMIN_URL, autocommit=True, connect_timeout=3)
    except psycopg.OperationalError as error:
        pytest.skip(f"PostgreSQL is not reachable at {PG_ADMIN_URL}: {error}")
    name = f"dw_mcp_startup_{uuid.uuid4().hex[:8]}"
    admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield PG_ADMIN_URL.rsplit("/", 1)[0] + f"/{name}"
    finally:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.close()


def pg_schema(url: str) -> list[tuple[str, ...]]:
    import psycopg

    with psycopg.connect(url) as db:
        return db.execute(
            "SELECT table_name, column_name, data_type, is_nullable FROM "
            "information_schema.columns WHERE table_schema = 'public' ORDER BY 1, 2"
        ).fetchall()


def test_servers_started_together_on_a_fresh_postgres_database_all_come_up(
    demo_project, tmp_path, fresh_postgres_url
):
    env = child_env(DATABASE_URL=fresh_postgres_url, DEEPWORK_VAR_DIR=str(tmp_path / "var"))
    assert_all_serve(start_together(demo_project, env, SERVERS))

    import psycopg

    with psycopg.connect(fresh_postgres_url) as db:
        raced = set(db.execute("SELECT app, name FROM django_migrations").fetchall())
        raced_groups = {name for (name,) in db.execute("SELECT name FROM auth_group")}
    raced_schema = pg_schema(fresh_postgres_url)
    with psycopg.connect(fresh_postgres_url, autocommit=True) as db:
        db.execute("DROP SCHEMA public CASCADE")
        db.execute("CREATE SCHEMA public")
    subprocess.run([sys.executable, MANAGE, "migrate", "--no-input", "-v0"], env=env, check=True)
    with psycopg.connect(fresh_postgres_url) as db:
        reference = set(db.execute("SELECT app, name FROM django_migrations").fetchall())
    assert raced == reference
    assert raced_schema == pg_schema(fresh_postgres_url)
    assert raced_groups == {"Watchers", "Deciders"}
