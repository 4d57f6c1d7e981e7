"""The standard ``deepwork_jobs`` over stdio: ``--generation 0.14`` offers 0.14's authoring
workflows, and ``new_job`` authors a 0.14-format job; ``both`` keeps 0.9.1's set."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.driver import Driver

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.e2e]

AUTHORED = """\
name: weekly_report
summary: "Write the weekly status report"
step_arguments:
  - name: week
    description: "The ISO week, e.g. 2026-W47"
    type: string
  - name: report.md
    description: "The report"
    type: file_path
workflows:
  write:
    summary: "Write it"
    steps:
      - name: draft
        instructions: "Write report.md for the given week."
        inputs:
          week: {}
        outputs:
          report.md: {}
"""
JOB_PATH = ".deepwork/jobs/weekly_report/job.yml"


def standard(listing: dict) -> dict:
    [job] = [job for job in listing["jobs"] if job["name"] == "deepwork_jobs"]
    return job


async def test_014_new_job_authors_a_014_job(demo_project: Path) -> None:
    async with Driver(demo_project, "--generation", "0.14") as agent:
        listing = await agent.call("get_workflows")
        assert [w["name"] for w in standard(listing)["workflows"]] == [
            "new_job",
            "repair",
            "learn",
            "shared_jobs",
        ]
        started = await agent.call(
            "start_workflow",
            {
                "goal": "a weekly report job",
                "job_name": "deepwork_jobs",
                "workflow_name": "new_job",
                "session_id": "S",
                "inputs": {"job_purpose": "Write the weekly status report every Friday"},
            },
        )
        step = started["begin_step"]
        assert step["step_id"] == "define"
        assert step["step_inputs"][0]["value"] == "Write the weekly status report every Friday"
        assert "The 0.14 job format" in step["common_job_info"]
        assert [o["name"] for o in step["step_expected_outputs"]] == ["job.yml"]
        assert started["stack"] == [{"workflow": "deepwork_jobs/new_job", "step": "define"}]

        # A 0.9.1-format file fails the output's json_schema before any review.
        job_file = demo_project / JOB_PATH
        job_file.parent.mkdir(parents=True)
        job_file.write_text('name: weekly_report\nversion: "1.0.0"\nsummary: s\nsteps: []\n')
        hand_in = {"outputs": {"job.yml": JOB_PATH}, "session_id": "S", "work_summary": "Wrote it."}
        refused = await agent.call("finished_step", hand_in)
        assert refused["status"] == "needs_work"
        assert refused["feedback"].startswith("JSON schema validation failed:")
        assert "'step_arguments' is a required property" in refused["feedback"]

        # The 0.14 file passes the schema; the argument's review comes back as a task.
        job_file.write_text(AUTHORED)
        reviewed = await agent.call("finished_step", hand_in)
        assert reviewed["status"] == "needs_work"
        assert "JSON schema" not in reviewed["feedback"]
        assert "deepwork_jobs" in reviewed["feedback"]

        advanced = await agent.call(
            "finished_step", {**hand_in, "quality_review_override_reason": "reviewed by hand"}
        )
        assert advanced["status"] == "next_step"
        assert advanced["begin_step"]["step_id"] == "implement"
        assert advanced["begin_step"]["step_inputs"][0]["value"] == JOB_PATH

        # The authored job validates with this server's 0.14 rules: listed, no errors.
        listing = await agent.call("get_workflows")
        assert not listing["errors"]
        [authored] = [job for job in listing["jobs"] if job["name"] == "weekly_report"]
        assert [w["name"] for w in authored["workflows"]] == ["write"]


async def test_both_keeps_the_091_set(demo_project: Path) -> None:
    async with Driver(demo_project, "--generation", "both") as agent:
        listing = await agent.call("get_workflows")
        assert [w["name"] for w in standard(listing)["workflows"]] == ["new_job", "repair"]
