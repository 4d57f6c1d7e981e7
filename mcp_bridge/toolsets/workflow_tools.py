"""The ``workflow-tools`` toolset: one MCP tool per published workflow, beside three
static tools (``refresh_workflow_tools``, ``get_workflow_status``, ``cancel_workflow_run``).

This module holds what composing toolsets needs (names, instructions, settings); the machinery
(``workflow_tools_provider``: the provider, jsonschema, the HTTP client) is imported only by a
server that serves the toolset, so every other ``mcpserve`` starts without it.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from fastmcp import FastMCP

    from mcp_bridge.state import ServerState

logger = logging.getLogger("deepwork.workflow_tools")

TOOL_NAMES = ("refresh_workflow_tools", "get_workflow_status", "cancel_workflow_run")
LOOSE_OBJECT = {"additionalProperties": True, "type": "object"}

INSTRUCTIONS = """\
# Workflow tools

Every published workflow is also a tool of its own, named `workflow_<name>`, whose description
gives the workflow's id, category, version and execution type, and whose input schema its
arguments must match. Calling a DeepWork workflow's tool starts it for you and answers its
first step, as `start_workflow` does; carry on with `finished_step`. A multi-agent (DAG)
workflow's tool executes it with you as the triggering agent (it runs once, then its tool is
gone). An `async` workflow answers a `run_id` at once: follow it with `get_workflow_status`,
stop it with `cancel_workflow_run`. A `sync` one answers its results when it is done.
`refresh_workflow_tools` re-reads the workflows now and says what changed.
"""

ENABLED_ENV = "DEEPWORK_WORKFLOW_TOOLS_ENABLED"
POLL_ENV = "DEEPWORK_WORKFLOW_TOOLS_POLL_SECONDS"
CACHE_TTL_ENV = "DEEPWORK_WORKFLOW_TOOLS_CACHE_TTL"
TIMEOUT_ENV = "DEEPWORK_WORKFLOW_TOOLS_TIMEOUT"
SOURCE_POLL_ENV = "DEEPWORK_WORKFLOW_SOURCE_POLL_SECONDS"
SOURCE_URL_ENV = "DEEPWORK_WORKFLOW_SOURCE"
SOURCE_TOKEN_ENV = "DEEPWORK_WORKFLOW_SOURCE_TOKEN"
PAGE_SIZE_ENV = "DEEPWORK_TOOLS_PAGE_SIZE"
INCLUDE_ENV = "DEEPWORK_WORKFLOW_TOOLS_INCLUDE"
EXCLUDE_ENV = "DEEPWORK_WORKFLOW_TOOLS_EXCLUDE"

# The key of a tool's `_meta` that Claude Code reads, when it defers MCP tools behind its tool
# search, for words to match a deferred tool by besides its name (its always-loaded mark is
# ``mcp_bridge.runner.ALWAYS_LOAD_META``).
SEARCH_HINT_META = "anthropic/searchHint"
SEARCH_HINT_CHARS = 200
# Beyond this many workflow tools a listing is logged as too long: models choose tools less
# well among many, and a client that loads every schema pays for all of them on every turn.
MANY_WORKFLOW_TOOLS = 30


def env_float(name: str, default: float) -> float:
    """A positive number from the environment, else ``default`` (a bad value is logged)."""
    try:
        value = float(os.environ.get(name, default))
    except ValueError:
        logger.warning("%s is not a number; using %s", name, default)
        return default
    return value if value > 0 else default


def page_size_from_env() -> int | None:
    """Tools per tools/list page, or None (the default, and 0): one page holds them all.

    Off by default because several clients read only the first page (see the README)."""
    raw = os.environ.get(PAGE_SIZE_ENV, "").strip()
    if not raw:
        return None
    try:
        size = int(raw)
    except ValueError:
        size = -1
    if size < 0:
        logger.warning(
            "%s=%r is not a whole number >= 0; tools/list is not paged", PAGE_SIZE_ENV, raw
        )
        return None
    return size or None


def cache_ttl() -> int:
    """Seconds a 2026-07-28 client may keep a listing."""
    return max(1, int(env_float(CACHE_TTL_ENV, 5)))


@dataclass(frozen=True)
class SourceConfig:
    """A remote workflow source as ``mcpserve --workflow-source`` names it."""

    url: str
    token: str | None


def register(mcp: FastMCP, state: ServerState, prefix: str = "") -> None:
    """Put the workflow tools' provider and the three static tools on ``mcp``."""
    from mcp_bridge.toolsets import workflow_tools_provider

    workflow_tools_provider.register(mcp, state, prefix)
