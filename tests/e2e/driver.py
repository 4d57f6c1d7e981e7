"""The one driver of e2e tests: a real ``manage.py mcpserve`` subprocess and a real MCP client."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import TracebackType
from typing import Any

from fastmcp import Client
from fastmcp.client.transports import StdioTransport

from tests.support.processes import MANAGE, child_env_on_test_db


def mcpserve(project: Path, *extra: str, env_extra: dict[str, str] | None = None) -> StdioTransport:
    """The stdio transport of ``mcpserve --path project *extra`` on the test database."""
    return StdioTransport(
        command=sys.executable,
        args=[MANAGE, "mcpserve", "--path", str(project), *extra],
        env=child_env_on_test_db(**(env_extra or {})),
        cwd=str(project),
    )


async def call(client: Client, tool: str, args: dict[str, Any] | None = None) -> dict[str, Any]:
    """Call ``tool`` and return its JSON answer; fail the test if it answered an error."""
    result = await client.call_tool(tool, args or {}, raise_on_error=False)
    text = result.content[0].text
    if result.is_error:
        raise AssertionError(f"{tool} failed: {text}")
    return json.loads(text)


async def call_error(client: Client, tool: str, args: dict[str, Any] | None = None) -> str:
    """Call ``tool``, which must answer an error, and return the error's text."""
    result = await client.call_tool(tool, args or {}, raise_on_error=False)
    assert result.is_error, f"{tool} unexpectedly succeeded"
    return result.content[0].text


class Driver:
    """``async with Driver(project, *args) as agent``: one agent on its own mcpserve."""

    def __init__(
        self,
        project: Path,
        *extra: str,
        env_extra: dict[str, str] | None = None,
        transport: StdioTransport | None = None,
        mode: str = "legacy",
        **client_options: Any,
    ) -> None:
        self.client = Client(
            transport or mcpserve(project, *extra, env_extra=env_extra),
            mode=mode,
            **client_options,
        )

    async def __aenter__(self) -> Driver:
        await self.client.__aenter__()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.client.__aexit__(exc_type, exc, tb)

    async def tool_names(self) -> set[str]:
        return {tool.name for tool in await self.client.list_tools()}

    async def call(self, tool: str, args: dict[str, Any] | None = None) -> dict[str, Any]:
        return await call(self.client, tool, args)

    async def call_error(self, tool: str, args: dict[str, Any] | None = None) -> str:
        return await call_error(self.client, tool, args)
