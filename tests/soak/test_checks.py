"""The soak's consistency checks see each kind of disagreement they exist to catch.

The soak only reports what these checks find, so each check is shown here to fire on rows
broken on purpose, after a clean run through the real MCP tools finds nothing.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from django.db.models import F
from fastmcp import Client

from insights.models import AgentTally
from mcp_bridge.server import create_server
from reviews.models import ReviewResult
from tests.soak.kill_soak import Database, Frame, matches, write_project
from workflows.models import Event, StepRun, WorkflowSession

pytestmark = [pytest.mark.django_db(transaction=True)]
OVERRIDE = "Checked against every criterion."


async def drive(project: Path) -> None:
    """A nested workflow completed on top of one that stops at its last step."""
    async with Client(create_server(project), mode="legacy") as client:

        async def call(tool: str, **args) -> dict:
            result = await client.call_tool(tool, args, raise_on_error=False)
            assert not result.is_error, result.content[0].text
            return json.loads(result.content[0].text)

        await call("start_workflow", goal="g", job_name="soak", workflow_name="main")
        await call("finished_step", outputs={"notes.md": "notes.md"})
        both = {"left.md": "left.md", "right.md": "right.md"}
        await call("finished_step", outputs=both, quality_review_override_reason=OVERRIDE)
        answer = await call("finished_step", outputs={"draft.md": "draft.md"})
        assert answer["status"] == "needs_work"  # a self-review is requested first
        draft = {"draft.md": "draft.md"}
        await call("finished_step", outputs=draft, quality_review_override_reason=OVERRIDE)
        await call("start_workflow", goal="side", job_name="side", workflow_name="only")
        answer = await call("finished_step", outputs={"side.md": "side.md"})
        assert answer["status"] == "workflow_complete"


@pytest.fixture
def soaked(project_dir: Path) -> Database:
    write_project(project_dir)
    asyncio.run(drive(project_dir))
    db = Database(project_dir)
    assert db.invariants() == []
    return db


def active_session() -> WorkflowSession:
    return WorkflowSession.objects.get(status="active")


def break_rows(kind: str) -> None:
    session = active_session()
    if kind == "lost step_finished":
        Event.objects.filter(session=session, kind="step_finished").last().delete()
    elif kind == "run left active":
        WorkflowSession.objects.filter(pk=session.pk).update(current_entry_index=2)
    elif kind == "pass without advance":
        Event.objects.create(
            project=session.project,
            session=session,
            kind="review_passed",
            payload={
                "step_ids": [session.current_step_id],
                "attempt": 1,
                "reviews": 1,
                "failed": 0,
                "override_reason": None,
            },
        )
    elif kind == "verdict lost":
        ReviewResult.objects.filter(session=session).last().delete()
    elif kind == "revision off":
        WorkflowSession.objects.filter(pk=session.pk).update(revision=session.revision + 1)
    elif kind == "finished session with a live run":
        done = WorkflowSession.objects.get(status="completed")
        StepRun.objects.filter(session=done).update(status="active")
    elif kind == "doubled start":
        Event.objects.create(project=session.project, session=session, kind="session_started")
    elif kind == "tally off":
        AgentTally.objects.filter(period="day").update(steps_finished=F("steps_finished") + 1)


FINDINGS = {
    "lost step_finished": "but step_finished",
    "run left active": "but its current entry 2 is ['draft']",
    "pass without advance": "did not advance",
    "verdict lost": "override review_passed events stand for 3 verdicts",
    "revision off": "transitions",
    "finished session with a live run": "1 active runs left",
    "doubled start": "2 session_started events",
    "tally off": "agents tallies differ from a recount",
}


@pytest.mark.parametrize("kind", FINDINGS)
def test_each_broken_row_is_reported(soaked, kind):
    break_rows(kind)
    problems = soaked.invariants()
    assert any(FINDINGS[kind] in problem for problem in problems), problems


def test_a_stack_matches_before_or_after_and_a_new_session_may_have_any_id():
    outer = Frame("s1", "soak", "main", 1)
    assert matches((outer,), (outer,)) == (outer,)
    assert matches((), ()) == ()
    new = Frame(None, "side", "only", 0)
    landed = (outer, Frame("s2", "side", "only", 0))
    assert matches((outer, new), landed) == landed
    assert matches((outer,), landed) is None
    assert matches((Frame("s1", "soak", "main", 2),), (outer,)) is None
