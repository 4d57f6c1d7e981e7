"""Composing toolsets: `create_server(toolsets=...)` and `mcpserve --toolsets`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from fastmcp import Client, FastMCP

from mcp_bridge.server import create_server
from mcp_bridge.state import ServerConfig, ServerState
from mcp_bridge.toolsets import (
    DEEPREVIEW,
    DEEPWORK,
    TOOLSETS,
    Toolset,
    ToolsetsRefused,
    UnknownToolset,
    parse_toolsets,
    plan_mounts,
)

pytestmark = [pytest.mark.django_db(transaction=True)]

REVIEW_TOOLS = ["get_review_instructions", "get_configured_reviews", "mark_review_as_passed"]
WORKFLOW_TOOLS = [
    "get_workflows",
    "start_workflow",
    "finished_step",
    "abort_workflow",
    "go_to_step",
]
# What the default generation ("both") adds: DeepWork 0.14's session-job and schema tools,
# and the two rebinding tools for either generation.
SESSION_JOB_TOOLS = [
    "register_session_job",
    "get_session_job",
    "get_named_schemas",
    "get_active_workflow",
    "validate_step_outputs",
]


async def listed(server: FastMCP) -> tuple[list[str], str | None]:
    async with Client(server, mode="legacy") as client:
        tools = [tool.name for tool in await client.list_tools()]
        return tools, client.initialize_result.instructions


async def test_deepwork_is_the_default_and_carries_the_review_tools(demo_project):
    default_tools, default_instructions = await listed(create_server(demo_project))
    assert default_tools == WORKFLOW_TOOLS + SESSION_JOB_TOOLS + REVIEW_TOOLS
    # Naming deepreview as well serves nothing twice: deepwork already includes it.
    both_tools, both_instructions = await listed(
        create_server(demo_project, toolsets=["deepwork", "deepreview"])
    )
    assert both_tools == default_tools
    assert both_instructions == default_instructions


async def test_deepreview_alone_serves_only_the_review_tools(demo_project):
    tools, instructions = await listed(create_server(demo_project, toolsets=["deepreview"]))
    assert tools == REVIEW_TOOLS
    assert not instructions  # DeepWork's workflow instructions belong to the deepwork toolset


def test_unknown_toolset_names_list_the_valid_ones(demo_project):
    with pytest.raises(UnknownToolset, match=r"Unknown toolset 'nope'; choose from: deepwork"):
        create_server(demo_project, toolsets=["nope"])
    with pytest.raises(
        UnknownToolset,
        match=r"Unknown toolsets 'x', 'y'; choose from: deepwork, deepreview, tracker, "
        r"workflow-tools, agents$",
    ):
        parse_toolsets("deepwork, x,y")
    assert parse_toolsets(" deepreview ,deepwork") == ("deepreview", "deepwork")
    with pytest.raises(UnknownToolset, match="No toolset given"):
        parse_toolsets(" , ")


def test_mcpserve_refuses_an_unknown_toolset_before_serving(demo_project: Path):
    with pytest.raises(CommandError, match=r"--toolsets: Unknown toolset 'bogus'; choose from"):
        call_command("mcpserve", "--path", str(demo_project), "--toolsets", "bogus")


async def test_a_later_toolset_sharing_a_tool_name_is_mounted_under_its_prefix(demo_project):
    # A stand-in for the tracker toolset, which will also have a start_workflow.
    def register(mcp: FastMCP, state: ServerState, prefix: str = "") -> None:
        @mcp.tool(name=f"{prefix}start_workflow")
        async def start_workflow() -> str:
            return "tracker"

        @mcp.tool(name=f"{prefix}log_decision")
        async def log_decision() -> str:
            return "logged"

    tracker = Toolset("tracker", ("start_workflow", "log_decision"), register)
    catalog = {**TOOLSETS, "tracker": (tracker,)}

    mounts = plan_mounts(["deepwork", "tracker"], catalog)
    assert [(m.toolset.name, m.prefix) for m in mounts] == [
        ("deepwork", ""),
        ("deepreview", ""),
        ("tracker", "tracker_"),
    ]
    # Alone, or first, a toolset keeps its own names.
    assert [m.prefix for m in plan_mounts(["tracker", "deepwork"], catalog)] == [
        "",
        "deepwork_",
        "",
    ]

    server = FastMCP("t")
    state = ServerState(ServerConfig(project_root=demo_project))
    for mount in mounts:
        mount.toolset.register(server, state, mount.prefix)
    async with Client(server) as client:
        names = [tool.name for tool in await client.list_tools()]
        answer = await client.call_tool("tracker_start_workflow", {})
    assert names == WORKFLOW_TOOLS + SESSION_JOB_TOOLS + REVIEW_TOOLS + [
        "tracker_start_workflow",
        "tracker_log_decision",
    ]
    assert answer.content[0].text == "tracker"
    assert (DEEPWORK.name, DEEPREVIEW.name) == ("deepwork", "deepreview")


def test_mcpserve_refuses_roles_without_the_agents_toolset(demo_project: Path):
    with pytest.raises(CommandError, match=r"--roles needs --toolsets agents"):
        call_command("mcpserve", "--path", str(demo_project), "--roles", "swe")


@pytest.mark.parametrize("name", list(TOOLSETS))
async def test_only_servers_with_schema_refs_inline_them(demo_project, name):
    """A server whose toolsets' schemas hold no $ref skips FastMCP's $ref-inlining middleware
    on every call: the same answers only as long as those schemas really have none."""
    server = create_server(demo_project, toolsets=[name])
    inlining = "DereferenceRefsMiddleware" in {type(m).__name__ for m in server.middleware}
    if any(toolset.schema_refs for toolset in TOOLSETS[name]):
        assert inlining
        return
    assert not inlining
    async with Client(server, mode="legacy") as client:
        for tool in await client.list_tools():
            schemas = json.dumps([tool.input_schema, tool.output_schema])
            assert "$ref" not in schemas, tool.name
            assert "$defs" not in schemas, tool.name


def test_a_server_keeps_its_tools_by_name_unless_a_toolset_changes_them(demo_project):
    assert create_server(demo_project).tools_fixed
    assert create_server(demo_project, toolsets=["deepwork", "tracker", "agents"]).tools_fixed
    # Published workflows come and go as tools.
    assert not create_server(demo_project, toolsets=["deepwork", "workflow-tools"]).tools_fixed


async def test_workflow_tools_alone_serves_what_finishes_the_workflows_it_starts(demo_project):
    tools, instructions = await listed(create_server(demo_project, toolsets=["workflow-tools"]))
    assert tools[:13] == WORKFLOW_TOOLS + SESSION_JOB_TOOLS + REVIEW_TOOLS
    assert {"get_workflow_status", "cancel_workflow_run", "workflow_demo_quick"} <= set(tools)
    assert instructions is not None
    assert "**Checkpoint**" in instructions
    # Served as if deepwork had been named first: no tool is served twice or renamed.
    alone = [(m.toolset.name, m.prefix) for m in plan_mounts(["workflow-tools"])]
    assert alone == [("deepwork", ""), ("deepreview", ""), ("workflow-tools", "")]
    assert alone == [
        (m.toolset.name, m.prefix) for m in plan_mounts(["deepwork", "workflow-tools"])
    ]

    (demo_project / "notes.md").write_text("notes\n")
    async with Client(create_server(demo_project, toolsets=["workflow-tools"])) as client:
        started = await client.call_tool("workflow_demo_quick", {"goal": "g", "topic": "t"})
        session_id = started.structured_content["begin_step"]["session_id"]
        finished = await client.call_tool(
            "finished_step",
            {
                "outputs": {"notes.md": "notes.md"},
                "session_id": session_id,
                "quality_review_override_reason": "checked by hand",
            },
        )
    assert finished.structured_content["status"] == "workflow_complete"


def test_workflow_tools_with_the_014_generation_is_refused_before_serving(demo_project: Path):
    expected = (
        r"^--toolsets: The workflow-tools toolset cannot be served with --generation 0\.14: .* "
        r"Use --generation both \(the default\) or 0\.9 with --toolsets workflow-tools\.$"
    )
    with pytest.raises(CommandError, match=expected):
        call_command(
            "mcpserve",
            "--path",
            str(demo_project),
            "--toolsets",
            "workflow-tools",
            "--generation",
            "0.14",
        )
    with pytest.raises(ToolsetsRefused):
        create_server(demo_project, toolsets=["deepwork", "workflow-tools"], generation="0.14")
