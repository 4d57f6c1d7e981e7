"""What users and agents read names no planning document: the REST API's OpenAPI text and
every MCP tool's description and input schema, in every toolset."""

from __future__ import annotations

import json
import re

import pytest
from fastmcp import Client

from mcp_bridge.server import create_server
from mcp_bridge.toolsets import TOOLSETS

PLANNING = re.compile(r"\bseeds?\b|\bdigest\b|§", re.IGNORECASE)

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_openapi_text_names_no_planning_document(client):
    text = json.dumps(client.get("/api/openapi.json").json())
    assert not PLANNING.findall(text)


async def test_no_tool_description_names_a_planning_document(demo_project):
    server = create_server(demo_project, toolsets=list(TOOLSETS))
    async with Client(server) as agent:
        tools = await agent.list_tools()
    assert len(tools) > 20
    for tool in tools:
        text = json.dumps([tool.description, tool.input_schema])
        assert not PLANNING.findall(text), tool.name
