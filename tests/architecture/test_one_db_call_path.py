"""MCP tools reach the database one way, ``mcp_bridge.toolsets.calls.db_tool_call``: the
database thread, the retry while busy and the call log are written once. Only a workflow-tools
source call (local sources on the database thread, remote ones on a worker) and the hosted
server's token lookup (not a tool call) use the retry themselves.

Read from the source: every module of ``mcp_bridge`` that names ``retrying_when_busy``."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
THE_PATH = "mcp_bridge/toolsets/calls.py"
# Not tool calls through the database thread: see the module docstring.
OTHER_USES = ("mcp_bridge/toolsets/workflow_tools/", "mcp_bridge/hosted")


def names_the_retry(source: str) -> bool:
    return any(
        isinstance(node, ast.Name | ast.alias)
        and (node.id if isinstance(node, ast.Name) else node.name) == "retrying_when_busy"
        for node in ast.walk(ast.parse(source))
    )


def test_only_the_one_path_wraps_tool_calls_in_the_retry():
    users = sorted(
        str(path.relative_to(ROOT))
        for path in (ROOT / "mcp_bridge").rglob("*.py")
        if names_the_retry(path.read_text())
    )
    strays = [p for p in users if p != THE_PATH and not p.startswith(OTHER_USES)]
    assert THE_PATH in users
    assert strays == []


def test_a_planted_copy_is_found():
    planted = (
        "from workflows.db import db_sync_to_async, retrying_when_busy\n"
        "async def _db(fn):\n"
        "    return await db_sync_to_async(retrying_when_busy(fn))()\n"
    )
    assert names_the_retry(planted)
    assert not names_the_retry("from workflows.db import db_sync_to_async\n")
