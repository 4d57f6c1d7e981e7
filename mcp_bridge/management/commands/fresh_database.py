"""``manage.py fresh_database --write|--check``: the new-database file a first start loads.

A developer who adds or changes a migration runs ``make fresh-database`` (``--write``), and the
suite runs ``--check``'s comparison: the file must be exactly what every migration leaves in a
new SQLite database, so that a new install and an upgraded one have the same schema.
"""

from __future__ import annotations

import difflib
import os
import tempfile
from argparse import ArgumentParser
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from mcp_bridge.migrate import FRESH_DATABASE_SQL, fresh_database_dump, migrate_in_child


def migrated_dump() -> str:
    """Migrate a new SQLite database in a child process and dump it."""
    with tempfile.TemporaryDirectory(prefix="deepwork-fresh-") as folder:
        database = Path(folder) / "fresh.sqlite3"
        env = {key: value for key, value in os.environ.items() if key != "DATABASE_URL"}
        # Its own data folder too: the child must not touch the developer's secret key.
        env.update({"DATABASE_URL": f"sqlite:///{database}", "DEEPWORK_VAR_DIR": folder})
        migrate_in_child(env)
        return fresh_database_dump(database)


class Command(BaseCommand):
    help = (
        "Write (--write) or check (--check) mcp_bridge/fresh_database.sql, what every "
        "migration leaves in a new SQLite database."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        mode = parser.add_mutually_exclusive_group(required=True)
        mode.add_argument("--write", action="store_true", help="write the file")
        mode.add_argument("--check", action="store_true", help="fail if the file is stale")

    def handle(self, *args: Any, **options: Any) -> None:
        dump = migrated_dump()
        if options["write"]:
            FRESH_DATABASE_SQL.write_text(dump, encoding="utf-8")
            self.stderr.write(f"Wrote {FRESH_DATABASE_SQL}")
            return
        try:
            current = FRESH_DATABASE_SQL.read_text(encoding="utf-8")
        except FileNotFoundError:
            current = ""
        if current != dump:
            diff = difflib.unified_diff(
                current.splitlines(), dump.splitlines(), "file", "migrations", lineterm="", n=1
            )
            shown = "\n".join(list(diff)[:40])
            raise CommandError(
                f"{FRESH_DATABASE_SQL.name} is not what the migrations make; run "
                f"`make fresh-database` and commit it.\n{shown}"
            )
        self.stderr.write(f"{FRESH_DATABASE_SQL.name} matches the migrations")
