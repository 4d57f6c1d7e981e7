"""``mcpserve --toolsets workflow-tools`` over stdio: ``tools/list`` pages when
``DEEPWORK_TOOLS_PAGE_SIZE`` asks for it (and a cursor from an older list is refused), its
workflow tools' entries are lean, and include/exclude globs come from the environment and from
``.deepwork/workflow_tools.yml``, whose edits apply on the next listing with no restart."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest
from fastmcp.client.messages import MessageHandler
from fastmcp.client.transports import StdioTransport
from mcp.shared.exceptions import MCPError

from mcp_bridge.toolsets import DEEPREVIEW, DEEPWORK
from tests.conftest import NESTED_JOB
from tests.e2e.driver import Driver
from tests.support.factories import write_job
from tests.support.processes import INITIALIZED, MANAGE, child_env_on_test_db, initialize_request

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.e2e]

FAST = {"DEEPWORK_WORKFLOW_TOOLS_POLL_SECONDS": "0.2"}
STATIC = {"refresh_workflow_tools", "get_workflow_status", "cancel_workflow_run"}
# The deepwork toolset's tools, which workflow-tools brings along (listed first): 13.
CARRY_ON = {*DEEPWORK.tool_names, *DEEPREVIEW.tool_names}
WORKFLOW_TOOLS = {
    "workflow_demo_main",
    "workflow_demo_quick",
    "workflow_nested_only",
    "workflow_deepwork_jobs_new_job",
    "workflow_deepwork_jobs_repair",
}
INVALID_PARAMS = -32602


def add_job(project: Path, name: str) -> None:
    write_job(
        project, name, NESTED_JOB.replace("name: nested", f"name: {name}"), ["first", "second"]
    )


class ListChanged(MessageHandler):
    def __init__(self) -> None:
        self.event = asyncio.Event()

    async def on_tool_list_changed(self, message) -> None:
        self.event.set()


async def test_pages_follow_the_cursor_and_an_old_cursor_is_refused(demo_project: Path):
    async with Driver(
        demo_project,
        "--toolsets",
        "workflow-tools",
        env_extra={**FAST, "DEEPWORK_TOOLS_PAGE_SIZE": "3"},
    ) as agent:
        first = await agent.client.list_tools_mcp()
        # The deepwork tools come first, so a client that reads one page can still find, start
        # and finish a workflow.
        assert [tool.name for tool in first.tools] == [
            "get_workflows",
            "start_workflow",
            "finished_step",
        ]
        assert first.next_cursor
        pages, cursor = [first], first.next_cursor
        while cursor:
            page = await agent.client.list_tools_mcp(cursor=cursor)
            pages.append(page)
            cursor = page.next_cursor
        assert [len(page.tools) for page in pages] == [3] * 7
        walked = [tool.name for page in pages for tool in page.tools]
        assert len(walked) == len(set(walked))
        assert set(walked) == CARRY_ON | STATIC | WORKFLOW_TOOLS
        assert {tool.name for tool in await agent.client.list_tools()} == set(walked)

        with pytest.raises(MCPError) as bad:
            await agent.client.list_tools_mcp(cursor="not-a-cursor")
        assert bad.value.code == INVALID_PARAMS
        assert "Invalid cursor 'not-a-cursor'" in bad.value.error.message

        add_job(demo_project, "fresh")
        # Past the watcher's interval (0.2 s here) a cursor is checked against the list as it
        # is now, no longer against the one its walk began with.
        await asyncio.sleep(0.5)
        with pytest.raises(MCPError) as stale:
            await agent.client.list_tools_mcp(cursor=first.next_cursor)
        assert stale.value.code == INVALID_PARAMS
        assert "tool list has changed since this cursor was given" in stale.value.error.message
        names = {tool.name for tool in await agent.client.list_tools()}
        assert names == CARRY_ON | STATIC | WORKFLOW_TOOLS | {"workflow_fresh_only"}


async def test_a_walk_within_the_watchers_interval_is_one_list(demo_project: Path):
    async with Driver(
        demo_project,
        "--toolsets",
        "workflow-tools",
        env_extra={"DEEPWORK_WORKFLOW_TOOLS_POLL_SECONDS": "600", "DEEPWORK_TOOLS_PAGE_SIZE": "3"},
    ) as agent:
        first = await agent.client.list_tools_mcp()
        add_job(demo_project, "fresh")
        pages, cursor = [first], first.next_cursor
        while cursor:
            page = await agent.client.list_tools_mcp(cursor=cursor)
            pages.append(page)
            cursor = page.next_cursor
        # The pages after the first come from the list the first was cut from...
        assert {tool.name for page in pages for tool in page.tools} == (
            CARRY_ON | STATIC | WORKFLOW_TOOLS
        )
        # ...and a new walk lists the job added meanwhile.
        assert "workflow_fresh_only" in await agent.tool_names()


async def test_unpaged_listing_has_every_tool_with_lean_entries(demo_project: Path):
    async with Driver(demo_project, "--toolsets", "workflow-tools", env_extra=FAST) as agent:
        listing = await agent.client.list_tools_mcp(cursor="ignored without paging")
    assert listing.next_cursor is None
    tools = {tool.name: tool for tool in listing.tools}
    assert set(tools) == CARRY_ON | STATIC | WORKFLOW_TOOLS
    main = tools["workflow_demo_main"]
    assert main.title == "demo_main"
    assert main.meta == {
        "workflow_id": "demo/main",
        "source": "deepwork",
        "anthropic/searchHint": "demo main workflow (deepwork/project): Gather, split in two, "
        "wrap up (job demo: A demo job)",
    }
    assert main.output_schema is None
    assert main.input_schema["required"] == ["goal", "topic"]
    assert "(Workflow ID: demo/main; category: deepwork/project; version: 1.0.0; " in (
        main.description or ""
    )
    # The static tools are FastMCP's own entries, untouched.
    assert tools["get_workflow_status"].output_schema == {
        "additionalProperties": True,
        "type": "object",
    }


async def test_filters_from_the_environment_and_the_settings_file(demo_project: Path):
    settings = demo_project / ".deepwork" / "workflow_tools.yml"
    listener = ListChanged()
    async with Driver(
        demo_project,
        "--toolsets",
        "workflow-tools",
        env_extra={
            **FAST,
            "DEEPWORK_WORKFLOW_TOOLS_INCLUDE": "demo*, category:deepwork/standard",
            "DEEPWORK_WORKFLOW_TOOLS_EXCLUDE": "*QUICK",
        },
        message_handler=listener,
    ) as agent:

        async def workflow_tools() -> set[str]:
            return {name for name in await agent.tool_names() if name.startswith("workflow_")}

        assert await workflow_tools() == {
            "workflow_demo_main",
            "workflow_deepwork_jobs_new_job",
            "workflow_deepwork_jobs_repair",
        }
        # The file adds its rules to the environment's, on the next listing.
        settings.write_text('exclude: ["category:deepwork/standard"]\n')
        assert await workflow_tools() == {"workflow_demo_main"}
        # The running watcher saw it too, and told this handshake-era client.
        await asyncio.wait_for(listener.event.wait(), 20)

        # A broken file changes nothing: its last good rules keep applying.
        settings.write_text("include: 7\n")
        assert await workflow_tools() == {"workflow_demo_main"}
        settings.write_text("exclude: [\n")
        assert await workflow_tools() == {"workflow_demo_main"}

        settings.write_text('include: "nested*"\nexclude: "*main"\n')
        assert await workflow_tools() == {
            "workflow_nested_only",
            "workflow_deepwork_jobs_new_job",
            "workflow_deepwork_jobs_repair",
        }
        settings.unlink()
        assert await workflow_tools() == {
            "workflow_demo_main",
            "workflow_deepwork_jobs_new_job",
            "workflow_deepwork_jobs_repair",
        }


def list_pages(project: Path, page_size: str | None, era: str) -> list[dict]:
    """Every ``tools/list`` answer of one walk, as the wire carries it (a raw line each), from
    a real ``mcpserve`` with ``page_size``, for a client on ``era``."""
    extra = {} if page_size is None else {"DEEPWORK_TOOLS_PAGE_SIZE": page_size}
    server = subprocess.Popen(
        [
            sys.executable,
            MANAGE,
            "mcpserve",
            "--path",
            str(project),
            "--toolsets",
            "workflow-tools",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=child_env_on_test_db(**extra),
        cwd=str(project),
    )

    def send(message: dict) -> None:
        server.stdin.write(json.dumps(message).encode() + b"\n")
        server.stdin.flush()

    # A 2026-07-28 client names its version on every request; a handshake one initializes.
    meta = {
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientInfo": {"name": "pages", "version": "1"},
            "io.modelcontextprotocol/clientCapabilities": {},
        }
    }
    try:
        if era == "handshake":
            send(initialize_request("pages"))
            server.stdout.readline()
            send(INITIALIZED)
            meta = {}
        pages: list[dict] = []
        cursor = None
        for request_id in range(2, 20):
            params = {**meta, **({} if cursor is None else {"cursor": cursor})}
            send({"jsonrpc": "2.0", "id": request_id, "method": "tools/list", "params": params})
            answer = json.loads(server.stdout.readline())
            assert answer["id"] == request_id, answer
            pages.append(answer["result"])
            cursor = answer["result"].get("nextCursor")
            if "nextCursor" not in answer["result"]:
                return pages
        raise AssertionError("the walk did not end")
    finally:
        server.stdin.close()
        server.wait(timeout=60)


@pytest.mark.parametrize("era", ["handshake", "2026-07-28"])
async def test_next_cursor_is_left_out_on_the_last_page_and_never_empty(demo_project, era):
    # Twenty-one tools: pages of 4 (five, then 1), of 3 (the last page exactly full), of 21
    # (one page), and no paging at all.
    for page_size, sizes in (("4", [4] * 5 + [1]), ("3", [3] * 7), ("21", [21]), (None, [21])):
        pages = await asyncio.to_thread(list_pages, demo_project, page_size, era)
        assert [len(page["tools"]) for page in pages] == sizes, page_size
        for page in pages[:-1]:
            assert isinstance(page["nextCursor"], str), page_size
            assert page["nextCursor"], page_size
        assert "nextCursor" not in pages[-1], page_size
        names = [tool["name"] for page in pages for tool in page["tools"]]
        assert set(names) == CARRY_ON | STATIC | WORKFLOW_TOOLS


async def test_a_long_list_is_logged_on_stderr_once_per_change(demo_project, tmp_path):
    # demo's two workflows, nested's one and the standard jobs' two, then 27 jobs more: 32.
    for index in range(27):
        add_job(demo_project, f"job{index}")
    stderr = tmp_path / "mcpserve.stderr"
    transport = StdioTransport(
        command=sys.executable,
        args=[MANAGE, "mcpserve", "--path", str(demo_project), "--toolsets", "workflow-tools"],
        env=child_env_on_test_db(**FAST),
        cwd=str(demo_project),
        log_file=stderr,
    )
    async with Driver(demo_project, transport=transport) as agent:
        for _ in range(3):
            assert len(await agent.tool_names()) == 13 + 3 + 32
        # The watcher looks every 0.2 s here; a list that stays the same is not told again.
        await asyncio.sleep(1)
        add_job(demo_project, "one_more")
        assert len(await agent.tool_names()) == 13 + 3 + 33
        await asyncio.sleep(1)
    lines = [
        line for line in stderr.read_text().splitlines() if "workflow tools are listed" in line
    ]
    assert len(lines) == 2, lines
    assert (
        "WARNING deepwork.workflow_tools: 32 workflow tools are listed, more than 30: " in lines[0]
    )
    assert "33 workflow tools are listed" in lines[1]
    assert lines[0].endswith(
        "or serve the deepwork toolset alone: its get_workflows and start_workflow reach every "
        "workflow with two tools."
    )
