"""Files changed per step run through ``manage.py mcpserve`` over stdio, in a real git
repository. The answers never wait for git: the server looks at the project right after each
transition commits, so the test waits for those looks in the database before it changes files
for the next step, as an agent reading its instructions first would."""

from __future__ import annotations

import asyncio
import time

import pytest

from tests.e2e.driver import Driver
from tests.support.step_files import git, make_repository, write
from workflows.models import Event, StepRun
from workflows.services.step_changes import run_files

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.e2e]


async def looked_at(step_id: str, *, recorded: bool = False) -> None:
    """Until the server has stored ``step_id``'s start snapshot (or its record)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        run = await StepRun.objects.filter(step_id=step_id).order_by("-id").afirst()
        if run is not None and (
            run.files_status != StepRun.FilesStatus.PENDING
            if recorded
            else run.files_snapshot is not None
        ):
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"the server never looked at the project for step {step_id}")


async def test_each_step_run_records_its_files_changed_over_stdio(demo_project):
    make_repository(demo_project)
    write(demo_project, "notes.md", "dirty before the workflow\n")  # left alone: not reported
    async with Driver(demo_project, env_extra={"DEEPWORK_STEP_FILES": "on"}) as agent:
        await agent.call(
            "start_workflow", {"goal": "e2e", "job_name": "demo", "workflow_name": "main"}
        )
        await looked_at("gather")
        write(demo_project, "research/found.md", "found\n")
        git(demo_project, "rm", "-q", "extra1.md")
        git(demo_project, "mv", "a.md", "a_renamed.md")
        write(demo_project, "a.md", "A\n")  # the output part_a hands in, new again
        step = await agent.call("finished_step", {"outputs": {"notes.md": "notes.md"}})
        assert step["begin_step"]["step_id"] == "part_a"
        await looked_at("part_a")
        write(demo_project, "b.md", "B, rewritten by part b\n")
        step = await agent.call("finished_step", {"outputs": {"a.md": "a.md", "b.md": "b.md"}})
        assert step["begin_step"]["step_id"] == "wrap_up"
        await looked_at("part_b", recorded=True)

    recorded = {
        run.step_id: run_files(run).as_dict()
        async for run in StepRun.objects.filter(status=StepRun.Status.COMPLETED).order_by("id")
    }
    assert recorded == {
        "gather": {
            "status": "recorded",
            "added": ["a_renamed.md", "research/found.md"],
            "modified": ["a.md"],
            "deleted": ["extra1.md"],
            "warnings": [],
        },
        "part_a": {
            "status": "recorded",
            "added": [],
            "modified": ["b.md"],
            "deleted": [],
            "warnings": [],
        },
        "part_b": {
            "status": "recorded",
            "added": [],
            "modified": ["b.md"],
            "deleted": [],
            "warnings": [],
        },
    }
    kinds = [e.kind async for e in Event.objects.filter(kind=Event.Kind.STEP_FILES_RECORDED)]
    assert len(kinds) == 3
    wrap_up = await StepRun.objects.aget(step_id="wrap_up")
    assert wrap_up.files_snapshot is not None
    assert wrap_up.files_snapshot["kind"] == "git"
