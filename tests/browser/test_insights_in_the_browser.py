"""The insights pages in a real browser under the Content-Security-Policy: charts drawn, each
data table matching the export, filters changing them, bars leading to their sessions, and a
live refresh when something happens."""

from __future__ import annotations

import datetime as dt
import json
import os

import pytest
from channels.db import database_sync_to_async

from dag import services as dag
from insights.tallies import insight_tallies_rebuild
from reviews.models import ReviewResult
from tests.browser.conftest import create_person, log_in
from tests.insights.conftest import D1, D3, build_history
from workflows.events import SessionStarted, event_record
from workflows.models import WorkflowSession

pytestmark = [pytest.mark.browser]

RANGE = f"since={D1.isoformat()}&until={D3.isoformat()}"
TIMEOUT_MS = 20_000


def run_a_dag(history) -> str:
    project = history.p1
    dag.dag_agent_register(project=project, agent_id="w", roles=["swe"])
    steps = [
        {"step_id": "plan", "description": "Plan", "assigned_role": "swe"},
        {"step_id": "do", "description": "Do", "assigned_role": "swe", "depends_on": ["plan"]},
    ]
    wid = dag.dag_define(
        project=project, creator_id="c", name="Ship", description="", steps=steps
    ).job.dir_name
    dag.dag_execute(project=project, workflow_id=wid, triggering_agent_id="c")
    dag.dag_report_completion(project=project, workflow_id=wid, step_id="plan", agent_id="w")
    return wid


async def table_rows(page, name: str) -> list[list[str]]:
    return await page.eval_on_selector(
        f"table[data-insight='{name}']",
        "t => Array.from(t.tBodies[0].rows).map(r => Array.from(r.cells).map(c => c.textContent))",
    )


async def exported_rows(page, name: str, query: str) -> list[list[str]]:
    response = await page.request.get(f"/insights/export/{name}.json?{query}")
    assert response.ok
    data = json.loads(await response.text())
    return [["" if c is None else str(c) for c in row] for row in data["rows"]]


def add_session_on_d3(history) -> None:
    s1 = history.sessions["s1"]
    started = dt.datetime.combine(D3, dt.time(15), tzinfo=dt.UTC)
    session = WorkflowSession.objects.create(
        session_id="late",
        project=s1.project,
        agent=s1.agent,
        job=s1.job,
        workflow=s1.workflow,
        job_name="demo",
        workflow_name="main",
        goal="g",
        current_step_id="gather",
        started_at=started,
    )
    event_record(
        kind="session_started",
        project=s1.project,
        session=session,
        agent=s1.agent,
        payload=SessionStarted(job="demo", workflow="main", goal="g", parent=None),
    )


@pytest.fixture
def history(transactional_db, tmp_path):
    return build_history(tmp_path)


async def test_insights_in_the_browser(web_server, browser, history):
    watcher = await database_sync_to_async(create_person)("wes", "Watchers")
    page = await log_in(browser, web_server, watcher.username)
    problems: list[str] = []
    page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda error: problems.append(str(error)))

    # Every page: each insight a chart with a title, or says it has nothing to draw, and its
    # data table matches the export of the same insight.
    for path in ("/insights/", "/insights/time/", "/insights/reviews/", "/insights/tracker/"):
        await page.goto(f"{path}?{RANGE}")
        await page.wait_for_selector("#live-status[data-state=live]")
        names = await page.eval_on_selector_all(
            "[data-testid=insight]", "els => els.map(e => e.dataset.insight)"
        )
        assert names
        for name in names:
            section = page.locator(f"[data-insight='{name}'][data-testid=insight]")
            assert await section.locator("svg title, [data-testid=chart-empty]").count() >= 1
            shown, exported = await table_rows(page, name), await exported_rows(page, name, RANGE)
            if name == "tracker-blockers":
                # A blocker's age grows while the page and the export are fetched one after the
                # other: compare it within a minute, every other column exactly.
                ages = [(float(a[-1]), float(b[-1])) for a, b in zip(shown, exported, strict=True)]
                assert all(abs(a - b) <= 1 / 60 for a, b in ages), ages
                shown, exported = [r[:-1] for r in shown], [r[:-1] for r in exported]
            assert shown == exported, name
        drawn = await page.locator("[data-testid=chart] svg").count()
        assert drawn >= 2, path

    # The filters change the charts and tables.
    await page.goto(f"/insights/?{RANGE}")
    before = await table_rows(page, "sessions-per-day")
    assert [row[1] for row in before] == ["2", "2", "2"]
    await page.fill("#insight-agent", "a2")
    await page.click("#insight-submit")
    await page.wait_for_url("**agent=a2**")
    assert [row[1] for row in await table_rows(page, "sessions-per-day")] == ["0", "1", "1"]
    query = f"{RANGE}&agent=a2"
    assert await table_rows(page, "agents") == await exported_rows(page, "agents", query)

    # The dialect splits DeepWork 0.9 from 0.14: s2 (D1) is made a 0.14 session.
    await database_sync_to_async(WorkflowSession.objects.filter(session_id="s2").update)(
        generation="0.14"
    )
    await database_sync_to_async(ReviewResult.objects.filter(session__session_id="s2").update)(
        generation="0.14"
    )
    # Changed past the event writer: the tallies are recounted, as after any such edit.
    await database_sync_to_async(insight_tallies_rebuild)()
    await page.goto(f"/insights/?{RANGE}")
    await page.select_option("#insight-dialect", "deepwork-0.14")
    await page.click("#insight-submit")
    await page.wait_for_url("**dialect=deepwork-0.14**")
    assert [row[1] for row in await table_rows(page, "sessions-per-day")] == ["1", "0", "0"]
    query = f"{RANGE}&dialect=deepwork-0.14"
    assert await table_rows(page, "sessions-per-day") == await exported_rows(
        page, "sessions-per-day", query
    )

    # DAG workflows: a run today, its hand-off waits and load per role (the last 30 days).
    wid = await database_sync_to_async(run_a_dag)(history)
    await page.goto("/insights/dag/")
    await page.wait_for_selector("#live-status[data-state=live]")
    assert await page.locator("[data-testid=chart] svg[role=img]").count() == 2
    for name in ("dag-handoffs", "dag-load"):
        assert await table_rows(page, name) == await exported_rows(page, name, ""), name
    assert [row[0] for row in await table_rows(page, "dag-handoffs")] == ["swe"]
    # Both waits were all but nothing (an agent was there): bars too thin to click, so follow
    # the link the bars carry.
    link = page.locator(f"#insight-dag-handoffs svg a[*|href='/dag/{wid}/']")
    assert await link.count() == 2  # median and p90
    response = await page.goto(f"/dag/{wid}/")
    assert response is not None
    assert response.ok
    assert await page.locator("[data-step-id=plan][data-status=completed]").count() == 1

    # A bar leads to the sessions behind it: D1's aborted session.
    await page.goto(f"/insights/?{RANGE}")
    # pygal writes SVG 1.1 links (xlink:href).
    bar = page.locator("#insight-sessions-per-day svg a[*|href*='status=aborted']").first
    await bar.click()
    await page.wait_for_url("**/sessions/**status=aborted**")
    assert await page.locator("[data-testid=session-row]").evaluate_all(
        "rows => rows.map(r => r.dataset.sessionId)"
    ) == ["s2"]

    # INSIGHTS_SCREENSHOTS=/some/folder keeps a picture of each page, to look at.
    if folder := os.environ.get("INSIGHTS_SCREENSHOTS"):
        for path in ("", "time/", "reviews/", "tracker/"):
            await page.goto(f"/insights/{path}?{RANGE}")
            name = path.strip("/") or "activity"
            await page.screenshot(path=f"{folder}/{name}.png", full_page=True)

    # Live: a session starts; the table changes without a reload.
    await page.goto(f"/insights/?{RANGE}")
    await page.wait_for_selector("#live-status[data-state=live]")
    await page.evaluate("window.__marker = 1")
    await database_sync_to_async(add_session_on_d3)(history)
    await page.wait_for_function(
        "() => document.querySelector(\"table[data-insight='sessions-per-day']\")"
        ".tBodies[0].rows[2].cells[1].textContent === '3'",
        timeout=TIMEOUT_MS,
    )
    assert await page.evaluate("window.__marker") == 1
    assert problems == []
