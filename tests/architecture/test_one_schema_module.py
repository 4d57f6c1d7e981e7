"""One module turns a JSON Schema into a validator: ``workflows.json_schemas``.

It alone may import jsonschema's validator classes or ``referencing``, call ``check_schema``
or ``validator_for``, or name a ``Draft…Validator``: everywhere else a schema is checked and
its validator built through it, so no caller can build a validator that fetches a remote
``$ref`` or follows a ref loop. Other modules may still import ``jsonschema.exceptions`` (the
errors the one module hands back). Read from the source, lazy imports inside functions
included.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from tests.architecture.test_layers import ROOT, imported_modules, sources

APPS = ("workflows", "reviews", "mcp_bridge", "api", "dashboard", "deepwork_site")
THE_MODULE = ROOT / "workflows" / "json_schemas.py"
ALLOWED_IMPORTS = ("jsonschema.exceptions",)
FORBIDDEN_PACKAGES = ("jsonschema", "referencing")
FORBIDDEN_NAMES = ("check_schema", "validator_for", "RefResolver")
VALIDATOR_CLASS = re.compile(r"Draft\d+Validator$")


def schema_violations(path: Path) -> list[str]:
    """What in ``path`` builds or checks a JSON Schema validator by itself."""
    found = []
    for name in sorted(imported_modules(path)):
        allowed = any(name == ok or name.startswith(f"{ok}.") for ok in ALLOWED_IMPORTS)
        if not allowed and any(name == p or name.startswith(f"{p}.") for p in FORBIDDEN_PACKAGES):
            found.append(f"imports {name}")
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if not isinstance(node, ast.Name | ast.Attribute):
            continue
        used = node.id if isinstance(node, ast.Name) else node.attr
        if used in FORBIDDEN_NAMES or VALIDATOR_CLASS.match(used):
            found.append(f"line {node.lineno}: uses {used}")
    return found


def test_only_the_schema_module_builds_json_schema_validators():
    found = {
        str(path.relative_to(ROOT)): problems
        for app in APPS
        for path in sources(app)
        if path != THE_MODULE and (problems := schema_violations(path))
    }
    assert found == {}


def test_the_schema_module_is_where_validators_are_built():
    # The rule above holds because the work is done here, not because nobody checks schemas.
    assert schema_violations(THE_MODULE)


def test_each_way_of_building_a_validator_is_caught(tmp_path):
    planted = {
        "from jsonschema import Draft7Validator\n": "imports jsonschema.Draft7Validator",
        "import jsonschema\n": "imports jsonschema",
        "from jsonschema.validators import validator_for\n": "imports jsonschema.validators",
        "def f(s):\n    from referencing import Registry\n": "imports referencing",
        "def f(v, s):\n    v.check_schema(s)\n": "line 2: uses check_schema",
        "def f(m, s):\n    return m.Draft202012Validator(s)\n": "line 2: uses Draft202012Validator",
        "import importlib\nm = importlib.import_module('jsonschema')\n": "imports jsonschema",
    }
    for index, (source, expected) in enumerate(planted.items()):
        path = tmp_path / f"planted{index}.py"
        path.write_text(source)
        assert expected in schema_violations(path), source
    allowed = tmp_path / "allowed.py"
    allowed.write_text(
        "from jsonschema.exceptions import ValidationError\n"
        "from workflows import json_schemas\n"
        "v = json_schemas.validator({})\n"
    )
    assert schema_violations(allowed) == []
