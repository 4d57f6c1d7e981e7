"""The standard ``deepwork_jobs/repair`` runs to completion on a healthy project, where nothing
needs fixing and the agent hands in an empty list of changed job files, in both generations."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.e2e.driver import Driver
from tests.reviews.test_gate import FAKE

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.e2e]


async def test_repair_finishes_with_no_job_changed_in_the_first_generation(
    demo_project: Path, tmp_path: Path
) -> None:
    driver = Driver(
        demo_project,
        "--generation",
        "0.9",
        "--external-runner-cmd",
        f"{sys.executable} {FAKE}",
        env_extra={"FAKE_REVIEW": "pass", "FAKE_REVIEW_LOG": str(tmp_path / "reviews")},
    )
    async with driver as agent:
        listing = await agent.call("get_workflows")
        assert not [e for e in listing.get("errors", []) if ".deepwork/jobs/" in str(e)]
        started = await agent.call(
            "start_workflow",
            {"goal": "check the jobs", "job_name": "deepwork_jobs", "workflow_name": "repair"},
        )
        assert started["begin_step"]["step_id"] == "fix_jobs"
        done = await agent.call(
            "finished_step",
            {
                "outputs": {"job_definitions": []},
                "notes": "get_workflows listed no errors; nothing needed fixing.",
            },
        )
        assert done["status"] == "workflow_complete", done


async def test_repair_finishes_with_no_job_changed_in_the_later_generation(
    demo_project: Path,
) -> None:
    async with Driver(demo_project, "--generation", "0.14") as agent:
        started = await agent.call(
            "start_workflow",
            {
                "goal": "check the jobs",
                "job_name": "deepwork_jobs",
                "workflow_name": "repair",
                "session_id": "S",
            },
        )
        assert started["begin_step"]["step_id"] == "fix_settings"
        hand_ins = [
            {"settings_report": "Checked .deepwork/ and the jobs folder; nothing changed."},
            {"job_definitions": []},
            {"errata": "none"},
        ]
        answer: dict = {}
        for outputs in hand_ins:
            answer = await agent.call(
                "finished_step",
                {"outputs": outputs, "session_id": "S", "work_summary": "Nothing to fix."},
            )
            while answer["status"] == "needs_work":
                # Reviews come back as tasks the agent runs; none may fail an empty hand-in.
                raise AssertionError(answer)
        assert answer["status"] == "workflow_complete", answer
