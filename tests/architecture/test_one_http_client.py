"""One outbound HTTP client: ``workflow_tools.outbound`` is the only app module that opens a URL or
a network connection, so its rules (http(s) only, no redirect to another origin, one deadline
per request, a size cap) hold for every request the server makes.

Read from the source, as the other layer tests are: an import of an HTTP client library (at
module level or inside a function, or by name through ``import_module``), or a call that opens
a URL or a connection.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.architecture.test_layers import ROOT, imported_modules

APPS = (
    "workflows",
    "dag",
    "workflow_tools",
    "reviews",
    "dashboard",
    "api",
    "deepwork_site",
    "mcp_bridge",
)
THE_CLIENT_PATH = Path("workflow_tools", "outbound.py")
THE_CLIENT = ROOT / THE_CLIENT_PATH
HTTP_MODULES = ("urllib.request", "http.client", "httpx", "requests", "aiohttp", "urllib3")
# Calls that open a URL or a connection, whatever module they come from.
OPENERS = frozenset(
    {
        "urlopen",
        "urlretrieve",
        "build_opener",
        "create_connection",
        "open_connection",
        "HTTPConnection",
        "HTTPSConnection",
        "wrap_socket",
    }
)


def opened(path: Path) -> list[str]:
    """What ``path`` does that only the one client may do."""
    found = []
    for name in sorted(imported_modules(path)):
        if any(name == mod or name.startswith(f"{mod}.") for mod in HTTP_MODULES):
            found.append(f"imports {name}")
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
        if called in OPENERS:
            found.append(f"calls {called}() at line {node.lineno}")
        # socket.socket(...) and a socket's connect(...) open connections too.
        if (
            isinstance(func, ast.Attribute)
            and isinstance(func.value, ast.Name)
            and func.value.id == "socket"
            and func.attr in ("socket", "socketpair", "fromfd")
        ):
            found.append(f"calls socket.{func.attr}() at line {node.lineno}")
    return found


def violations(root: Path = ROOT) -> list[str]:
    found = []
    for app in APPS:
        for path in sorted((root / app).rglob("*.py")):
            if path.relative_to(root) == THE_CLIENT_PATH or "migrations" in path.parts:
                continue
            found.extend(f"{path.relative_to(root)}: {what}" for what in opened(path))
    return found


def test_only_the_outbound_module_opens_urls():
    assert violations() == []


def test_the_outbound_module_is_what_the_check_exempts():
    assert THE_CLIENT.is_file()
    assert any(what.startswith("imports http.client") for what in opened(THE_CLIENT))
    assert any("create_connection" in what for what in opened(THE_CLIENT))


def test_a_planted_request_is_found(tmp_path):
    """The check is not vacuous: each way of opening a URL, planted in an app, is reported."""
    for app in APPS:
        (tmp_path / app).mkdir()
    (tmp_path / "workflow_tools" / "outbound.py").write_text("import http.client\n")
    (tmp_path / "workflows" / "fetcher.py").write_text(
        "import urllib.request\n\n\ndef get(url):\n    return urllib.request.urlopen(url)\n"
    )
    (tmp_path / "reviews" / "lazy.py").write_text(
        "def get(url):\n    import httpx\n\n    return httpx.get(url)\n"
    )
    (tmp_path / "api" / "byname.py").write_text(
        "from importlib import import_module\n\nrequests = import_module('requests')\n"
    )
    (tmp_path / "dashboard" / "raw.py").write_text(
        "import socket\n\n\ndef ping(host):\n    return socket.create_connection((host, 80))\n"
    )
    (tmp_path / "mcp_bridge" / "fromurllib.py").write_text("from urllib import request\n")
    found = violations(tmp_path)
    assert "workflows/fetcher.py: imports urllib.request" in found
    assert "workflows/fetcher.py: calls urlopen() at line 5" in found
    assert "reviews/lazy.py: imports httpx" in found
    assert "api/byname.py: imports requests" in found
    assert "dashboard/raw.py: calls create_connection() at line 5" in found
    assert "mcp_bridge/fromurllib.py: imports urllib.request" in found
    assert not any(line.startswith("workflow_tools/outbound.py") for line in found)
