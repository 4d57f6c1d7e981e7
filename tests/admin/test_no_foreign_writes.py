"""The reviews context writes the engine's tables only through the engine's services: no
``<Model>.objects.<write>`` in ``reviews/`` on a model of ``workflows.models``.

Read from the source: a call whose method is a write (``create``, ``update``, ``delete``,
``bulk_*``, ``get_or_create``, ``update_or_create``) on a chain that starts at
``<Model>.objects``, where ``<Model>`` is imported from ``workflows.models``.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
WRITES = {"create", "update", "delete", "get_or_create", "update_or_create"}


def _is_write(name: str) -> bool:
    return name in WRITES or name.startswith("bulk_")


def _chain_model(node: ast.expr) -> str | None:
    """The name ``X`` of a ``X.objects....`` chain, if the chain starts so."""
    while True:
        if isinstance(node, ast.Call):
            node = node.func
        elif isinstance(node, ast.Attribute):
            if node.attr == "objects" and isinstance(node.value, ast.Name):
                return node.value.id
            node = node.value
        else:
            return None


def foreign_writes(source: str, owner: str = "workflows.models") -> list[str]:
    """``Model.method`` for each write on a model ``source`` imports from ``owner``."""
    tree = ast.parse(source)
    foreign = {
        alias.asname or alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module == owner
        for alias in node.names
    }
    found = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and _is_write(node.func.attr)
        ):
            model = _chain_model(node.func.value)
            if model in foreign:
                found.append(f"{model}.{node.func.attr}")
    return found


def test_reviews_writes_no_engine_table_itself():
    offending = {
        str(path.relative_to(ROOT)): writes
        for path in sorted((ROOT / "reviews").rglob("*.py"))
        if "migrations" not in path.parts
        and (writes := foreign_writes(path.read_text(encoding="utf-8")))
    }
    assert offending == {}


def test_a_planted_write_is_found():
    planted = (
        "from django.db.models import F\n"
        "from workflows.models import StepRun\n"
        "def count(ids):\n"
        "    StepRun.objects.filter(pk__in=ids).update(quality_attempts=F('n') + 1)\n"
    )
    assert foreign_writes(planted) == ["StepRun.update"]
    own = "from reviews.models import ReviewResult\nReviewResult.objects.create()\n"
    assert foreign_writes(own) == []
