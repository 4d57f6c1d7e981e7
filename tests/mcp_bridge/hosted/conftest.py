"""Hosted MCP fixtures: the real ASGI application under uvicorn on the test database, a project,
and people with MCP tokens.

The server is a child process reading the test database, so these tests commit their data
(``transaction=True``).
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from fastmcp import Client
from fastmcp.client.transports import StreamableHttpTransport

from accounts.services import api_token_create
from tests.support.factories import make_user
from tests.support.processes import child_env_on_test_db, free_port, stop, wait_for_port
from workflows.models import Project
from workflows.services.projects import project_add

DRIVE = "workflows.drive_session"
# Short enough that a revoked token's open request ends within a test's patience.
RECHECK_SECONDS = "0.2"


def start_web(*, workers: int = 1, **env: str) -> tuple[subprocess.Popen[bytes], str]:
    """``uvicorn deepwork_site.asgi:application`` (as ``make run`` serves it) on a free port;
    returns the process and the URL of ``/mcp``."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "deepwork_site.asgi:application"]
        + ["--host", "127.0.0.1", "--port", str(port), "--workers", str(workers)]
        + ["--log-level", "warning"],
        cwd=settings.BASE_DIR,
        env=child_env_on_test_db(DEEPWORK_MCP_RECHECK_SECONDS=RECHECK_SECONDS, **env),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    wait_for_port(process, port, "uvicorn")
    return process, f"http://127.0.0.1:{port}/mcp"


@pytest.fixture
def web() -> Iterator[str]:
    process, url = start_web()
    yield url
    stop(process)


@dataclass
class Tokens:
    """Two people's MCP tokens on one project: ``bound`` to it, and ``roaming`` (any project,
    named per request)."""

    project: Project
    bound: str
    bound_agent: str
    roaming: str
    roaming_agent: str


@pytest.fixture
def tokens(transactional_db, demo_project: Path) -> Tokens:
    project = project_add(root_path=str(demo_project)).project
    alice = make_user(username="alice", perms=(DRIVE,))
    bob = make_user(username="bob", perms=(DRIVE,))
    bound, bound_secret = api_token_create(user=alice, name="Laptop", mcp=True, mcp_project=project)
    roaming, roaming_secret = api_token_create(user=bob, name="ci runner", mcp=True)
    return Tokens(
        project=project,
        bound=bound_secret,
        bound_agent=f"token-{bound.pk}-laptop",
        roaming=roaming_secret,
        roaming_agent=f"token-{roaming.pk}-ci-runner",
    )


def mcp_client(url: str, secret: str, mode: str, **headers: str) -> Client:
    """A FastMCP client of ``url`` with the bearer ``secret`` and extra ``headers``."""
    sent = {"Authorization": f"Bearer {secret}", **headers}
    return Client(StreamableHttpTransport(url, headers=sent), mode=mode)


async def call(client: Client, tool: str, args: dict[str, Any] | None = None) -> dict[str, Any]:
    """``tool``'s structured answer; fails the test on an error result."""
    result = await client.call_tool(tool, args or {}, raise_on_error=False)
    assert not result.is_error, f"{tool} failed: {result.content[0].text}"
    assert isinstance(result.structured_content, dict)
    return result.structured_content
