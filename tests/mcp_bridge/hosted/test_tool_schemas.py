"""The tool schemas ``/mcp`` hands the MCP SDK for its ``Mcp-Param-*`` check: the ones
``tools/list`` advertises, listed again after ``TOOL_SCHEMAS_SECONDS`` (tools added at run
time, as ``refresh_workflow_tools`` does, are picked up)."""

from __future__ import annotations

from fastmcp import Client, FastMCP

from mcp_bridge.hosted import servers


async def test_schemas_are_the_advertised_ones_and_follow_new_tools(monkeypatch):
    mcp = FastMCP("t")

    @mcp.tool
    def one(a: int, b: str = "x") -> int:
        return a

    schemas = servers.ToolSchemas(mcp)
    await schemas.fresh()
    async with Client(mcp) as client:
        listed = {tool.name: tool.input_schema for tool in await client.list_tools()}
    assert schemas.get("one") == listed["one"]
    assert schemas.get("two") is None

    @mcp.tool
    def two(c: list[str]) -> int:
        return len(c)

    # Within the interval nothing is listed again; after it the new tool is there.
    await schemas.fresh()
    assert schemas.get("two") is None
    monkeypatch.setattr(servers, "TOOL_SCHEMAS_SECONDS", 0.0)
    await schemas.fresh()
    async with Client(mcp) as client:
        listed = {tool.name: tool.input_schema for tool in await client.list_tools()}
    assert schemas.get("two") == listed["two"]
