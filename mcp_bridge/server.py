"""``create_server``: one FastMCP server for one project, composed of the asked-for toolsets."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from fastmcp import FastMCP

from deepwork_site.process import server_version
from mcp_bridge.runner import Server
from mcp_bridge.state import EXTERNAL_RUNNERS, SERVER_NAME, ServerConfig, ServerState
from mcp_bridge.toolsets import DEFAULT_TOOLSETS, check_combination, plan_mounts
from reviews.gate import REVIEW_TIMEOUT_SECONDS


def create_server(
    project_root: Path | str,
    enable_quality_gate: bool = True,
    quality_gate_timeout: int = REVIEW_TIMEOUT_SECONDS,
    quality_gate_max_attempts: int = 3,
    external_runner: str | None = None,
    *,
    external_runner_cmd: str | None = None,
    platform: str | None = None,
    agent_id: str | None = None,
    auth: Any = None,
    toolsets: Sequence[str] = DEFAULT_TOOLSETS,
    workflow_sources: Sequence[Any] = (),
    generation: str = "both",
) -> FastMCP:
    """Build the MCP server for one project folder, serving ``toolsets`` (default: deepwork).

    Unknown toolset names raise ``UnknownToolset`` naming the valid ones, toolsets that cannot
    work together ``ToolsetsRefused`` saying why. ``generation``
    picks the DeepWork tool generation of the deepwork toolset: "0.9", "0.14" or "both".
    """
    root = Path(project_root).resolve()
    if not root.is_dir():
        raise ValueError(f"Project root is not a directory: {project_root}")
    if external_runner is not None and external_runner not in EXTERNAL_RUNNERS:
        raise ValueError(
            f"Unknown external runner {external_runner!r}; choose one of {EXTERNAL_RUNNERS}"
        )
    plan_mounts(toolsets)  # refuse unknown names before anything is built
    check_combination(toolsets, generation)
    state = ServerState(
        ServerConfig(
            project_root=root,
            enable_quality_gate=enable_quality_gate,
            quality_gate_timeout=quality_gate_timeout,
            quality_gate_max_attempts=quality_gate_max_attempts,
            external_runner=external_runner,
            external_runner_cmd=external_runner_cmd,
            platform=platform,
            agent_id=agent_id,
            workflow_sources=tuple(workflow_sources),
            generation=generation,
            # The user's own project: its review commands run, as in DeepWork 0.14.
            review_commands="run",
        )
    )
    return server_for_state(state, toolsets=toolsets, auth=auth)


def server_for_state(
    state: ServerState, *, toolsets: Sequence[str] = DEFAULT_TOOLSETS, auth: Any = None
) -> FastMCP:
    """The FastMCP server of ``toolsets`` whose tools act through ``state`` (its project,
    catalog, gate and agent); the hosted endpoint passes a state whose agent is per request."""
    mounts = plan_mounts(toolsets)
    ttls = [mount.toolset.cache_ttl() for mount in mounts if mount.toolset.cache_ttl]
    instructions = "\n\n".join(
        text
        for mount in mounts
        if (
            text := (
                mount.toolset.instructions_for(state.config.generation, state.project_root)
                if mount.toolset.instructions_for
                else mount.toolset.instructions
            )
        )
    )
    mcp = Server(
        SERVER_NAME,
        instructions=instructions or None,
        version=server_version(),
        auth=auth,
        mask_error_details=True,
        cache_ttl=min(ttls) if ttls else None,
        # With no $ref to inline (the deepwork toolset's schemas have none), every tool call
        # skips the middleware that would look for them.
        dereference_schemas=any(mount.toolset.schema_refs for mount in mounts),
    )
    mcp.always_loaded = frozenset(
        mount.prefix + name for mount in mounts for name in mount.toolset.always_loaded
    )
    mcp.tools_fixed = all(mount.toolset.tools_fixed for mount in mounts)
    for mount in mounts:
        mount.toolset.register(mcp, state, mount.prefix)
    mcp.deepwork_state = state  # type: ignore[attr-defined]  # for mcpserve and tests
    return mcp
