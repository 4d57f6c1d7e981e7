"""Every page renders in a real browser under the Content-Security-Policy, with no errors."""

from __future__ import annotations

import pytest
from fastmcp import Client

from tests.browser.conftest import log_in
from tests.e2e.test_mcpserve_stdio import call, mcpserve

pytestmark = [pytest.mark.e2e, pytest.mark.browser]


async def test_pages_admin_and_api_docs_load_without_policy_violations(
    web_server, decider, browser, demo_project
):
    async with Client(mcpserve(demo_project), mode="legacy") as agent:
        started = await call(
            agent, "start_workflow", {"goal": "g", "job_name": "demo", "workflow_name": "main"}
        )
    session_id = started["begin_step"]["session_id"]
    page = await log_in(browser, web_server, decider.username)
    problems: list[str] = []
    page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda error: problems.append(str(error)))

    for url, ready in [
        ("/", "[data-testid=stack-entry]"),
        ("/sessions/", "[data-testid=session-row]"),
        (f"/sessions/{session_id}/", "[data-testid=workflow-graph]"),
        ("/jobs/", "[data-testid=job]"),
        ("/api/docs", ".swagger-ui .opblock"),
    ]:
        await page.goto(url)
        await page.wait_for_selector(ready)
    await page.goto("/")
    await page.wait_for_selector("#live-status[data-state=live]")
    assert problems == []
