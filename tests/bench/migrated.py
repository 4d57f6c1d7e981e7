"""A migrated SQLite database shared by the benchmarks' smoke runs.

Migrating a new SQLite database costs several seconds of CPU, more than a smoke run's own
work, and every benchmark starts from a throwaway one. The test suite's smoke runs
(``tests/bench/test_benches_run.py``) migrate one database first and name its file in
``DEEPWORK_BENCH_MIGRATED_SQLITE``; a benchmark copies it into each data folder it makes, and its
own ``migrate`` then finds nothing to apply. Without that variable (``make bench``) nothing is
copied and every benchmark migrates as before.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
from pathlib import Path

ENV = "DEEPWORK_BENCH_MIGRATED_SQLITE"
# The embedded database's file in a data folder (deepwork_site.settings).
DATABASE_NAME = "deepwork.sqlite3"


def copy_into(var_dir: Path) -> bool:
    """Put the migrated database into the data folder ``var_dir`` (made if missing), when one is
    named and the folder has no database yet; whether it did (then nothing is left to migrate)."""
    template = os.environ.get(ENV)
    target = var_dir / DATABASE_NAME
    if not template or target.exists():
        return False
    var_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    shutil.copyfile(template, target)
    target.chmod(0o600)
    return True


def make(var_dir: Path, database: Path) -> None:
    """``database``: one self-contained file (no ``-wal`` beside it) holding the database that
    ``manage.py migrate`` made in ``var_dir``."""
    with (
        sqlite3.connect(var_dir / DATABASE_NAME) as source,
        sqlite3.connect(database) as copy,
    ):
        source.backup(copy)
    source.close()
    copy.close()
