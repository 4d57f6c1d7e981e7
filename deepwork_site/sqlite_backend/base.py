"""Django's SQLite backend, remembering how it rewrote each statement.

Django writes ``%s`` placeholders and its SQLite cursor rewrites them to ``?`` on every
execute, with a regular expression that costs ~10 µs on a statement of a few hundred
characters: more than SQLite takes to run many of them. A process sends the same few hundred
statement texts again and again (a transition sends a dozen), so the rewritten text is kept,
per text, in a bounded cache. Everything else is Django's backend as it is.
"""

from __future__ import annotations

import functools
from typing import Any

from django.db.backends.sqlite3 import base

# Statement texts kept rewritten: every shape the engine's transitions and pages send fits with
# room to spare; ORM statements with a varying number of placeholders come and go.
REWRITTEN_KEPT = 2048


@functools.lru_cache(maxsize=REWRITTEN_KEPT)
def qmark_style(query: str) -> str:
    """``query`` with Django's ``%s`` placeholders as SQLite's ``?`` (and ``%%`` as ``%``),
    exactly as Django's SQLite cursor rewrites it."""
    return base.FORMAT_QMARK_REGEX.sub("?", query).replace("%%", "%")


class SQLiteCursorWrapper(base.SQLiteCursorWrapper):
    def convert_query(self, query: str, *, param_names: Any = None) -> str:
        if param_names is None:
            return qmark_style(query)
        # django-stubs does not know Django's own rewriting method.
        return super().convert_query(query, param_names=param_names)  # type: ignore[misc]


class DatabaseWrapper(base.DatabaseWrapper):
    def create_cursor(self, name: Any = None) -> Any:
        return self.connection.cursor(factory=SQLiteCursorWrapper)
