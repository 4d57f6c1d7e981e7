"""``runner.Server``'s tool calls: the middleware chain only when there is one, and a tool kept
by name on a server whose tools are fixed."""

from __future__ import annotations

import asyncio
from typing import Any

from fastmcp import FastMCP
from fastmcp.server.middleware import Middleware

from mcp_bridge.runner import Server


async def echo(text: str) -> str:
    return text


class Recording(Middleware):
    def __init__(self) -> None:
        self.seen: list[str] = []

    async def on_call_tool(self, context: Any, call_next: Any) -> Any:
        self.seen.append(context.message.name)
        return await call_next(context)


def text_of(result: Any) -> str:
    return result.content[0].text


def test_a_call_runs_the_middleware_there_is_and_skips_a_chain_of_none(monkeypatch):
    mcp = Server("calls", dereference_schemas=False)  # FastMCP's one default middleware
    assert not mcp.middleware
    mcp.tool(echo, name="echo")
    chain = FastMCP._dispatch_component_middleware
    built: list[str] = []

    async def dispatch(self: FastMCP, *, context: Any, call_next: Any) -> Any:
        built.append(context.message.name)
        return await chain(self, context=context, call_next=call_next)

    monkeypatch.setattr(FastMCP, "_dispatch_component_middleware", dispatch)
    assert text_of(asyncio.run(mcp.call_tool("echo", {"text": "plain"}))) == "plain"
    assert built == []  # no chain of nothing (fails if FastMCP renames what this relies on)

    recording = Recording()
    mcp.add_middleware(recording)
    assert text_of(asyncio.run(mcp.call_tool("echo", {"text": "watched"}))) == "watched"
    assert recording.seen == ["echo"]
    assert built == ["echo"]


def test_a_server_with_fixed_tools_finds_a_tool_once():
    async def calls(mcp: Server) -> list[str]:
        first = await mcp.call_tool("echo", {"text": "one"})
        mcp.local_provider.remove_tool("echo")
        try:
            second = text_of(await mcp.call_tool("echo", {"text": "two"}))
        except Exception as exc:  # FastMCP's "Unknown tool" for a server that looks again
            second = type(exc).__name__
        return [text_of(first), second]

    changing = Server("changing")
    changing.tool(echo, name="echo")
    assert asyncio.run(calls(changing)) == ["one", "NotFoundError"]

    # Removing a tool breaks the promise a fixed server makes; the kept tool shows it was
    # not looked up again.
    fixed = Server("fixed")
    fixed.tools_fixed = True
    fixed.tool(echo, name="echo")
    assert asyncio.run(calls(fixed)) == ["one", "two"]
    assert asyncio.run(fixed.get_tool("missing")) is None


def test_a_tool_with_an_auth_check_of_its_own_is_looked_up_each_call():
    allowed = [True]

    def check(context: Any) -> bool:
        return allowed[0]

    fixed = Server("fixed")
    fixed.tools_fixed = True
    fixed.tool(echo, name="echo", auth=check)
    assert asyncio.run(fixed.get_tool("echo")) is not None
    allowed[0] = False
    assert asyncio.run(fixed.get_tool("echo")) is None
