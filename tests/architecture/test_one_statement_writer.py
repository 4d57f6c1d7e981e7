"""Statements written out for speed go through one module, ``workflows.rows``: it reads rows back
through the fields' converters and prepares values as the ORM would. A second copy of that
preparation (``get_db_prep_save``, ``from_db``) is where a JSON column would be written as text
on one backend and an object on the other.

Read from the source of every app module (migrations aside).
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
WRITER = "workflows/rows.py"
_MECHANISM = {"get_db_prep_save", "get_db_prep_value", "from_db"}


def own_statement_mechanics(source: str) -> list[str]:
    """Calls in ``source`` that prepare values or build instances from rows by hand."""
    return [
        f"{node.lineno}: .{node.func.attr}()"
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in _MECHANISM
    ]


def app_modules() -> list[Path]:
    """Every module of every app (a top-level folder with an ``apps.py``)."""
    apps = [folder for folder in sorted(ROOT.iterdir()) if (folder / "apps.py").is_file()]
    return [
        path
        for app in apps
        for path in sorted(app.rglob("*.py"))
        if "migrations" not in path.relative_to(ROOT).parts
    ]


def test_only_the_statement_writer_prepares_values_or_builds_rows():
    found = {
        str(path.relative_to(ROOT)): hits
        for path in app_modules()
        if str(path.relative_to(ROOT)) != WRITER
        and (hits := own_statement_mechanics(path.read_text()))
    }

    assert found == {}
    assert len(app_modules()) > 100


def test_a_planted_copy_is_caught():
    planted = (
        "def insert(field, value, connection):\n"
        "    return field.get_db_prep_save(value, connection)\n"
        "def read(model, row):\n"
        "    return model.from_db('default', ['id'], row)\n"
    )

    assert own_statement_mechanics(planted) == ["2: .get_db_prep_save()", "4: .from_db()"]
