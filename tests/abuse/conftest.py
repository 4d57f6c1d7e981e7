"""The hosted /mcp fixtures (a real uvicorn, two MCP tokens) for the abuse tests of /mcp."""

from tests.mcp_bridge.hosted.conftest import tokens, web  # noqa: F401
