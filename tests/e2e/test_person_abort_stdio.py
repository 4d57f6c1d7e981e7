"""A person aborts an agent's session from outside (the dashboard's service): the agent's next
hand-in that would have acted on it is told once who aborted it, when and why, in both
generations; then the server answers as it always did."""

from __future__ import annotations

from pathlib import Path

import pytest
from channels.db import database_sync_to_async
from django.contrib.auth import get_user_model

from tests.e2e.driver import Driver
from workflows.models import WorkflowSession
from workflows.services.sessions import session_abort

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.e2e]

REASON = "Wrong ticket: the customer cancelled"


@database_sync_to_async
def abort_as_person(session_id: str) -> None:
    alice = get_user_model().objects.get_or_create(username="alice")[0]
    session = WorkflowSession.objects.select_related("project", "agent").get(session_id=session_id)
    session_abort(
        project=session.project,
        agent=session.agent,
        explanation=REASON,
        session_id=session.session_id,
        by=alice,
    )


def told(text: str, session_id: str, workflow: str) -> None:
    assert f"Session '{session_id}' ({workflow}) was aborted by alice at " in text
    assert f"UTC. Their reason: {REASON}. Nothing was handed in." in text


async def test_the_first_generation_tells_the_agent_once(demo_project: Path) -> None:
    async with Driver(demo_project, "--generation", "0.9") as agent:
        started = await agent.call(
            "start_workflow", {"goal": "g", "job_name": "demo", "workflow_name": "quick"}
        )
        session_id = started["begin_step"]["session_id"]
        await abort_as_person(session_id)

        first = await agent.call_error("finished_step", {"outputs": {"notes.md": "notes.md"}})
        told(first, session_id, "demo/quick")
        again = await agent.call_error("finished_step", {"outputs": {"notes.md": "notes.md"}})
        assert "No active workflow session. Use start_workflow to begin a workflow." in again
        assert "alice" not in again


async def test_a_nested_session_aborted_is_told_before_the_one_below_moves(
    demo_project: Path,
) -> None:
    async with Driver(demo_project, "--generation", "0.9") as agent:
        await agent.call(
            "start_workflow", {"goal": "g", "job_name": "demo", "workflow_name": "quick"}
        )
        nested = await agent.call(
            "start_workflow", {"goal": "n", "job_name": "nested", "workflow_name": "only"}
        )
        nested_id = nested["begin_step"]["session_id"]
        await abort_as_person(nested_id)

        # Without the notice this hand-in would have finished the session below instead.
        first = await agent.call_error("finished_step", {"outputs": {"first.md": "first.md"}})
        told(first, nested_id, "nested/only")
        done = await agent.call("finished_step", {"outputs": {"notes.md": "notes.md"}})
        assert done["status"] == "workflow_complete"


async def test_the_later_generation_tells_the_conversation_once(demo_project: Path) -> None:
    async with Driver(demo_project, "--generation", "0.14") as agent:
        started = await agent.call(
            "start_workflow",
            {"goal": "g", "job_name": "demo", "workflow_name": "quick", "session_id": "C1"},
        )
        session = await WorkflowSession.objects.aget(conversation_id="C1")
        assert started["begin_step"]["step_id"] == "gather"
        await abort_as_person(session.session_id)

        hand_in = {"outputs": {"notes.md": "notes.md"}, "session_id": "C1"}
        first = await agent.call_error("finished_step", hand_in)
        told(first, session.session_id, "demo/quick")
        assert "Call finished_step again with the same session_id" in first
        again = await agent.call_error("finished_step", hand_in)
        assert again.endswith("until you get back to your prior step.")
        assert "alice" not in again


async def test_an_abort_below_a_nested_session_is_not_announced(demo_project: Path) -> None:
    async with Driver(demo_project, "--generation", "0.9") as agent:
        below = await agent.call(
            "start_workflow", {"goal": "g", "job_name": "demo", "workflow_name": "quick"}
        )
        await agent.call(
            "start_workflow", {"goal": "n", "job_name": "nested", "workflow_name": "only"}
        )
        await abort_as_person(below["begin_step"]["session_id"])
        # The hand-in goes to the nested session on top, as before.
        moved = await agent.call("finished_step", {"outputs": {"first.md": "first.md"}})
        assert moved["status"] == "next_step"
