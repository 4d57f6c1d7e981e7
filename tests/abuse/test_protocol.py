"""Hostile MCP input over a real stdio ``mcpserve``, and a busy database under a tool call.

Issue 9 point 13: a lone surrogate escape (``"\\ud800"``) in any argument made the SDK's transport
drop the line, and the client waited forever. Every request whose id can be read is answered;
whatever names no request is logged as a warning.

Issue 9 point 5 (the agent's side): a tool call that meets a locked database answers in plain
words that the database is busy, never with the raw lock error.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from typing import Any

import pytest
from django.db import connection

from tests.e2e.driver import Driver
from tests.support.processes import (
    INITIALIZED,
    MANAGE,
    child_database_url,
    child_env_on_test_db,
    initialize_request,
)
from workflows.models import WorkflowSession

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.e2e]

INITIALIZE = initialize_request("abuse")
LONE = "\\ud800"  # the six characters of the JSON escape, as a client would send them


def exchange(project, lines: list[str], answers: int) -> tuple[list[dict[str, Any]], str]:
    """Send raw lines to a fresh mcpserve; read ``answers`` answers, then close its stdin."""
    server = subprocess.Popen(
        [sys.executable, MANAGE, "mcpserve", "--path", str(project)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=child_env_on_test_db(),
    )
    try:
        server.stdin.write("".join(line + "\n" for line in lines).encode())
        server.stdin.flush()
        received = [json.loads(server.stdout.readline()) for _ in range(answers)]
        server.stdin.close()
        assert server.wait(timeout=60) == 0
        stderr = server.stderr.read().decode()
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
    return received, stderr


def call(request_id: Any, arguments_json: str, tool: str = "start_workflow") -> str:
    return (
        f'{{"jsonrpc":"2.0","id":{json.dumps(request_id)},"method":"tools/call",'
        f'"params":{{"name":"{tool}","arguments":{arguments_json}}}}}'
    )


def test_every_request_with_a_lone_surrogate_is_answered_and_the_rest_logged(demo_project):
    lines = [
        json.dumps(INITIALIZE),
        json.dumps(INITIALIZED),
        call(2, f'{{"goal":"{LONE}","job_name":"demo","workflow_name":"main"}}'),
        call("three", f'{{"goal":"g","job_name":"demo{LONE}x","workflow_name":"main"}}'),
        call(4, '{"outputs":{"' + LONE + '":"a.md"}}', tool="finished_step"),
        call(5, "{}", tool=f"get_work{LONE}flows"),
        # A notification names no request: nothing to answer, but not silent either.
        f'{{"jsonrpc":"2.0","method":"notifications/progress","params":{{"x":"{LONE}"}}}}',
        "this is not json at all",
        # Valid JSON with an id, but not a valid request: answered too.
        '{"jsonrpc":"2.0","id":6,"method":"tools/list","params":"not an object"}',
        json.dumps({"jsonrpc": "2.0", "id": 7, "method": "tools/list"}),
    ]
    answers, stderr = exchange(demo_project, lines, answers=7)

    by_id = {answer["id"]: answer for answer in answers}
    assert set(by_id) == {1, 2, "three", 4, 5, 6, 7}  # nothing lost
    for request_id in (2, "three", 4, 5):
        error = by_id[request_id]["error"]
        assert error["code"] == -32600
        assert "lone UTF-16 surrogate" in error["message"]
    assert by_id[6]["error"]["code"] == -32600
    assert by_id[6]["error"]["message"] == "Invalid request: params: Input should be an object"
    assert "get_workflows" in {tool["name"] for tool in by_id[7]["result"]["tools"]}
    # No request that could not be read started anything.
    assert not WorkflowSession.objects.exists()
    warnings = [line for line in stderr.splitlines() if " WARNING " in line]
    assert sum("Refused request" in line for line in warnings) == 5
    assert sum("Ignored an undecodable message" in line for line in warnings) == 2
    assert any("notifications/progress" in line for line in warnings)
    assert any("this is not json at all" in line for line in warnings)


def test_a_surrogate_pair_is_text_and_goes_through(demo_project):
    lines = [
        json.dumps(INITIALIZE),
        json.dumps(INITIALIZED),
        call(2, '{"goal":"\\ud83d\\ude00 launch","job_name":"demo","workflow_name":"main"}'),
    ]
    answers, _ = exchange(demo_project, lines, answers=2)
    assert "error" not in answers[1]
    assert not answers[1]["result"].get("isError")
    assert WorkflowSession.objects.get().goal == "\U0001f600 launch"


class WriteLock:
    """Another connection holding the write lock a session start needs, as a long writer would:
    SQLite's database lock (BEGIN IMMEDIATE), PostgreSQL's lock on the sessions table."""

    def __enter__(self) -> WriteLock:
        settings = connection.settings_dict
        if connection.vendor == "sqlite":
            self.db = sqlite3.connect(settings["NAME"], isolation_level=None, timeout=0)
            self.db.execute("BEGIN IMMEDIATE")
        else:
            import psycopg

            self.db = psycopg.connect(child_database_url())
            self.db.execute("LOCK TABLE workflows_workflowsession IN ACCESS EXCLUSIVE MODE")
        return self

    def __exit__(self, *exc_info: object) -> None:
        if connection.vendor == "sqlite":
            self.db.execute("ROLLBACK")
        else:
            self.db.rollback()
        self.db.close()


SHORT_WAITS = {"DEEPWORK_SQLITE_BUSY_TIMEOUT": "0.2", "DEEPWORK_PG_LOCK_TIMEOUT": "200ms"}


async def test_a_locked_database_answers_busy_in_plain_words_and_changes_nothing(demo_project):
    async with Driver(demo_project, env_extra=SHORT_WAITS) as agent:
        await agent.call("get_workflows")
        with WriteLock():
            error = await agent.call_error(
                "start_workflow", {"goal": "g", "job_name": "demo", "workflow_name": "main"}
            )
        assert error == (
            "Error calling tool 'start_workflow': The database is busy with other work right "
            "now and this call changed nothing. Try the same call again in a few seconds."
        )
        assert await WorkflowSession.objects.acount() == 0
        # Once the lock is gone, the same call works.
        started = await agent.call(
            "start_workflow", {"goal": "g", "job_name": "demo", "workflow_name": "main"}
        )
    assert started["begin_step"]["step_id"] == "gather"
    assert await WorkflowSession.objects.acount() == 1
