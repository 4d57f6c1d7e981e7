"""The apps import in one direction: the engine never imports an interface, ``workflows`` never
imports ``reviews`` or ``tracker`` (the contexts built on it), the contexts never import each
other, ``insights`` (a read model over every context) sits above the contexts and below the
interfaces and only reads what is beneath it, the engine never imports a dialect (it answers
in domain terms), and the admin helpers every app shares import no app's interface.

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


def test_workflows_does_not_import_the_tracker():
    assert offending(sources("workflows"), ("tracker",)) == []


def test_workflows_does_not_import_the_dag_or_the_workflow_tools():
    assert offending(sources("workflows"), ("dag", "workflow_tools")) == []


def test_the_dag_does_not_import_the_workflow_tools():
    """The workflow tools serve DAG workflows and react to the DAG's events; the scheduler
    knows nothing of them."""
    assert offending(sources("dag"), ("workflow_tools",)) == []


@pytest.mark.parametrize(("app", "other"), [("tracker", "reviews"), ("reviews", "tracker")])
def test_the_contexts_do_not_import_each_other(app, other):
    assert offending(sources(app), (other,)) == []


@pytest.mark.parametrize(
    "app", ["workflows", "reviews", "tracker", "dag", "workflow_tools", "insights"]
)
def test_the_engine_does_not_import_an_interface(app):
    assert offending(sources(app), INTERFACES) == []


# The insights count every context's rows: a read model above the engine and the contexts,
# below the interfaces. Nothing beneath imports it; of what is beneath, it imports only what
# reads (models, selectors, their errors) and the event writer its tallies subscribe to.
READ_MODELS = ("insights",)
BENEATH_THE_READ_MODELS = ("workflows", "tracker", "reviews", "dag", "workflow_tools")
READABLE = ("models", "selectors", "errors", "events")


@pytest.mark.parametrize("app", BENEATH_THE_READ_MODELS)
def test_nothing_beneath_imports_the_insights(app):
    assert offending(sources(app), READ_MODELS) == []


def beyond_reading(paths: list[Path], root: Path = ROOT) -> list[str]:
    """``file: module`` for each import of a module beneath that is not one of ``READABLE``."""
    return [
        found
        for found in offending(paths, BENEATH_THE_READ_MODELS, root)
        if (name := found.split(": ", 1)[1]) not in BENEATH_THE_READ_MODELS
        and name.split(".")[1] not in READABLE
    ]


def test_the_insights_only_read_what_is_beneath_them():
    assert beyond_reading(sources("insights")) == []


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
    helpers = [ROOT / "workflows" / "admin_base.py"]
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


def test_the_read_model_rule_flags_every_write_and_every_import_of_it(tmp_path):
    """The insights rules above would pass on an empty scan; this shows what they flag."""
    (tmp_path / "insights").mkdir()
    (tmp_path / "tracker").mkdir()
    (tmp_path / "insights" / "figures.py").write_text(
        "from tracker.models import Issue\n"
        "from reviews import selectors\n"
        "from workflows import events\n"
        "from tracker.services import task_start\n"
        "def later():\n"
        "    from reviews import gate\n"
        "    import workflows.services.sessions\n"
    )
    (tmp_path / "tracker" / "services.py").write_text(
        "def later():\n    from insights import tallies\n"
    )
    found = beyond_reading([tmp_path / "insights" / "figures.py"], root=tmp_path)
    assert found == [
        "insights/figures.py: reviews.gate",
        "insights/figures.py: tracker.services",
        "insights/figures.py: tracker.services.task_start",
        "insights/figures.py: workflows.services.sessions",
    ]
    beneath = offending([tmp_path / "tracker" / "services.py"], READ_MODELS, root=tmp_path)
    assert beneath == ["tracker/services.py: insights", "tracker/services.py: insights.tallies"]


CONTEXTS = ("workflows", "reviews", "tracker", "dag", "workflow_tools", "insights", "accounts")


@pytest.mark.parametrize("app", CONTEXTS)
def test_no_context_reaches_up_into_the_site(app):
    """The site package mounts the apps; an app's code (its management commands aside, which
    are an interface) never imports it back."""
    paths = [p for p in sources(app) if "management" not in p.parts]
    assert offending(paths, ("deepwork_site",)) == []
