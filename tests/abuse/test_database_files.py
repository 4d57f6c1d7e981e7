"""Issue 9.11: the embedded database was world-readable.

Reproduced as found: on a fresh checkout ``var/deepwork.sqlite3`` (and its ``-wal`` and
``-shm``) came out 0644 in a 0755 folder, while it holds the dashboard's session keys. Each
test starts the real server code in a subprocess on a real, fresh ``DEEPWORK_VAR_DIR``, with a
umask of 0 so that nothing but the server itself can be what keeps the files private.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connection

from deepwork_site.sqlite_files import database_file

MANAGE = str(Path(settings.BASE_DIR) / "manage.py")

# Write through the ORM, then report every file's mode while the connection is still open (in
# WAL mode that is when -wal and -shm exist).
WRITE_AND_REPORT = """
import json, os, stat
from django.conf import settings
from django.contrib.auth.models import User
User.objects.create_user(f"user{User.objects.count()}")
var = settings.VAR_DIR
modes = {name: stat.S_IMODE(os.stat(var / name).st_mode) for name in os.listdir(var)}
modes["."] = stat.S_IMODE(os.stat(var).st_mode)
print(json.dumps(modes))
"""


def env_for(var_dir: Path, **extra: str) -> dict[str, str]:
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": os.environ.get("HOME", "/tmp"),
        "DJANGO_SETTINGS_MODULE": "deepwork_site.settings",
        "DEEPWORK_VAR_DIR": str(var_dir),
        "DEEPWORK_LOG_LEVEL": "WARNING",
        **extra,
    }
    # No SECRET_KEY: the key file under var/ is made too, and must be private as well.
    return env


def manage(env: dict[str, str], *args: str, umask: int = 0) -> str:
    done = subprocess.run(
        [sys.executable, MANAGE, *args],
        env=env,
        cwd=settings.BASE_DIR,
        capture_output=True,
        text=True,
        timeout=120,
        umask=umask,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_fresh_var_folder_and_its_database_are_private(tmp_path):
    var_dir = tmp_path / "fresh" / "var"
    env = env_for(var_dir)

    manage(env, "migrate", "--no-input", "-v", "0")

    assert mode(var_dir) == 0o700
    assert mode(var_dir / "deepwork.sqlite3") == 0o600
    assert mode(var_dir / "secret_key") == 0o600
    for leftover in var_dir.iterdir():  # -wal and -shm if they outlived the process
        assert mode(leftover) & 0o077 == 0, leftover

    modes = json.loads(manage(env, "shell", "-c", WRITE_AND_REPORT).splitlines()[-1])
    assert {"deepwork.sqlite3-wal", "deepwork.sqlite3-shm"} <= set(modes)
    assert modes == {name: 0o700 if name == "." else 0o600 for name in modes}


def test_an_existing_readable_install_is_made_private(tmp_path):
    """A database made before this fix (0644 in a 0755 folder) is tightened on next start."""
    var_dir = tmp_path / "var"
    env = env_for(var_dir)
    manage(env, "migrate", "--no-input", "-v", "0")
    var_dir.chmod(0o755)
    for path in var_dir.iterdir():
        path.chmod(0o644)

    modes = json.loads(manage(env, "shell", "-c", WRITE_AND_REPORT).splitlines()[-1])

    assert modes["."] == 0o700
    assert modes["deepwork.sqlite3"] == 0o600
    assert modes["deepwork.sqlite3-wal"] == 0o600
    assert modes["deepwork.sqlite3-shm"] == 0o600


@pytest.mark.postgres
def test_with_postgresql_the_var_folder_and_key_are_private(tmp_path):
    url = os.environ.get("DATABASE_URL", "")
    if not url.startswith("postgres"):
        pytest.skip("needs DATABASE_URL pointing at PostgreSQL")
    var_dir = tmp_path / "var"
    manage(env_for(var_dir, DATABASE_URL=url), "check")
    assert mode(var_dir) == 0o700
    assert mode(var_dir / "secret_key") == 0o600
    assert not (var_dir / "deepwork.sqlite3").exists()


@pytest.mark.django_db
def test_the_test_database_itself_is_private():
    """Django makes a test database anew; the first connection to it tightens it too."""
    if connection.vendor != "sqlite":
        pytest.skip("only SQLite keeps the database in a file")
    connection.ensure_connection()
    database = database_file(connection.settings_dict)
    assert database is not None
    assert mode(database) == 0o600
    assert mode(database.parent) & 0o077 == 0


def test_in_memory_databases_have_no_file():
    assert database_file({"NAME": ":memory:"}) is None
    assert database_file({"NAME": "file:memorydb_default?mode=memory&cache=shared"}) is None
    assert database_file({"NAME": "/srv/var/deepwork.sqlite3"}) == Path("/srv/var/deepwork.sqlite3")
