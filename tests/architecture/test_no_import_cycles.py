"""No two of the product's modules import each other, directly or round a longer loop: a
circle means two modules are one idea split in two, or a lower layer reaching back up.

Read from the source. Every import counts, at module level or inside a function (a lazy import
only hides a circle), except those under ``if TYPE_CHECKING:``, which never run. ``from a.b
import c`` is an import of the module ``a.b.c`` when that module exists, else of ``a.b``; the
package ``__init__`` modules a dotted import passes through are not counted, since they hold
only re-exports.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def product_modules(root: Path = ROOT) -> dict[str, Path]:
    """Every module of every top-level package but the tests, by dotted name."""
    found = {}
    for init in sorted(root.glob("*/__init__.py")):
        package = init.parent
        if package.name in ("tests",) or package.name.startswith("."):
            continue
        for path in package.rglob("*.py"):
            if "migrations" in path.parts:
                continue
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def _run_time_nodes(tree: ast.AST) -> Iterable[ast.AST]:
    """Every node except those under ``if TYPE_CHECKING:``."""
    stack = [tree]
    while stack:
        node = stack.pop()
        if (
            isinstance(node, ast.If)
            and isinstance(node.test, ast.Name | ast.Attribute)
            and (getattr(node.test, "id", None) or getattr(node.test, "attr", None))
            == "TYPE_CHECKING"
        ):
            stack.extend(node.orelse)
            continue
        yield node
        stack.extend(ast.iter_child_nodes(node))


def imports_of(source: str, modules: set[str], filename: str = "<source>") -> set[str]:
    """The product modules ``source`` imports at run time."""
    found: set[str] = set()
    for node in _run_time_nodes(ast.parse(source, filename=filename)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name in modules)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            for alias in node.names:
                dotted = f"{node.module}.{alias.name}"
                if dotted in modules:
                    found.add(dotted)
                elif node.module in modules:
                    found.add(node.module)
    return found


def import_circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    circles: list[list[str]] = []
    counter = 0

    def visit(start: str) -> None:
        nonlocal counter
        work = [(start, iter(sorted(graph.get(start, ()))))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    group = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        group.append(member)
                        if member == node:
                            break
                    if len(group) > 1:
                        circles.append(sorted(group))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return sorted(circles)


def product_graph(root: Path = ROOT) -> dict[str, set[str]]:
    modules = product_modules(root)
    names = set(modules)
    return {
        name: imports_of(path.read_text(), names, str(path)) - {name}
        for name, path in modules.items()
    }


def test_no_module_imports_itself_round_a_circle():
    assert import_circles(product_graph()) == []


def test_a_planted_circle_is_found(tmp_path):
    for package in ("alpha", "beta"):
        (tmp_path / package).mkdir()
        (tmp_path / package / "__init__.py").write_text("")
    (tmp_path / "alpha" / "one.py").write_text("from beta.two import thing\nother = 1\n")
    (tmp_path / "beta" / "two.py").write_text("def thing():\n    from alpha.one import other\n")
    (tmp_path / "beta" / "three.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from alpha.one import other\n"
    )
    assert import_circles(product_graph(tmp_path)) == [["alpha.one", "beta.two"]]
