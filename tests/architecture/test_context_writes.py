"""Each context writes only its own tables, and the interfaces write none: contexts meet
through services and events. The one exception is the DAG scheduler, which runs its
workflows as the engine's sessions and step runs (one representation of a run), so it
writes those rows as the engine's services do.

Read from the source: a write is a call of ``create``, ``update``, ``delete``,
``bulk_create``, ``bulk_update``, ``get_or_create`` or ``update_or_create`` on a chain
starting at a model class imported from an app's ``models`` module (``Task.objects.filter(
...).update(...)``), and ``save``/``delete`` on an instance is left to the services that own
it. Migrations are not read: they write history, not state.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CONTEXTS = ("workflows", "reviews", "tracker", "dag", "workflow_tools", "insights", "accounts")
INTERFACES = ("api", "dashboard", "mcp_bridge", "deepwork_site")
WRITES = {
    "create",
    "update",
    "delete",
    "bulk_create",
    "bulk_update",
    "get_or_create",
    "update_or_create",
}
# (writer, owner) pairs allowed, with the reason in the module docstring.
ALLOWED = {("dag", "workflows")}


def model_names(tree: ast.AST) -> dict[str, str]:
    """Names bound by ``from <app>.models import X`` (or ``<app>.models.<sub>``), to their app."""
    found = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            parts = node.module.split(".")
            if len(parts) >= 2 and parts[1] == "models":
                for alias in node.names:
                    found[alias.asname or alias.name] = parts[0]
    return found


def _root_name(node: ast.AST) -> str | None:
    while isinstance(node, ast.Attribute | ast.Call | ast.Subscript):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node.id if isinstance(node, ast.Name) else None


def writes_in(source: str, filename: str = "<source>") -> list[tuple[int, str, str]]:
    """``(line, model, its app)`` for each write through a model class in ``source``."""
    tree = ast.parse(source, filename=filename)
    models = model_names(tree)
    found = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in WRITES
        ):
            root = _root_name(node.func.value)
            if root in models and "objects" in ast.unparse(node.func.value):
                found.append((node.lineno, root, models[root]))
    return found


def foreign_writes(app: str, root: Path = ROOT) -> list[str]:
    found = []
    for path in sorted((root / app).rglob("*.py")):
        if "migrations" in path.parts:
            continue
        for line, model, owner in writes_in(path.read_text(), str(path)):
            if owner != app and (app, owner) not in ALLOWED:
                found.append(f"{path.relative_to(root)}:{line}: writes {owner}.{model}")
    return found


def test_contexts_write_only_their_own_tables():
    found = [hit for app in CONTEXTS if (ROOT / app).is_dir() for hit in foreign_writes(app)]
    assert found == []


def test_interfaces_write_no_table():
    found = []
    for app in INTERFACES:
        for path in sorted((ROOT / app).rglob("*.py")):
            if "migrations" not in path.parts:
                found += [
                    f"{path.relative_to(ROOT)}:{line}: writes {owner}.{model}"
                    for line, model, owner in writes_in(path.read_text(), str(path))
                ]
    assert found == []


def test_a_planted_write_is_found(tmp_path):
    (tmp_path / "tracker").mkdir()
    (tmp_path / "tracker" / "services.py").write_text(
        "from workflows.models import StepRun\n"
        "from tracker.models import Task\n"
        "def f(pk):\n"
        "    Task.objects.filter(pk=pk).update(title='x')\n"
        "    StepRun.objects.filter(pk=pk).delete()\n"
    )
    assert foreign_writes("tracker", tmp_path) == [
        "tracker/services.py:5: writes workflows.StepRun"
    ]
