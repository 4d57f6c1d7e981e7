"""A blocker an agent logs reaches a person's open workflow page live; the person answers it in
writing in a real browser, and the agent's next ``get_context`` shows it resolved, with who
and when.

The agent is a real ``mcpserve --toolsets tracker`` stdio subprocess driven by a real MCP
client; the dashboard is the real ASGI server in another subprocess; they share only the
database.
"""

from __future__ import annotations

from datetime import datetime

import pytest

from tests.browser.conftest import log_in
from tests.browser.test_dashboard_live import UPDATE_TIMEOUT_MS, assert_not_reloaded, mark_page
from tests.e2e.driver import Driver

pytestmark = [pytest.mark.e2e, pytest.mark.browser]


async def test_a_blocker_resolved_in_the_dashboard_reaches_the_agents_get_context(
    web_server, decider, browser, project_dir
):
    page = await log_in(browser, web_server, decider.username)
    problems: list[str] = []
    page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda error: problems.append(str(error)))

    async with Driver(project_dir, "--toolsets", "tracker") as agent:
        workflow_id = (await agent.call("start_workflow", {"name": "Ship the export"}))[
            "workflow_id"
        ]
        task = await agent.call(
            "start_task",
            {"workflow_id": workflow_id, "name": "Export", "goal": "write it", "phase": 1},
        )

        await page.goto("/tracker/")
        await page.click(f"[data-testid=tracked-row][data-workflow-id='{workflow_id}'] a")
        await page.wait_for_url(f"{web_server}/tracker/{workflow_id}/")
        await page.wait_for_selector("#live-status[data-state=live]")
        await page.wait_for_selector("[data-testid=no-blockers]")
        await page.wait_for_selector(f"[data-testid=task][data-task-id='{task['task_id']}']")
        await mark_page(page)

        issue_id = (
            await agent.call(
                "log_issue",
                {
                    "task_id": task["task_id"],
                    "type": "unclear_requirement",
                    "description": "CSV or JSON for the export?",
                    "resolution": "Paused the export until someone decides",
                    "requires_human_review": True,
                },
            )
        )["issue_id"]
        blocker = page.locator(f"[data-testid=blocker][data-issue-id='{issue_id}']")
        await blocker.wait_for(timeout=UPDATE_TIMEOUT_MS)
        assert "CSV or JSON for the export?" in await blocker.inner_text()
        await assert_not_reloaded(page)

        before = await agent.call(
            "get_context", {"workflow_id": workflow_id, "include": ["blockers"]}
        )
        assert [b["id"] for b in before["blockers"]] == [issue_id]

        await blocker.locator("[data-testid=resolution]").fill("JSON, one object per line.")
        await blocker.locator("[data-testid=resolve-submit]").click()
        await page.wait_for_selector("[data-testid=no-blockers]")
        flash = await page.locator("[data-testid=flash]").inner_text()
        assert f"Blocker {issue_id} resolved" in flash
        answer = await page.locator(
            f"[data-testid=issue-row][data-issue-id='{issue_id}'] [data-testid=resolved-by]"
        ).inner_text()
        assert decider.username in answer

        after = await agent.call(
            "get_context", {"workflow_id": workflow_id, "include": ["blockers"]}
        )
        assert after["blockers"] == []
        assert after["has_blockers"] is False
        [resolved] = after["resolved_blockers"]
        assert resolved["id"] == issue_id
        assert resolved["human_resolution"] == "JSON, one object per line."
        assert resolved["resolved_by"] == decider.username
        datetime.fromisoformat(resolved["resolved_at"])

    assert problems == []
