"""Over hosted ``/mcp`` (real uvicorn, real HTTP): another token may neither execute nor cancel
a DAG workflow it did not define, directly or through the workflow's own tool, and a browser
page on another loopback port may not call ``/mcp`` at all."""

from __future__ import annotations

import pytest
from fastmcp import Client

from tests.mcp_bridge.hosted.conftest import Tokens, call, mcp_client
from tests.mcp_bridge.hosted.test_hosted_mcp import ACCEPT, message, post
from workflows.models import WorkflowSession

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.e2e]

STEPS = [{"step_id": "a", "description": "do a", "assigned_role": "swe"}]


async def refused(client: Client, tool: str, args: dict[str, object]) -> str:
    result = await client.call_tool(tool, args, raise_on_error=False)
    assert result.is_error, f"{tool} succeeded: {result.structured_content}"
    return result.content[0].text


async def test_another_token_neither_executes_nor_cancels_a_workflow_it_did_not_define(
    web: str, tokens: Tokens
):
    url = f"{web}?toolsets=agents,workflow-tools"
    alice = mcp_client(url, tokens.bound, "auto")
    bob = mcp_client(url, tokens.roaming, "auto", **{"X-Deepwork-Project": str(tokens.project.pk)})
    async with alice, bob:
        creator = tokens.bound_agent
        defined = await call(
            alice, "define_workflow", {"name": "ship", "steps": STEPS, "creator_id": creator}
        )
        workflow_id = defined["workflow"]["workflow_id"]
        says = (
            f"Only the workflow's creator ({creator!r}), its sub-agents ({creator}/<name>) or a "
            f"person with the permission may execute workflow {workflow_id!r}; "
        )
        # As itself: not the creator's family.
        text = await refused(
            bob, "execute_workflow", {"workflow_id": workflow_id, "triggering_agent_id": "me"}
        )
        assert says + f"'{tokens.roaming_agent}/me' may not" in text
        # Through the workflow's own tool, with and without claiming the creator.
        tool = next(t.name for t in await bob.list_tools() if t.name.startswith("workflow_ship"))
        text = await refused(bob, tool, {})
        assert says + f"{tokens.roaming_agent!r} may not" in text
        text = await refused(bob, tool, {"triggering_agent_id": creator})
        assert f"Agent {creator!r} belongs to another API token" in text
        assert not await WorkflowSession.objects.filter(session_id=workflow_id).aexists()

        # The creator's sub-agent executes it (a bare name is one of the caller's).
        await call(alice, tool, {"triggering_agent_id": "boss"})
        run = f"dag:{workflow_id}"
        text = await refused(bob, "cancel_workflow_run", {"run_id": run, "reason": "mine now"})
        assert f"may cancel its run; {tokens.roaming_agent!r} may not" in text
        session = await WorkflowSession.objects.aget(session_id=workflow_id)
        assert session.status == WorkflowSession.Status.RUNNING
        # The creator's family may.
        await call(alice, "cancel_workflow_run", {"run_id": run, "reason": "done with it"})
        session = await WorkflowSession.objects.aget(session_id=workflow_id)
        assert session.status == WorkflowSession.Status.FAILED


def test_only_the_requests_own_origin_may_call_mcp(web: str, tokens: Tokens):
    port = web.split(":")[2].split("/")[0]
    bound = {**ACCEPT, "Authorization": f"Bearer {tokens.bound}"}
    assert post(web, {**bound, "Origin": f"http://127.0.0.1:{port}"})[0] == 200
    for other in ("http://127.0.0.1:9999", "http://localhost:9999", f"https://127.0.0.1:{port}"):
        status, text = post(web, {**bound, "Origin": other})
        assert status == 403, other
        assert message(text) == (
            f"Origin {other!r} is not this server's own (http://127.0.0.1:{port}); a browser "
            "page may call /mcp only from there or from an origin listed in CSRF_TRUSTED_ORIGINS"
        )


async def test_another_token_moves_no_session_it_does_not_hold(web: str, tokens: Tokens):
    alice = mcp_client(web, tokens.bound, "auto")
    bob = mcp_client(web, tokens.roaming, "auto", **{"X-Deepwork-Project": str(tokens.project.pk)})
    async with alice, bob:
        started = await call(
            alice, "start_workflow", {"goal": "hers", "job_name": "demo", "workflow_name": "main"}
        )
        session_id = started["begin_step"]["session_id"]
        says = f"The session is agent {tokens.bound_agent!r}'s; "
        for tool, args in (
            ("finished_step", {"outputs": {"notes.md": "notes.md"}, "session_id": session_id}),
            ("go_to_step", {"step_id": "gather", "session_id": session_id}),
            ("abort_workflow", {"explanation": "mine now", "session_id": session_id}),
        ):
            text = await refused(bob, tool, args)
            assert says in text, text
        session = await WorkflowSession.objects.aget(session_id=session_id)
        assert (session.status, session.current_step_id) == ("active", "gather")
        # Its own token moves it as before.
        moved = await call(
            alice, "finished_step", {"outputs": {"notes.md": "notes.md"}, "session_id": session_id}
        )
        assert moved["status"] == "next_step"
