"""The apps import in one direction: the engine never imports an interface, ``workflows`` never
imports ``reviews`` or ``tracker`` (the contexts built on it), the contexts never import each
other, the engine never imports a dialect (it answers in domain terms), and the admin helpers
every app shares import no app's interface.

Read from the source (every import statement, at module level or inside a function), so a
lazy import hidden in a function body counts as much as one at the top.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
INTERFACES = ("api", "dashboard", "mcp_bridge")


def imported_modules(path: Path) -> set[str]:
    """Every absolute module name ``path`` imports, and every name given to ``import_module``."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif (
            isinstance(node, ast.Call)
            and getattr(node.func, "attr", getattr(node.func, "id", None)) == "import_module"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            names.add(node.args[0].value)
    return names


def sources(app: str) -> list[Path]:
    files = [p for p in (ROOT / app).rglob("*.py") if "migrations" not in p.parts]
    assert files, f"no Python files under {app}/"
    return sorted(files)


def offending(paths: list[Path], forbidden: tuple[str, ...], root: Path = ROOT) -> list[str]:
    """``file: module`` for each import of a forbidden package (or any module inside it)."""
    found = []
    for path in paths:
        for name in sorted(imported_modules(path)):
            if any(name == pkg or name.startswith(f"{pkg}.") for pkg in forbidden):
                found.append(f"{path.relative_to(root)}: {name}")
    return found


def test_workflows_does_not_import_reviews():
    assert offending(sources("workflows"), ("reviews",)) == []


# The insight read models count every context's rows, the tracker's among them. They still live
# in workflows/ until they get an app of their own above the contexts; until then they may read
# the tracker's models, and nothing else of workflows/ may import the tracker at all.
TRACKER_READ_BY_INSIGHTS = ("workflows/selectors/insights.py", "tracker.models")


def below_the_tracker(paths: list[Path], root: Path = ROOT) -> list[str]:
    """``offending(paths, ("tracker",))`` less the insight read models' reads of its models."""
    reader, models = TRACKER_READ_BY_INSIGHTS
    return [
        found
        for found in offending(paths, ("tracker",), root)
        if not (
            found.startswith(f"{reader}: ")
            and (found.endswith(f": {models}") or f": {models}." in found)
        )
    ]


def test_workflows_does_not_import_the_tracker():
    assert below_the_tracker(sources("workflows")) == []


def test_workflows_does_not_import_the_dag_or_the_workflow_tools():
    assert offending(sources("workflows"), ("dag", "workflow_tools")) == []


def test_the_dag_does_not_import_the_workflow_tools():
    """The workflow tools serve DAG workflows and react to the DAG's events; the scheduler
    knows nothing of them."""
    assert offending(sources("dag"), ("workflow_tools",)) == []


@pytest.mark.parametrize(("app", "other"), [("tracker", "reviews"), ("reviews", "tracker")])
def test_the_contexts_do_not_import_each_other(app, other):
    assert offending(sources(app), (other,)) == []


@pytest.mark.parametrize("app", ["workflows", "reviews", "tracker", "dag", "workflow_tools"])
def test_the_engine_does_not_import_an_interface(app):
    assert offending(sources(app), INTERFACES) == []


def engine_sources() -> list[Path]:
    """The engine's writers and readers and the domain answers they return."""
    workflows = ROOT / "workflows"
    return sorted(
        [
            *(workflows / "services").rglob("*.py"),
            *(workflows / "selectors").rglob("*.py"),
            workflows / "results.py",
            *sources("reviews"),
            *sources("tracker"),
        ]
    )


def test_the_engine_answers_in_domain_terms_not_a_dialects_wire():
    """DeepWork's wording and wire models are the dialect's: a second dialect renders the same
    domain answers without going through DeepWork's."""
    assert offending(engine_sources(), ("workflows.dialects", "workflows.schemas")) == []


def test_the_shared_admin_helpers_import_no_app_interface():
    helpers = [ROOT / "deepwork_site" / "admin_helpers.py"]
    assert offending(helpers, ("reviews", *INTERFACES, "workflows.admin", "tracker.admin")) == []


def test_the_scan_finds_every_kind_of_import(tmp_path):
    """The checks above would pass on an empty scan; this shows the scan sees what they forbid."""
    module = tmp_path / "module.py"
    module.write_text(
        "import dashboard.live\n"
        "from reviews import services\n"
        "from . import sibling\n"
        "def later():\n"
        "    from mcp_bridge.server import create_server\n"
        "    importlib.import_module('api.api')\n"
    )
    found = offending([module], ("reviews", *INTERFACES), root=tmp_path)
    assert found == [
        "module.py: api.api",
        "module.py: dashboard.live",
        "module.py: mcp_bridge.server",
        "module.py: mcp_bridge.server.create_server",
        "module.py: reviews",
        "module.py: reviews.services",
    ]


def test_only_the_insight_read_models_may_read_the_tracker(tmp_path):
    """The tracker rule above allows one read; this shows it flags every other import."""
    selectors = tmp_path / "workflows" / "selectors"
    services = tmp_path / "workflows" / "services"
    selectors.mkdir(parents=True)
    services.mkdir(parents=True)
    (selectors / "insights.py").write_text(
        "from tracker.models import Issue, Task\nfrom tracker.services import task_start\n"
    )
    (services / "sessions.py").write_text("def later():\n    from tracker import models\n")
    found = below_the_tracker(sorted(tmp_path.rglob("*.py")), root=tmp_path)
    assert found == [
        "workflows/selectors/insights.py: tracker.services",
        "workflows/selectors/insights.py: tracker.services.task_start",
        "workflows/services/sessions.py: tracker",
        "workflows/services/sessions.py: tracker.models",
    ]
