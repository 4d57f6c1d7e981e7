"""``runner.described``: how a tool function is handed to FastMCP (docstring and type hints)."""

from __future__ import annotations

import asyncio
from typing import Annotated, get_type_hints

from fastmcp import FastMCP
from pydantic import Field

from mcp_bridge.runner import described, tool

Label = Annotated[str, Field(description="A label for the run.")]


async def start(goal: str, label: Label = "", retries: int | None = None) -> dict[str, str]:
    """Start something.

    Its second paragraph."""
    return {"goal": goal}


def test_annotations_are_resolved_once_and_the_docstring_comes_back():
    # This module postpones its annotations: FastMCP would see strings and evaluate them.
    assert start.__annotations__["goal"] == "str"
    expected = get_type_hints(start, include_extras=True)

    with described(start) as description:
        assert start.__doc__ is None
        assert description == "Start something.\n\nIts second paragraph."
        hints = dict(start.__annotations__)

    assert hints == expected
    assert hints["label"] is Label  # the Annotated metadata (the field description) is kept
    assert start.__doc__ is not None
    assert start.__doc__.startswith("Start something.")


def test_a_tool_lists_the_same_schema_from_resolved_annotations():
    async def finish(outputs: dict[str, str | list[str]], notes: str | None = None) -> dict:
        """Hand in the outputs."""
        return {}

    unresolved = FastMCP("plain")
    unresolved.tool(finish, name="finish", description="Hand in the outputs.")
    mcp = FastMCP("ours")
    tool(mcp, name="finish")(finish)

    def listed(server: FastMCP) -> dict:
        (found,) = asyncio.run(server.list_tools())
        return found.to_mcp_tool().model_dump(mode="json")

    assert listed(mcp) == listed(unresolved)
    assert listed(mcp)["description"] == "Hand in the outputs."
    assert isinstance(finish.__annotations__["notes"], type(str | None))
