"""The hosted /mcp fixtures (a real uvicorn, two MCP tokens) for the abuse tests of /mcp."""

from tests.hosted.conftest import tokens, web  # noqa: F401
