"""``mcpserve``'s stdio transport: on pipes the event loop reads and writes them itself.

Every MCP client starts its server with pipes, so the e2e suite runs the loop-driven transport
all the time; these tests pin what it must keep doing that the SDK's transport did: lines of any
length, every answer on the wire before the server exits, and the standard descriptors kept
away from the protocol.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import pytest

from mcp_bridge.runner import is_pipe as _is_pipe
from tests.e2e.driver import Driver
from tests.support.processes import MANAGE, child_env_on_test_db, handshake
from workflows.models import WorkflowSession

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.e2e]


def test_only_pipes_and_sockets_are_served_by_the_event_loop(tmp_path):
    read_end, write_end = os.pipe()
    left, right = socket.socketpair()
    with (tmp_path / "requests.jsonl").open("w") as regular:
        try:
            assert _is_pipe(read_end)
            assert _is_pipe(write_end)
            assert _is_pipe(left.fileno())
            assert not _is_pipe(regular.fileno())
        finally:
            os.close(read_end)
            os.close(write_end)
            left.close()
            right.close()


async def test_a_message_far_longer_than_a_pipe_buffer_goes_through(demo_project):
    goal = "g" * 300_000  # several times the pipe buffer and asyncio's default line limit
    async with Driver(demo_project) as agent:
        started = await agent.call(
            "start_workflow", {"goal": goal, "job_name": "demo", "workflow_name": "main"}
        )
        listed = await agent.call("get_workflows")
    session = await WorkflowSession.objects.aget(session_id=started["begin_step"]["session_id"])
    assert session.goal == goal
    assert [job["name"] for job in listed["jobs"]][:2] == ["demo", "nested"]


def test_stdin_closing_ends_the_server_after_its_answers_are_out(demo_project):
    env = child_env_on_test_db()
    messages = handshake("test")
    server = subprocess.Popen(
        [sys.executable, MANAGE, "mcpserve", "--path", str(demo_project)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    try:
        for message in messages:
            server.stdin.write(json.dumps(message).encode() + b"\n")
        server.stdin.flush()
        answers = [json.loads(server.stdout.readline()) for _ in range(2)]
        server.stdin.close()
        assert server.wait(timeout=60) == 0, server.stderr.read().decode()
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
    assert [answer["id"] for answer in answers] == [1, 2]
    assert "get_workflows" in {tool["name"] for tool in answers[1]["result"]["tools"]}
    # Nothing but protocol lines ever reached stdout.
    assert server.stdout.read() == b""
