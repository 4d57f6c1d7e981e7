"""``mcpserve`` serves agents without loading the web stack.

Checked on a real process with ``python -X importtime``, which lists every module it imports,
through the first tools/list and a tool call, for both ways in: ``manage.py mcpserve`` in a
clone and the ``deepwork-server mcp`` command (here its module, ``python -m deepwork_server``).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest
from django.conf import settings

from tests.support.processes import MANAGE, child_env_on_test_db, handshake

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.e2e]

WEB_STACK = ("ninja", "daphne", "dashboard", "api", "django.contrib.admin", "channels")
# Libraries FastMCP would load on the way to the first answer that mcpserve does without.
NOT_NEEDED = ("griffe", "key_value", "beartype")
# The toolsets the default server does not serve, and what only they use.
NOT_SERVED = (
    "mcp_bridge.toolsets.tracker",
    "mcp_bridge.toolsets.agents",
    "mcp_bridge.toolsets.workflow_tools",
    "dag.selectors",
    "dag.services",
    # Every server registers the workflow tools' reaction to DAG events; it needs none of this.
    "workflow_tools.services",
    "workflow_tools.sources",
    "workflow_tools.outbound",
    "tracker.selectors",
    "tracker.services",
)


@pytest.mark.parametrize(
    "command",
    [[MANAGE, "mcpserve"], ["-m", "deepwork_server", "mcp"]],
    ids=["manage.py", "deepwork-server"],
)
def test_mcpserve_imports_no_web_stack(demo_project, tmp_path, command):
    messages = [
        *handshake("lean"),
        {
            "jsonrpc": "2.0",
            "id": 3,
            "method": "tools/call",
            "params": {"name": "get_workflows", "arguments": {}},
        },
    ]
    log = (tmp_path / "stderr").open("wb")  # a file: the import list outgrows a pipe's buffer
    server = subprocess.Popen(
        [sys.executable, "-X", "importtime", *command, "--path", str(demo_project)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=log,
        env=child_env_on_test_db(),
        cwd=settings.BASE_DIR,  # where `-m` finds this checkout's code
    )
    try:
        server.stdin.write("".join(json.dumps(m) + "\n" for m in messages).encode())
        server.stdin.flush()
        answers = [json.loads(server.stdout.readline()) for _ in range(3)]
        server.stdin.close()
        code = server.wait(timeout=60)
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
        log.close()
    stderr = (tmp_path / "stderr").read_text()
    assert code == 0, stderr[-3000:]
    assert sorted(a["id"] for a in answers) == [1, 2, 3]
    assert not next(a for a in answers if a["id"] == 3)["result"].get("isError")
    imported = set(re.findall(r"^import time:.*\|\s*(\S+)$", stderr, re.M))
    # The list is real: it holds what mcpserve does use.
    assert "fastmcp" in imported
    assert "workflows.services.sessions" in imported
    for root in WEB_STACK + NOT_NEEDED + NOT_SERVED:
        loaded = sorted(m for m in imported if m == root or m.startswith(root + "."))
        assert not loaded, f"mcpserve imported {loaded}"
