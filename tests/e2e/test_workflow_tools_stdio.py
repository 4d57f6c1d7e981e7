"""``mcpserve --toolsets workflow-tools`` as a real stdio subprocess with a real MCP client: a
job.yml added while it runs reaches a handshake-era client as ``tools/list_changed`` and a
2026-07-28 client on its next listing (its listings carry a short TTL); bad arguments are
refused with the path and rule; a tool call starts the workflow."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from fastmcp.client.messages import MessageHandler

from tests.conftest import NESTED_JOB
from tests.e2e.driver import Driver
from tests.support.factories import write_job

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.e2e]

FAST = {"DEEPWORK_WORKFLOW_TOOLS_POLL_SECONDS": "0.2", "DEEPWORK_WORKFLOW_TOOLS_CACHE_TTL": "1"}
WITHIN = 20.0


class ListChanged(MessageHandler):
    def __init__(self) -> None:
        self.event = asyncio.Event()

    async def on_tool_list_changed(self, message) -> None:
        self.event.set()


def add_job(project: Path, name: str) -> None:
    write_job(
        project, name, NESTED_JOB.replace("name: nested", f"name: {name}"), ["first", "second"]
    )


async def test_handshake_client_is_told_when_a_job_is_added(project_dir: Path):
    listener = ListChanged()
    async with Driver(
        project_dir,
        "--toolsets",
        "deepwork,workflow-tools",
        env_extra=FAST,
        message_handler=listener,
    ) as agent:
        names = await agent.tool_names()
        assert {
            "start_workflow",
            "refresh_workflow_tools",
            "workflow_deepwork_jobs_repair",
        } <= names
        assert "workflow_release_only" not in names
        add_job(project_dir, "release")
        await asyncio.wait_for(listener.event.wait(), WITHIN)
        assert "workflow_release_only" in await agent.tool_names()

        refused = await agent.call_error("workflow_release_only", {"goal": 7})
        assert refused == (
            "Invalid arguments for workflow_release_only: at $.goal: 7 is not of type 'string' "
            "(rule 'type')"
        )
        started = await agent.call("workflow_release_only", {"goal": "Ship 1.0"})
        assert started["begin_step"]["step_id"] == "first"
        assert started["stack"] == [{"workflow": "release/only", "step": "first"}]
        status = await agent.call(
            "get_workflow_status", {"run_id": started["begin_step"]["session_id"]}
        )
        assert status["status"] == "RUNNING"


async def test_new_era_client_sees_a_new_job_on_its_next_listing(project_dir: Path):
    async with Driver(
        project_dir, "--toolsets", "workflow-tools", env_extra=FAST, mode="auto"
    ) as agent:
        first = await agent.client.list_tools_mcp(cache_mode="bypass")
        assert first.ttl_ms == 1000
        assert "workflow_docs_only" not in {tool.name for tool in first.tools}
        add_job(project_dir, "docs")
        deadline = asyncio.get_running_loop().time() + WITHIN
        # The client keeps its listing for the TTL; the next one after that has the job.
        while "workflow_docs_only" not in await agent.tool_names():
            assert asyncio.get_running_loop().time() < deadline, "the new tool never showed"
            await asyncio.sleep(0.2)
