"""The toolsets `mcpserve --toolsets` can serve, and how several compose on one server.

A toolset registers its tools on a FastMCP server, each under ``prefix + name``. Each toolset
alone keeps its dialect's exact tool names; where a later toolset would reuse a name an earlier
one already serves, the later one is mounted under the prefix ``<toolset>_``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib import import_module
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured
from fastmcp import FastMCP

from mcp_bridge.state import ServerState
from mcp_bridge.toolsets import deepwork, specs
from mcp_bridge.toolsets.deepwork import deepreview


@dataclass(frozen=True)
class Toolset:
    """One dialect's tools: what they are called and how to put them on a server."""

    name: str
    tool_names: tuple[str, ...]
    register: Callable[[FastMCP, ServerState, str], None]
    instructions: str | None = None
    # Seconds a 2026-07-28 client may keep a tools listing; None: no hint.
    cache_ttl: Callable[[], int] | None = None
    # Instructions that depend on the DeepWork tool generation served and the project root
    # (overrides the above).
    instructions_for: Callable[[str, Path], str] | None = None
    # Whether its tools' schemas may hold $ref (nested models, published workflows' schemas),
    # which FastMCP's middleware inlines in every listing for clients that cannot follow them.
    schema_refs: bool = False
    # Its tools a client that defers tools behind a search must have at hand from the start.
    always_loaded: tuple[str, ...] = ()
    # The modules its tools' bodies import where they are used (they need Django's app
    # registry): a stdio server loads them as part of its start-up, after the listing
    # (``mcp_bridge.startup``), so that the first call does not wait for them.
    engine_modules: tuple[str, ...] = ()
    # Whether its tools stay as registered while the server runs (``Server.tools_fixed``).
    tools_fixed: bool = True


# The workflow tools of the generation the server was asked for (deepwork.register).
DEEPWORK = Toolset(
    "deepwork",
    deepwork.TOOL_NAMES,
    deepwork.register,
    instructions=deepwork.INSTRUCTIONS,
    instructions_for=deepwork.instructions_for,
    # The generic path to every workflow (find it, start it, step through it), in every
    # generation; the one-tool-per-workflow tools may stay deferred behind their search hints.
    always_loaded=deepwork.v0_9.TOOL_NAMES,
    engine_modules=deepwork.ENGINE_MODULES,
)
# 0.14's review texts under --generation 0.14 (deepwork.register_reviews).
# Its .deepreview pipeline (jsonschema, wcmatch) stays unloaded until a review tool needs it.
DEEPREVIEW = Toolset("deepreview", deepreview.TOOL_NAMES, deepwork.register_reviews)


def _registered_by(module: str) -> Callable[[FastMCP, ServerState, str], None]:
    """``module.register``, the module imported only by a server that serves its toolset."""

    def register(mcp: FastMCP, state: ServerState, prefix: str = "") -> None:
        import_module(module).register(mcp, state, prefix)

    return register


TRACKER = Toolset(
    "tracker",
    specs.TRACKER_TOOL_NAMES,
    _registered_by("mcp_bridge.toolsets.tracker"),
    instructions=specs.TRACKER_INSTRUCTIONS,
    schema_refs=True,
)
WORKFLOW_TOOLS = Toolset(
    "workflow-tools",
    specs.WORKFLOW_TOOLS_TOOL_NAMES,
    _registered_by("mcp_bridge.toolsets.workflow_tools"),
    instructions=specs.WORKFLOW_TOOLS_INSTRUCTIONS,
    cache_ttl=specs.workflow_tools_cache_ttl,
    schema_refs=True,
    # One tool per published workflow: added and removed as workflows are published.
    tools_fixed=False,
)
AGENTS = Toolset(
    "agents",
    specs.AGENTS_TOOL_NAMES,
    _registered_by("mcp_bridge.toolsets.agents"),
    instructions=specs.AGENTS_INSTRUCTIONS,
    schema_refs=True,
)

# What each name on the command line serves, in order. DeepWork 0.9.1's wire carries the review
# tools, so `deepwork` includes `deepreview`; `deepreview` alone serves only the review tools
# (for an agent that wants the .deepreview pipeline without workflows). A DeepWork workflow's
# tool answers the workflow's first step and leaves the rest to `finished_step`, so
# `workflow-tools` brings the deepwork toolset along: alone it would start workflows nothing
# could finish (every project has the standard jobs' DeepWork workflows, so there is always
# such a tool).
TOOLSETS: dict[str, tuple[Toolset, ...]] = {
    "deepwork": (DEEPWORK, DEEPREVIEW),
    "deepreview": (DEEPREVIEW,),
    "tracker": (TRACKER,),
    "workflow-tools": (DEEPWORK, DEEPREVIEW, WORKFLOW_TOOLS),
    "agents": (AGENTS,),
}
DEFAULT_TOOLSETS = ("deepwork",)


class UnknownToolset(ImproperlyConfigured):
    pass


class ToolsetsRefused(ImproperlyConfigured):
    """Toolsets that cannot work together as asked."""


def check_combination(names: Sequence[str], generation: str) -> None:
    """Refuse toolsets that would serve a tool whose work nothing served could carry on.

    A DeepWork workflow's tool starts the session on the server's agent, the way 0.9.1's
    ``start_workflow`` does; 0.14's tools act only on a conversation's stack, so under
    ``--generation 0.14`` no ``finished_step`` could reach it.
    """
    if "workflow-tools" in names and generation == "0.14":
        raise ToolsetsRefused(
            "The workflow-tools toolset cannot be served with --generation 0.14: a DeepWork "
            "workflow's tool starts the workflow on this server's agent, and DeepWork 0.14's "
            "finished_step cannot carry on such a session. Use --generation both (the default) "
            "or 0.9 with --toolsets workflow-tools."
        )


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
