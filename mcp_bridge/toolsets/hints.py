"""What every tool tells clients about itself before they call it (MCP tool annotations).

Clients act on these: some ask the user before every call of a tool that declares nothing,
others run read-only tools without asking. So every tool of every toolset declares all four
hints and a title (``tests/mcp_bridge/test_tool_annotations.py`` lists them through a real
server), and each hint says what the tool may do at its worst:

- read-only: changes nothing the caller could notice (a catalog sync or the call log aside);
- destructive: may end or discard something (a session, a run, recorded progress);
- idempotent: a second identical call changes nothing more than the first;
- open world: may reach beyond the project and the database, by running a program the
  project or the server's options name (a reviewer, a precompute command) or by calling a
  remote workflow source. The server's own git runs on the project stay closed-world.
"""

from __future__ import annotations

from mcp.types import ToolAnnotations


def reads(title: str, *, open_world: bool = False) -> ToolAnnotations:
    """A tool that only reads: safe to call again and again."""
    return ToolAnnotations(
        title=title,
        read_only_hint=True,
        destructive_hint=False,
        idempotent_hint=True,
        open_world_hint=open_world,
    )


def writes(
    title: str, *, destructive: bool = False, idempotent: bool = False, open_world: bool = False
) -> ToolAnnotations:
    """A tool that records or changes something."""
    return ToolAnnotations(
        title=title,
        read_only_hint=False,
        destructive_hint=destructive,
        idempotent_hint=idempotent,
        open_world_hint=open_world,
    )
