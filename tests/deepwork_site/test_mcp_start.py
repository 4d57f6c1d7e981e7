"""How an MCP server process starts: pydantic models are built when first used, not when the
MCP SDK defines them (most are for messages a server never receives)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

PROBE = """
import json, sys
from deepwork_site import cli
{start}
import mcp_types
from mcp_types import Tool
before = Tool.__pydantic_complete__
tool = Tool.model_validate({{"name": "t", "inputSchema": {{"type": "object"}}}})
json.dump({{"complete_before_use": before, "complete_after_use": Tool.__pydantic_complete__,
           "name": tool.name}}, sys.stdout)
"""


def probe(start: str) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", PROBE.format(start=start)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout)


def test_an_mcp_server_builds_the_sdk_models_on_first_use():
    seen = probe("cli._start_mcp()")

    assert seen == {"complete_before_use": False, "complete_after_use": True, "name": "t"}


def test_other_commands_build_models_as_they_are_defined():
    assert probe("")["complete_before_use"] is True
