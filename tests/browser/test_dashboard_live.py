"""A person watches an agent work and overrules a review, in a real browser.

The agent is a real ``mcpserve`` stdio subprocess driven by a real MCP client; the dashboard
is the real ASGI server in another subprocess; they share only the database.
"""

from __future__ import annotations

import sys

import pytest
from channels.db import database_sync_to_async
from fastmcp import Client

from tests.browser.conftest import create_person, log_in
from tests.e2e.test_mcpserve_stdio import call, mcpserve
from tests.reviews.test_gate import FAKE, GATE_JOB
from tests.support.factories import write_job

pytestmark = [pytest.mark.e2e, pytest.mark.browser]

# Generous: a loaded CI machine may take seconds to spawn processes; the benchmark measures
# the real latency.
UPDATE_TIMEOUT_MS = 20_000


async def mark_page(page) -> None:
    """A marker that a reload would wipe out: its survival proves the page was not reloaded."""
    await page.evaluate("window.__noReload = 'still here'")


async def assert_not_reloaded(page) -> None:
    assert await page.evaluate("window.__noReload") == "still here"


async def test_the_overview_follows_an_agent_without_a_reload(
    web_server, decider, browser, demo_project
):
    page = await log_in(browser, web_server, decider.username)
    await page.wait_for_selector("[data-testid=no-stacks]")
    await page.wait_for_function("document.querySelector('[data-testid=live-status]')")
    await mark_page(page)

    async with Client(mcpserve(demo_project), mode="legacy") as agent:
        started = await call(
            agent,
            "start_workflow",
            {"goal": "watch me", "job_name": "demo", "workflow_name": "main"},
        )
        session_id = started["begin_step"]["session_id"]
        entry = page.locator("[data-testid=stack-entry]", has_text=session_id)
        await entry.wait_for(timeout=UPDATE_TIMEOUT_MS)
        await page.wait_for_function(
            "sid => [...document.querySelectorAll('[data-testid=stack-entry]')]"
            ".some(e => e.textContent.includes(sid) && e.textContent.includes('gather'))",
            arg=session_id,
            timeout=UPDATE_TIMEOUT_MS,
        )

        answer = await call(agent, "finished_step", {"outputs": {"notes.md": "notes.md"}})
        assert answer["status"] == "next_step"
        await page.wait_for_function(
            "sid => [...document.querySelectorAll('[data-testid=stack-entry]')]"
            ".some(e => e.textContent.includes(sid) && e.textContent.includes('part_a'))",
            arg=session_id,
            timeout=UPDATE_TIMEOUT_MS,
        )
        finished = "[data-testid=recent-events] [data-testid=event-row][data-kind=step_finished]"
        assert await page.locator(finished).count() >= 1

        await call(agent, "abort_workflow", {"explanation": "seen enough"})
        await page.wait_for_selector("[data-testid=no-stacks]", timeout=UPDATE_TIMEOUT_MS)
    await assert_not_reloaded(page)


async def test_a_person_overrides_a_failed_review_and_the_agent_passes(
    web_server, decider, browser, project_dir, tmp_path
):
    write_job(project_dir, "gated", GATE_JOB, ["draft", "pages", "final"])
    (project_dir / "draft.md").write_text("FORCE_FAIL: the reviewer rejects this draft\n")
    server = mcpserve(
        project_dir,
        "--external-runner-cmd",
        f"{sys.executable} {FAKE}",
        env_extra={"FAKE_REVIEW": "pass", "FAKE_REVIEW_LOG": str(tmp_path / "reviews")},
    )
    async with Client(server, mode="legacy") as agent:
        started = await call(
            agent, "start_workflow", {"goal": "gated", "job_name": "gated", "workflow_name": "main"}
        )
        session_id = started["begin_step"]["session_id"]
        failed = await call(agent, "finished_step", {"outputs": {"draft.md": "draft.md"}})
        assert failed["status"] == "needs_work"

        page = await log_in(browser, web_server, decider.username)
        await page.goto(f"/sessions/{session_id}/")
        review = page.locator("[data-testid=review-row][data-passed=false]")
        await review.first.wait_for()
        assert "Needs improvement" in await review.first.inner_text()

        await page.fill("[data-testid=override-reason]", "The draft is fine for a first pass")
        await page.click("[data-testid=override-submit]")
        await page.wait_for_selector("[data-testid=decision-row]")
        decision = await page.locator("[data-testid=decision-row]").first.inner_text()
        assert decider.username in decision
        assert "The draft is fine for a first pass" in decision

        # The agent hands in the same draft; the person's ruling lets it through.
        passed = await call(agent, "finished_step", {"outputs": {"draft.md": "draft.md"}})
        assert passed["status"] == "next_step", passed
        assert passed["begin_step"]["step_id"] == "pages"

        await mark_page(page)
        await page.wait_for_function(
            "() => [...document.querySelectorAll('[data-testid=current-step]')]"
            ".some(e => e.textContent.includes('pages'))",
            timeout=UPDATE_TIMEOUT_MS,
        )
        await assert_not_reloaded(page)


async def test_a_watcher_sees_no_decision_buttons(web_server, browser, demo_project):
    watcher = await database_sync_to_async(create_person)("wes", "Watchers")
    async with Client(mcpserve(demo_project), mode="legacy") as agent:
        started = await call(
            agent, "start_workflow", {"goal": "g", "job_name": "demo", "workflow_name": "main"}
        )
    page = await log_in(browser, web_server, watcher.username)
    await page.goto(f"/sessions/{started['begin_step']['session_id']}/")
    await page.wait_for_selector("[data-testid=workflow-graph]")
    for form in ("override-form", "changes-form", "abort-form"):
        assert await page.locator(f"[data-testid={form}]").count() == 0
