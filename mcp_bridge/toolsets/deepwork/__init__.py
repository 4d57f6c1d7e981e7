"""The ``deepwork`` toolset by tool generation: DeepWork 0.9.1's, 0.14's, or both on one server.

``mcpserve --generation``:

- ``0.9``: exactly 0.9.1's tools (``v0_9``).
- ``0.14``: exactly 0.14.0's tool names and input schemas, answered in its shapes and texts
  (``v0_14``).
- ``both`` (default): 0.9.1's tools with the union of both generations' parameters, routed
  per call, plus 0.14's session-job and schema tools (``both``).

Every generation's tools call the one session service and finish pipeline through the one
database-call path (``mcp_bridge.toolsets.calls.db_tool_call``).
"""

from __future__ import annotations

from pathlib import Path

from fastmcp import FastMCP

from mcp_bridge.state import ServerState
from mcp_bridge.toolsets.deepwork import both, deepreview, v0_9, v0_14

GENERATIONS = ("0.9", "0.14", "both")
DEFAULT_GENERATION = "both"
# Every tool a `deepwork` toolset may serve (the union tools' names hold the other two's).
TOOL_NAMES = both.TOOL_NAMES
INSTRUCTIONS = v0_9.INSTRUCTIONS
# What the tools import inside their bodies: the session service, the finish pipeline, the
# dialects' renderers, the selectors (``Toolset.engine_modules``).
ENGINE_MODULES = (
    "workflows.generations.v0_9",
    "workflows.generations.v0_14",
    "workflows.services.sessions",
    "workflows.services.session_jobs",
    "workflows.services.active",
    "workflows.selectors.generations",
    "workflows.selectors.deepschemas",
    "workflows.dialects.deepwork",
    "reviews.services",
)


def _generation(state: ServerState) -> str:
    return getattr(state.config, "generation", DEFAULT_GENERATION)


def instructions_for(generation: str, project_root: Path) -> str:
    if generation == "0.14":
        return v0_14.instructions(project_root)
    if generation == "both":
        return f"{v0_9.INSTRUCTIONS}\n{both.BOTH_NOTE}\n"
    return v0_9.INSTRUCTIONS


def register(mcp: FastMCP, state: ServerState, prefix: str = "") -> None:
    """The deepwork workflow tools of the server's generation (``ServerConfig.generation``)."""
    generation = _generation(state)
    if generation == "0.9":
        v0_9.register(mcp, state, prefix)
    elif generation == "0.14":
        v0_14.register(mcp, state, prefix)
    else:
        both.register_both(mcp, state, prefix)


def register_reviews(mcp: FastMCP, state: ServerState, prefix: str = "") -> None:
    """The three review tools; under ``--generation 0.14`` in 0.14's format and texts."""
    if _generation(state) == "0.14":
        v0_14.register_review_tools(mcp, state, prefix)
    else:
        deepreview.register(mcp, state, prefix)
