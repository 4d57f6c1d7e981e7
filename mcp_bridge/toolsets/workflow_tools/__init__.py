"""The ``workflow-tools`` toolset, imported only by a server that serves it: one MCP tool per
published workflow (``provider``, ``tools``, ``listing``, ``runs``), beside three static tools
(``refresh_workflow_tools``, ``get_workflow_status``, ``cancel_workflow_run``) registered here.
What composing toolsets needs without this machinery (names, instructions) is in ``specs``."""

from __future__ import annotations

from contextlib import suppress
from typing import Annotated, Any

from fastmcp import Context, FastMCP
from mcp.types import ToolListChangedNotification
from pydantic import Field

from mcp_bridge.runner import LOOSE_OBJECT, tool
from mcp_bridge.state import ServerState
from mcp_bridge.toolsets import hints
from mcp_bridge.toolsets.workflow_tools.listing import ListingMiddleware
from mcp_bridge.toolsets.workflow_tools.provider import WorkflowToolsProvider
from mcp_bridge.toolsets.workflow_tools.runs import status_call
from mcp_bridge.toolsets.workflow_tools.settings import (
    Settings,
    remote_sources_from_env,
)
from workflow_tools.dag_source import DagSource
from workflow_tools.deepwork_source import DeepWorkSource
from workflow_tools.sources import RemoteSource, WorkflowSource


def reserved_names() -> frozenset[str]:
    """Every static tool name any toolset may serve, bare or prefixed, so that a workflow's
    name chosen today never collides with a toolset served tomorrow."""
    from mcp_bridge.toolsets import TOOLSETS

    names: set[str] = set()
    for toolsets in TOOLSETS.values():
        for toolset in toolsets:
            names.update(toolset.tool_names)
            names.update(f"{toolset.name}_{name}" for name in toolset.tool_names)
    return frozenset(names)


def register(mcp: FastMCP, state: ServerState, prefix: str = "") -> None:
    """Put the workflow tools' provider and the three static tools on ``mcp``."""
    settings = Settings.from_env()
    sources: list[WorkflowSource] = [
        DeepWorkSource(
            project=state.project, view=lambda: state.catalog().view(), agent=state.agent
        )
    ]
    configs = list(getattr(state.config, "workflow_sources", ())) or remote_sources_from_env()
    for config in configs:
        sources.append(
            RemoteSource(config.url, config.token, poll_seconds=settings.source_poll_seconds)
        )
    sources.append(
        DagSource(project=state.project, agent=state.agent, acting=state.acting_agent_id)
    )
    provider = WorkflowToolsProvider(state, sources, reserved=reserved_names(), settings=settings)
    mcp.add_provider(provider)
    # Innermost of the SDK server's middleware: FastMCP's own (request context, its
    # middleware chain) has run when tools/list reaches it.
    mcp._mcp_server.middleware.append(ListingMiddleware(provider, settings.page_size))
    mcp.workflow_tools = provider  # type: ignore[attr-defined]  # for tests

    # Only a remote source is reached beyond this server; a run is cancelled by its id, so a
    # second cancel finds nothing more to stop.
    remote = bool(configs)

    @tool(
        mcp,
        name=f"{prefix}refresh_workflow_tools",
        annotations=hints.reads("Refresh the workflow tools", open_world=remote),
        output_schema=LOOSE_OBJECT,
    )
    async def refresh_workflow_tools(ctx: Context = None) -> dict[str, Any]:  # type: ignore[assignment]
        """Re-read every workflow source now (the project's jobs, and any remote source) and
        answer which workflow tools were added, updated, removed or are unchanged since you
        last listed the tools, and in `unavailable` why any source could not be read (its
        last good list stays served). List the tools again to see the new ones."""
        changes = await provider.refresh()
        if changes["added"] or changes["updated"] or changes["removed"]:
            with suppress(Exception):
                await ctx.send_notification(ToolListChangedNotification())
        return changes

    @tool(
        mcp,
        name=f"{prefix}get_workflow_status",
        annotations=hints.reads("Show a workflow run", open_world=remote),
        output_schema=LOOSE_OBJECT,
    )
    async def get_workflow_status(
        run_id: Annotated[
            str,
            Field(
                description="The run id a workflow tool answered (for a DeepWork workflow: "
                "begin_step.session_id; for a multi-agent one: dag:<workflow_id>).",
                min_length=1,
                max_length=600,
            ),
        ],
    ) -> dict[str, Any]:
        """The state of a workflow run: `status` RUNNING, COMPLETED, FAILED or CANCELLED,
        `progress`, `result` when done, `error` when it failed or was cancelled."""
        source, local_id = provider.source_for(run_id)
        status = await status_call(source, lambda: source.status(run_id=local_id), run_id)
        return {**status.wire(), "run_id": run_id}

    @tool(
        mcp,
        name=f"{prefix}cancel_workflow_run",
        annotations=hints.writes(
            "Cancel a workflow run", destructive=True, idempotent=True, open_world=remote
        ),
        output_schema=LOOSE_OBJECT,
    )
    async def cancel_workflow_run(
        run_id: Annotated[
            str,
            Field(description="The run id to cancel.", min_length=1, max_length=600),
        ],
        reason: Annotated[
            str, Field(description="Why the run is cancelled.", min_length=1, max_length=10000)
        ],
    ) -> dict[str, Any]:
        """Cancel a running workflow run (a DeepWork session is aborted with your reason; the
        workflow below it on your stack resumes; a multi-agent DAG run fails with your reason,
        for good). Answers the run's status afterwards."""
        source, local_id = provider.source_for(run_id)
        status = await status_call(
            source, lambda: source.cancel(run_id=local_id, reason=reason), run_id
        )
        return {**status.wire(), "run_id": run_id}
