"""``manage.py mcpserve`` as a real stdio subprocess, driven by a real MCP client.

The child process uses the test database (a file for SQLite, the test database on PostgreSQL),
so these tests commit their data (``transaction=True``).
"""

from __future__ import annotations

import os
import signal
from contextlib import suppress

import pytest
from fastmcp import Client

from tests.e2e.driver import Driver, call, call_error, mcpserve
from tests.support.processes import child_database_url
from workflows.models import Agent, WorkflowSession

__all__ = ["call", "call_error", "child_database_url", "mcpserve"]  # used by other suites

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.e2e]


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_workflow_with_nesting_abort_concurrency_and_a_killed_server(demo_project, mode):
    first_server = Client(mcpserve(demo_project), mode=mode)
    async with first_server as client:
        tools = {tool.name for tool in await client.list_tools()}
        assert tools == {
            "get_workflows",
            "start_workflow",
            "finished_step",
            "abort_workflow",
            "go_to_step",
            # The default generation ("both") adds DeepWork 0.14's session-job tools and
            # the rebinding tools.
            "register_session_job",
            "get_session_job",
            "get_named_schemas",
            "get_active_workflow",
            "validate_step_outputs",
            "get_review_instructions",
            "get_configured_reviews",
            "mark_review_as_passed",
        }
        listed = await call(client, "get_workflows")
        assert [job["name"] for job in listed["jobs"]][:2] == ["demo", "nested"]

        started = await call(
            client, "start_workflow", {"goal": "e2e", "job_name": "demo", "workflow_name": "main"}
        )
        outer_id = started["begin_step"]["session_id"]
        step = await call(client, "finished_step", {"outputs": {"notes.md": "notes.md"}})
        assert step["begin_step"]["step_id"] == "part_a"
        assert [o["name"] for o in step["begin_step"]["step_expected_outputs"]] == ["a.md", "b.md"]
        error = await call_error(client, "finished_step", {"outputs": {"a.md": "a.md"}})
        assert error == (
            "Error calling tool 'finished_step': Missing required outputs: b.md. "
            "All required outputs must be provided."
        )
        step = await call(client, "finished_step", {"outputs": {"a.md": "a.md", "b.md": "b.md"}})
        assert step["begin_step"]["step_id"] == "wrap_up"

        # A nested workflow, aborted: the outer one resumes where it was.
        await call(
            client,
            "start_workflow",
            {"goal": "side", "job_name": "nested", "workflow_name": "only"},
        )
        aborted = await call(client, "abort_workflow", {"explanation": "wrong turn"})
        assert aborted["resumed_workflow"] == "demo/main"
        assert aborted["resumed_step"] == "wrap_up"

        # Nest again and get half way, then the server dies without any chance to clean up.
        nested = await call(
            client,
            "start_workflow",
            {"goal": "side", "job_name": "nested", "workflow_name": "only"},
        )
        step = await call(client, "finished_step", {"outputs": {"first.md": "first.md"}})
        assert step["stack"] == [
            {"workflow": "demo/main", "step": "wrap_up"},
            {"workflow": "nested/only", "step": "second"},
        ]
        session = await WorkflowSession.objects.select_related("agent").aget(
            session_id=nested["begin_step"]["session_id"]
        )
        os.kill(session.agent.pid, signal.SIGKILL)
    # The client notices the dead server on exit; the stack is safe in the database.
    with suppress(Exception):
        await first_server.close()

    async with Driver(demo_project, mode=mode) as agent:
        # A second server running at the same time has a stack of its own.
        async with Driver(demo_project, mode=mode) as other:
            error = await other.call_error("finished_step", {"outputs": {}})
            assert error.endswith(
                "No active workflow session. Use start_workflow to begin a workflow."
            )

        # The restarted server adopted the killed one's stack and carries on.
        step = await agent.call("finished_step", {"outputs": {}})
        assert step["status"] == "workflow_complete"
        assert step["stack"] == [{"workflow": "demo/main", "step": "wrap_up"}]
        done = await agent.call(
            "finished_step",
            {
                "outputs": {"summary.md": "summary.md"},
                "quality_review_override_reason": "Reviewed by hand in this test",
                "session_id": outer_id,
            },
        )
    assert done["status"] == "workflow_complete"
    assert done["all_outputs"] == {
        "notes.md": "notes.md",
        "a.md": "a.md",
        "b.md": "b.md",
        "summary.md": "summary.md",
    }
    statuses = [
        s async for s in WorkflowSession.objects.order_by("id").values_list("status", flat=True)
    ]
    assert statuses == ["completed", "aborted", "completed"]
    assert await Agent.objects.filter(sessions__isnull=False).distinct().acount() == 1


async def test_stdout_carries_only_the_protocol_and_bad_paths_fail_cleanly(demo_project, tmp_path):
    async with Driver(demo_project) as agent:
        # Any stray print on stdout would corrupt the stream and break this round trip.
        for _ in range(3):
            await agent.call("get_workflows")
    with pytest.raises(Exception):  # noqa: B017 - the server refuses to start at all
        async with Driver(tmp_path / "missing", init_timeout=30) as agent:
            await agent.tool_names()
