"""The toolsets `mcpserve --toolsets` can serve, and how several compose on one server.

A toolset registers its tools on a FastMCP server, each under ``prefix + name``. Each toolset
alone keeps its dialect's exact tool names; where a later toolset would reuse a name an earlier
one already serves, the later one is mounted under the prefix ``<toolset>_``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from django.core.exceptions import ImproperlyConfigured
from fastmcp import FastMCP

from mcp_bridge.state import ServerState
from mcp_bridge.toolsets import agents, deepreview, deepwork, tracker, workflow_tools


@dataclass(frozen=True)
class Toolset:
    """One dialect's tools: what they are called and how to put them on a server."""

    name: str
    tool_names: tuple[str, ...]
    register: Callable[[FastMCP, ServerState, str], None]
    instructions: str | None = None
    # Seconds a 2026-07-28 client may keep a tools listing; None: no hint.
    cache_ttl: Callable[[], int] | None = None


DEEPWORK = Toolset(
    "deepwork", deepwork.TOOL_NAMES, deepwork.register, instructions=deepwork.INSTRUCTIONS
)
DEEPREVIEW = Toolset("deepreview", deepreview.TOOL_NAMES, deepreview.register)
TRACKER = Toolset(
    "tracker", tracker.TOOL_NAMES, tracker.register, instructions=tracker.INSTRUCTIONS
)
WORKFLOW_TOOLS = Toolset(
    "workflow-tools",
    workflow_tools.TOOL_NAMES,
    workflow_tools.register,
    instructions=workflow_tools.INSTRUCTIONS,
    cache_ttl=workflow_tools.cache_ttl,
)
AGENTS = Toolset("agents", agents.TOOL_NAMES, agents.register, instructions=agents.INSTRUCTIONS)

# What each name on the command line serves, in order. DeepWork 0.9.1's wire carries the review
# tools, so `deepwork` includes `deepreview`; `deepreview` alone serves only the review tools
# (for an agent that wants the .deepreview pipeline without workflows).
TOOLSETS: dict[str, tuple[Toolset, ...]] = {
    "deepwork": (DEEPWORK, DEEPREVIEW),
    "deepreview": (DEEPREVIEW,),
    "tracker": (TRACKER,),
    "workflow-tools": (WORKFLOW_TOOLS,),
    "agents": (AGENTS,),
}
DEFAULT_TOOLSETS = ("deepwork",)


class UnknownToolset(ImproperlyConfigured):
    pass


def parse_toolsets(value: str) -> tuple[str, ...]:
    """The toolset names of a comma list such as ``deepwork,deepreview``, checked."""
    names = tuple(name.strip() for name in value.split(",") if name.strip())
    if not names:
        raise UnknownToolset(f"No toolset given; choose from: {', '.join(TOOLSETS)}")
    unknown = [name for name in names if name not in TOOLSETS]
    if unknown:
        raise UnknownToolset(
            f"Unknown toolset{'s' if len(unknown) > 1 else ''} {', '.join(map(repr, unknown))}; "
            f"choose from: {', '.join(TOOLSETS)}"
        )
    return names


@dataclass(frozen=True)
class Mount:
    toolset: Toolset
    prefix: str


def plan_mounts(
    names: Sequence[str], catalog: dict[str, tuple[Toolset, ...]] = TOOLSETS
) -> list[Mount]:
    """The toolsets to register, in order, each once, with the prefix its tools go under."""
    mounts: list[Mount] = []
    seen: set[str] = set()
    taken: set[str] = set()
    for name in names:
        if name not in catalog:
            raise UnknownToolset(f"Unknown toolset {name!r}; choose from: {', '.join(catalog)}")
        for toolset in catalog[name]:
            if toolset.name in seen:
                continue  # already served (deepwork includes deepreview)
            seen.add(toolset.name)
            prefix = f"{toolset.name}_" if taken.intersection(toolset.tool_names) else ""
            mounts.append(Mount(toolset, prefix))
            taken.update(prefix + tool for tool in toolset.tool_names)
    return mounts
