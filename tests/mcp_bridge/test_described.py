"""``runner.described``: how a tool function is handed to FastMCP (docstring and type hints)."""

from __future__ import annotations

import asyncio
from datetime import datetime
from typing import Annotated, Any, get_type_hints

import pytest
from fastmcp import FastMCP
from fastmcp.exceptions import ToolError
from fastmcp.tools import ToolResult
from pydantic import BaseModel, ConfigDict, Field

from mcp_bridge.runner import LOOSE_OBJECT, described, serialized_once, tool

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


# --- serialized_once: the answer FastMCP would make, from one serialization --------------------


class Entry(BaseModel):
    model_config = ConfigDict(populate_by_name=True)

    workflow: str
    step_id: str = Field(alias="stepId")
    started: datetime
    weight: float = 0.5


class Answer(BaseModel):
    stack: list[Entry]
    note: str | None = None
    extra: dict[str, object] = {}


class Detailed(Answer):
    hidden: str = "a field the declared answer type does not have"


ANSWERS = [
    Answer(stack=[]),
    Answer(
        stack=[
            Entry(workflow="job/main", stepId="gather", started=datetime(2026, 11, 27, 12, 0, 1)),
            Entry(workflow="ünïcode/“quoted”", stepId="a\nb\t\\", started=datetime(2026, 1, 1)),
        ],
        note="línea <b>&</b> \u2028 😀",
        extra={"big": 2**60, "small": 1e-7, "neg": -0.0, "list": [1, "two", None, True]},
    ),
    Detailed(stack=[], note="a subclass answered where its base is declared"),
]


async def undeclared() -> Any:
    return Answer(stack=[])


@pytest.mark.parametrize("answer", ANSWERS, ids=["empty", "rich", "subclass"])
@pytest.mark.parametrize("returns", [Answer, Any], ids=["model", "any"])
def test_an_answer_serialized_once_is_what_fastmcp_makes_of_it(answer, returns):
    async def plain():
        """Answer."""
        return answer

    async def ours():
        """Answer."""
        return answer

    plain.__annotations__["return"] = ours.__annotations__["return"] = returns

    theirs = FastMCP("plain")
    theirs.tool(plain, name="answer", output_schema=LOOSE_OBJECT)
    mcp = FastMCP("ours")
    tool(mcp, name="answer", output_schema=LOOSE_OBJECT)(ours)

    def called(server: FastMCP) -> Any:
        result = asyncio.run(server.call_tool("answer", {}))
        return result.to_mcp_result()

    expected_content, expected_structured = called(theirs)
    content, structured = called(mcp)
    assert structured == expected_structured
    assert [c.model_dump() for c in content] == [c.model_dump() for c in expected_content]
    # A subclass is serialized as the declared model, or whole where the answer is Any.
    assert ("hidden" in structured) == (returns is Any and isinstance(answer, Detailed))


class Later(BaseModel):
    # As a stdio server's models are: their schemas built at first use.
    model_config = ConfigDict(defer_build=True)

    stack: list[Entry]


def test_an_answer_model_whose_schema_is_built_at_first_use():
    async def ours() -> Later:
        """Answer."""
        return Later(stack=[])

    mcp = FastMCP("ours")
    tool(mcp, name="answer", output_schema=LOOSE_OBJECT)(ours)
    content, structured = asyncio.run(mcp.call_tool("answer", {})).to_mcp_result()
    assert structured == {"stack": []}
    assert content[0].text == '{"stack":[]}'


def test_an_answer_with_a_non_finite_float_is_left_to_fastmcp():
    async def ours() -> Answer:
        """Answer."""
        return Answer(stack=[], extra={"ratio": float("nan")})

    mcp = FastMCP("ours")
    tool(mcp, name="answer", output_schema=LOOSE_OBJECT)(ours)
    with pytest.raises(ToolError, match="non-finite float"):
        asyncio.run(mcp.call_tool("answer", {}))


def test_only_answer_models_under_an_object_output_schema_are_serialized_here():
    async def listing() -> list[str]:
        """Names."""
        return ["a"]

    async def answer() -> Answer:
        """Answer."""
        return Answer(stack=[])

    async def result() -> ToolResult:
        """Already a result."""
        return ToolResult(structured_content={"a": 1})

    for fn in (listing, answer, result, undeclared):
        fn.__annotations__ = get_type_hints(fn)
    assert serialized_once(undeclared, LOOSE_OBJECT) is not undeclared
    assert serialized_once(listing, LOOSE_OBJECT) is listing
    assert serialized_once(answer, None) is answer
    assert serialized_once(answer, {"type": "array"}) is answer
    assert serialized_once(result, LOOSE_OBJECT) is result
    assert serialized_once(answer, LOOSE_OBJECT) is not answer
