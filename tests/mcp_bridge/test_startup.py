"""A stdio ``mcpserve`` lists its tools before Django loads, and holds each call until it has.

The first test declares the servers in a fresh interpreter with the settings known but Django not
set up, as ``mcpserve`` does: an import of a model (or of anything that imports one) at the top
of a tool module fails it. The others drive real processes.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.db import connection

from mcp_bridge.toolsets import deepwork
from mcp_bridge.toolsets.deepwork import both, deepreview, v0_9
from tests.support.processes import (
    INITIALIZED,
    MANAGE,
    child_env,
    child_env_on_test_db,
    initialize_request,
)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.e2e]

DECLARE = """
import asyncio, json, sys
from deepwork_site import process
process.serve_mcp_only()
from django.apps import apps
import mcp_bridge.management.commands.mcpserve
from mcp_bridge.server import create_server

listed = {}
for generation in ("0.9", "both"):
    server = create_server(sys.argv[1], generation=generation)
    listed[generation] = sorted(tool.name for tool in asyncio.run(server.list_tools()))
print(json.dumps({
    "listed": listed,
    "apps_ready": apps.ready,
    "engine": sorted(m for m in sys.modules if m in ("workflows.models", "reviews.models")),
}))
"""


def test_the_deepwork_tools_are_declared_without_the_app_registry(demo_project: Path):
    found = subprocess.run(
        [sys.executable, "-c", DECLARE, str(demo_project)],
        capture_output=True,
        text=True,
        env=child_env_on_test_db(),
        cwd=settings.BASE_DIR,
        timeout=120,
    )
    assert found.returncode == 0, found.stderr[-3000:]
    declared = json.loads(found.stdout)
    assert declared["listed"] == {
        "0.9": sorted(v0_9.TOOL_NAMES + deepreview.TOOL_NAMES),
        "both": sorted(both.TOOL_NAMES + deepreview.TOOL_NAMES),
    }
    assert declared["apps_ready"] is False
    assert declared["engine"] == []


def _serve(project: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, MANAGE, "mcpserve", "--path", str(project)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )


def _ask(server: subprocess.Popen[bytes], *messages: dict[str, object]) -> Any:
    """Send ``messages``; the answer to the last one (every other one is a notification or was
    answered before)."""
    assert server.stdin is not None
    assert server.stdout is not None
    server.stdin.write("".join(json.dumps(m) + "\n" for m in messages).encode())
    server.stdin.flush()
    return json.loads(server.stdout.readline())


def _call(request_id: int, name: str, **arguments: object) -> dict[str, object]:
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments},
    }


def _stop(server: subprocess.Popen[bytes]) -> str:
    assert server.stdin is not None
    assert server.stderr is not None
    server.stdin.close()
    try:
        server.wait(timeout=60)
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
    return server.stderr.read().decode(errors="replace")


def test_a_call_sent_before_the_listing_is_answered_once_the_server_has_started(
    demo_project: Path,
):
    # start_workflow's own body loads the engine (the dialect), not only its database work.
    start = _call(2, "start_workflow", goal="early", job_name="demo", workflow_name="quick")
    server = _serve(demo_project, child_env_on_test_db())
    try:
        assert _ask(server, initialize_request("eager"))["id"] == 1
        answer = _ask(server, INITIALIZED, start)
    finally:
        stderr = _stop(server)
    assert answer["id"] == 2, stderr[-3000:]
    result = answer["result"]
    assert not result.get("isError"), (result, stderr[-3000:])
    started = result["structuredContent"]
    assert started["begin_step"]["step_id"] == "gather"
    assert started["stack"] == [{"workflow": "demo/quick", "step": "gather"}]


@pytest.mark.skipif(
    "connection.vendor != 'sqlite'", reason="copies the SQLite test database to a new path"
)
def test_a_failed_start_refuses_calls_with_its_reason_and_the_next_call_starts_again(
    demo_project: Path, tmp_path: Path
):
    # The database's folder cannot be made while a file holds its name.
    folder = tmp_path / "data"
    folder.write_text("in the way\n")
    env = child_env(DATABASE_URL=f"sqlite:///{folder / 'deepwork.sqlite3'}")
    server = _serve(demo_project, env)
    try:
        assert _ask(server, initialize_request("patient"))["id"] == 1
        listing = _ask(server, INITIALIZED, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
        refused = _ask(server, _call(3, "get_workflows"))
        # Out of the way, with a database in its place (the test's own, already migrated).
        folder.unlink()
        folder.mkdir()
        with sqlite3.connect(folder / "deepwork.sqlite3") as copy:
            source = sqlite3.connect(connection.settings_dict["NAME"])
            source.backup(copy)
            source.close()
        answered = _ask(server, _call(4, "get_workflows"))
    finally:
        stderr = _stop(server)
    assert "get_workflows" in json.dumps(listing["result"])
    result = refused["result"]
    assert result["isError"] is True, result
    text = result["content"][0]["text"]
    assert text.startswith("The deepwork server could not start: "), text
    assert str(folder) in text
    assert "the next call tries again" in text
    assert "The server could not start" in stderr  # with its traceback
    result = answered["result"]
    assert not result.get("isError"), (result, stderr[-3000:])
    assert "demo" in [job["name"] for job in result["structuredContent"]["jobs"]]


# Imported inside functions, but not by a tool's call: the review tools' .deepreview pipeline
# (loaded by the first review call) and 0.14's start-up scan (under --generation 0.14, which
# loads Django before the listing).
NOT_ENGINE = ("reviews.deepreview", "workflows.services.catalog")


def _imported_in_functions(source: Path) -> set[str]:
    found = set()
    for function in ast.walk(ast.parse(source.read_text())):
        if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        for node in ast.walk(function):
            if isinstance(node, ast.ImportFrom) and node.module:
                if not node.module.startswith(("workflows", "reviews")):
                    continue
                for alias in node.names:
                    submodule = f"{node.module}.{alias.name}"
                    found.add(submodule if _is_module(submodule) else node.module)
    return found


def _is_module(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:
        return False


def test_the_start_up_loads_every_module_the_deepwork_tools_import_in_their_bodies():
    folder = Path(settings.BASE_DIR) / "mcp_bridge" / "toolsets" / "deepwork"
    imported = set().union(*(_imported_in_functions(path) for path in folder.glob("*.py")))
    assert "workflows.dialects.deepwork" in imported  # the scan finds what it looks for
    engine = {name for name in imported if not name.startswith(NOT_ENGINE)}
    assert engine <= set(deepwork.ENGINE_MODULES)
    for name in deepwork.ENGINE_MODULES:
        assert _is_module(name), name
