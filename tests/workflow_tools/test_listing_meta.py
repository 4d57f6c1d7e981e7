"""What a client that defers tools behind a search needs from ``tools/list``: the deepwork
toolset's workflow tools marked always loaded, every workflow tool a search hint; and a
warning, once per change of the list, when it holds more than 30 workflow tools."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from fastmcp import Client

from mcp_bridge.server import create_server
from tests.conftest import NESTED_JOB
from tests.support.factories import write_job
from workflow_tools.sources import PublishedWorkflow

pytestmark = [pytest.mark.django_db(transaction=True)]

ALWAYS_LOAD = "anthropic/alwaysLoad"
SEARCH_HINT = "anthropic/searchHint"
CORE = {"get_workflows", "start_workflow", "finished_step", "abort_workflow", "go_to_step"}
LONG_LIST = "workflow tools are listed, more than 30"


@pytest.fixture(params=["legacy", "auto"])
def mode(request) -> str:
    return request.param


def add_jobs(project: Path, first: int, last: int) -> None:
    """One one-workflow job per number in first..last (``workflow_jobN_only``)."""
    for index in range(first, last + 1):
        name = f"job{index}"
        write_job(
            project, name, NESTED_JOB.replace("name: nested", f"name: {name}"), ["first", "second"]
        )


async def test_core_tools_are_always_loaded_and_workflow_tools_carry_a_search_hint(
    demo_project, mode
):
    server = create_server(demo_project, toolsets=["deepwork", "workflow-tools"])
    async with Client(server, mode=mode) as client:
        tools = {tool.name: tool for tool in await client.list_tools()}
    marked = {name for name, tool in tools.items() if (tool.meta or {}).get(ALWAYS_LOAD)}
    assert marked == CORE
    for name in CORE:
        assert tools[name].meta[ALWAYS_LOAD] is True
    workflow_tools = {name: tool for name, tool in tools.items() if name.startswith("workflow_")}
    assert len(workflow_tools) == 5
    for name, tool in workflow_tools.items():
        assert isinstance(tool.meta[SEARCH_HINT], str), name
    assert tools["workflow_demo_main"].meta == {
        "workflow_id": "demo/main",
        "source": "deepwork",
        SEARCH_HINT: "demo main workflow (deepwork/project): Gather, split in two, wrap up "
        "(job demo: A demo job)",
    }
    assert (
        tools["workflow_deepwork_jobs_repair"]
        .meta[SEARCH_HINT]
        .startswith("deepwork jobs repair workflow (deepwork/standard): Fix project job.yml files")
    )
    # The static tools carry no hint: clients find them by name.
    assert SEARCH_HINT not in (tools["get_workflow_status"].meta or {})


async def test_the_mark_goes_to_the_deepwork_toolset_whatever_its_prefix(demo_project):
    # The tracker listed first keeps the bare names; deepwork's tools get its prefix.
    server = create_server(demo_project, toolsets=["tracker", "deepwork"])
    async with Client(server) as client:
        tools = {tool.name: tool for tool in await client.list_tools()}
    marked = {name for name, tool in tools.items() if (tool.meta or {}).get(ALWAYS_LOAD)}
    assert marked == {f"deepwork_{name}" for name in CORE}
    assert "start_workflow" in tools  # the tracker's, not marked


def test_a_search_hint_is_one_short_line_whatever_the_source_sends():
    from mcp_bridge.toolsets.workflow_tools.tools import search_hint

    workflow = PublishedWorkflow(
        id="Release-Train/ship_it",
        name="ship_it",
        description="\n\n  Ship   the release\tto every   region.\nSecond line is left out.\n",
        category="ops",
    )
    assert search_hint(workflow) == (
        "release train ship it workflow (ops): Ship the release to every region."
    )
    wordy = PublishedWorkflow(id="w", name="w", description="word " * 100)
    hint = search_hint(wordy)
    assert len(hint) <= 200
    assert hint.endswith("word")
    assert "\n" not in hint


def test_more_than_30_workflow_tools_are_warned_about_once_per_change(project_dir, caplog):
    # With the standard jobs' two workflows: 30 tools, then 31, then 32.
    add_jobs(project_dir, 1, 28)
    provider = create_server(project_dir, toolsets=["workflow-tools"]).workflow_tools
    with caplog.at_level(logging.WARNING, logger="deepwork.workflow_tools"):
        assert len(provider._build().tools) == 30
        assert LONG_LIST not in caplog.text

        add_jobs(project_dir, 29, 29)
        assert len(provider._build().tools) == 31
        provider._build()
        provider._build()
        warnings = [r.getMessage() for r in caplog.records if LONG_LIST in r.getMessage()]
        assert len(warnings) == 1
        assert warnings[0].startswith("31 workflow tools are listed, more than 30: ")
        assert "DEEPWORK_WORKFLOW_TOOLS_INCLUDE/DEEPWORK_WORKFLOW_TOOLS_EXCLUDE" in warnings[0]
        assert ".deepwork/workflow_tools.yml" in warnings[0]
        assert warnings[0].endswith(
            "or serve the deepwork toolset alone: its get_workflows and start_workflow reach "
            "every workflow with two tools."
        )

        add_jobs(project_dir, 30, 30)
        provider._build()
        provider._build()
        warnings = [r.getMessage() for r in caplog.records if LONG_LIST in r.getMessage()]
        assert [w.split(" ", 1)[0] for w in warnings] == ["31", "32"]
