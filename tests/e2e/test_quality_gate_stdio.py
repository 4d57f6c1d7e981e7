"""The quality gate end to end: mcpserve over stdio with an external reviewer program."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from channels.db import database_sync_to_async
from django.contrib.auth import get_user_model

from reviews.rulings import review_override
from tests.e2e.driver import Driver
from tests.reviews.test_gate import FAKE, GATE_JOB
from tests.support.factories import write_job
from workflows.events import VIA_DASHBOARD
from workflows.models import StepRun

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.e2e]


@pytest.fixture
def gated_project(project_dir: Path) -> Path:
    write_job(project_dir, "gated", GATE_JOB, ["draft", "pages", "final"])
    (project_dir / "draft.md").write_text("FORCE_FAIL: not written yet\n")
    (project_dir / "page0.md").write_text("a page\n")
    return project_dir


async def test_needs_work_then_fixed_then_next_step_and_a_human_override(gated_project, tmp_path):
    log = tmp_path / "reviews"
    progress: list[tuple[float, float | None, str | None]] = []

    async def on_progress(done, total, message):
        progress.append((done, total, message))

    driver = Driver(
        gated_project,
        "--external-runner-cmd",
        f"{sys.executable} {FAKE}",
        env_extra={"FAKE_REVIEW": "pass", "FAKE_REVIEW_LOG": str(log)},
        progress_handler=on_progress,
    )

    async with driver as agent:
        await agent.call(
            "start_workflow", {"goal": "g", "job_name": "gated", "workflow_name": "main"}
        )

        first = await agent.call("finished_step", {"outputs": {"draft.md": "draft.md"}})
        assert first["status"] == "needs_work"
        assert first["feedback"] == "Needs improvement"
        assert first["failed_reviews"][0]["criteria_results"][0]["feedback"] == "Add more"

        (gated_project / "draft.md").write_text("A complete draft.\n")
        second = await agent.call("finished_step", {"outputs": {"draft.md": "draft.md"}})
        assert second["status"] == "next_step"
        assert second["begin_step"]["step_id"] == "pages"

        # The reviewer keeps failing this page; a person overrules it from outside the agent.
        (gated_project / "page0.md").write_text("FORCE_FAIL\n")
        third = await agent.call("finished_step", {"outputs": {"pages": ["page0.md"]}})
        assert third["status"] == "needs_work"
        run = await StepRun.objects.aget(step_id="pages", status="active")
        await database_sync_to_async(review_override)(
            step_run=run,
            by=(await get_user_model().objects.aget_or_create(username="reviewer-alice"))[0],
            reason="Page is acceptable as is",
            via=VIA_DASHBOARD,
        )
        reviews_before = len(list(log.glob("call-*.json")))
        fourth = await agent.call("finished_step", {"outputs": {"pages": ["page0.md"]}})
        assert fourth["status"] == "next_step"
        assert fourth["begin_step"]["step_id"] == "final"
        assert len(list(log.glob("call-*.json"))) == reviews_before

    assert progress, "the client received no progress notifications while reviews ran"
    assert progress[-1][0] == progress[-1][1]
    prompts = [json.loads(p.read_text())["prompt"] for p in sorted(log.glob("call-*.json"))]
    assert any("A complete draft." in p for p in prompts)
