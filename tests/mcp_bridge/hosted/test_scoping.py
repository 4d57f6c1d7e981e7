"""Over ``/mcp``, every argument naming an agent or a DeepWork 0.14 stack is scoped under the
request's token: one token never registers, heartbeats or reports as another token's agent,
and two tokens using the same ``session_id`` keep two stacks. Real HTTP, real uvicorn."""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async
from django.test import Client as PageClient
from fastmcp import Client

from accounts.identity import token_scoped_agent_id
from accounts.models import ApiToken
from tests.mcp_bridge.hosted.conftest import Tokens, call, mcp_client
from tests.mcp_bridge.hosted.test_hosted_mcp import ACCEPT, post
from tests.support.demo14 import DEMO14_JOB
from tests.support.factories import make_user
from workflows.errors import Forbidden, InvalidInput
from workflows.models import Agent, WorkflowSession

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.e2e]

MODES = ["legacy", "auto"]


async def refused(client: Client, tool: str, args: dict[str, object]) -> str:
    """The error text of a call that must fail."""
    result = await client.call_tool(tool, args, raise_on_error=False)
    assert result.is_error, f"{tool} succeeded: {result.structured_content}"
    return result.content[0].text


def clients(web: str, tokens: Tokens, mode: str, toolsets: str) -> tuple[Client, Client]:
    url = f"{web}?toolsets={toolsets}"
    alice = mcp_client(url, tokens.bound, mode)
    bob = mcp_client(url, tokens.roaming, mode, **{"X-Deepwork-Project": str(tokens.project.pk)})
    return alice, bob


@pytest.mark.parametrize("mode", MODES)
async def test_a_token_acts_only_as_its_own_agents_in_the_agents_toolset(web, tokens, mode):
    alice, bob = clients(web, tokens, mode, "agents")
    alices_worker = f"{tokens.bound_agent}/worker"
    async with alice, bob:
        # A bare name is a sub-agent of the caller's token; the full id means the same.
        mine = await call(alice, "register_agent", {"agent_id": "worker", "roles": ["SWE"]})
        assert mine["agent_id"] == alices_worker
        again = await call(alice, "heartbeat", {"agent_id": alices_worker})
        assert again["agent_id"] == alices_worker
        itself = await call(alice, "register_agent", {"agent_id": tokens.bound_agent, "roles": []})
        assert itself["agent_id"] == tokens.bound_agent
        # The same bare name on another token is another agent.
        theirs = await call(bob, "register_agent", {"agent_id": "worker", "roles": ["QA"]})
        assert theirs["agent_id"] == f"{tokens.roaming_agent}/worker"

        # Acting as the other token's agents is refused, by name, and changes nothing.
        for tool, args in [
            ("register_agent", {"agent_id": alices_worker, "roles": ["QA"]}),
            ("heartbeat", {"agent_id": tokens.bound_agent}),
            ("get_my_assignments", {"agent_id": alices_worker}),
            ("await_assignment", {"agent_id": alices_worker, "timeout_s": 0}),
        ]:
            message = await refused(bob, tool, args)
            assert f"Agent {args['agent_id']!r} belongs to another API token" in message
            assert tokens.roaming_agent in message
        message = await refused(bob, "register_agent", {"agent_id": "two words", "roles": []})
        assert "got 'two words'" in message

        # A DAG defined by alice for her worker: only her worker may report its step.
        defined = await call(
            alice,
            "define_workflow",
            {
                "creator_id": "boss",
                "name": "scoped",
                "steps": [{"step_id": "a", "description": "do a", "assigned_agent_id": "worker"}],
            },
        )
        workflow_id = defined["workflow"]["workflow_id"]
        assert defined["workflow"]["creator_id"] == f"{tokens.bound_agent}/boss"
        assert defined["workflow"]["steps"][0]["assigned_agent_id"] == alices_worker
        message = await refused(
            bob,
            "execute_workflow",
            {"workflow_id": workflow_id, "triggering_agent_id": f"{tokens.bound_agent}/boss"},
        )
        assert "belongs to another API token" in message
        await call(
            alice, "execute_workflow", {"workflow_id": workflow_id, "triggering_agent_id": "boss"}
        )
        report = {"workflow_id": workflow_id, "step_id": "a", "result": "done"}
        message = await refused(
            bob, "report_step_completion", {**report, "agent_id": alices_worker}
        )
        assert "belongs to another API token" in message
        message = await refused(
            bob,
            "report_step_failure",
            {
                "workflow_id": workflow_id,
                "step_id": "a",
                "agent_id": alices_worker,
                "error_message": "sabotage",
            },
        )
        assert "belongs to another API token" in message
        # Bob's own "worker" is not the step's agent: the engine refuses it.
        await refused(bob, "report_step_completion", {**report, "agent_id": "worker"})
        message = await refused(
            bob,
            "delete_workflow",
            {"workflow_id": workflow_id, "requesting_agent_id": f"{tokens.bound_agent}/boss"},
        )
        assert "belongs to another API token" in message
        done = await call(alice, "report_step_completion", {**report, "agent_id": "worker"})
        assert done["workflow_status"] == "completed"
        # Naming another token's agent as a filter (not acting as it) is allowed.
        listed = await call(bob, "list_workflows", {"creator_id": f"{tokens.bound_agent}/boss"})
        assert [w["workflow_id"] for w in listed["workflows"]] == [workflow_id]

    roles = {
        agent.agent_id: agent.roles
        async for agent in Agent.objects.filter(agent_id__contains="/worker")
    }
    assert roles == {alices_worker: ["SWE"], f"{tokens.roaming_agent}/worker": ["QA"]}


DEMO = {"goal": "g", "job_name": "demo", "workflow_name": "main", "session_id": "shared"}


@pytest.mark.parametrize("mode", MODES)
async def test_two_tokens_with_one_session_id_keep_two_stacks(web, tokens, mode):
    alice, bob = clients(web, tokens, mode, "deepwork")
    async with alice, bob:
        started = await call(alice, "start_workflow", DEMO)
        # The caller sees its session_id as it gave it.
        assert started["begin_step"]["session_id"] == "shared"
        assert (await call(bob, "start_workflow", DEMO))["stack"] == [
            {"workflow": "demo/main", "step": "gather"}
        ]
        step = await call(
            alice, "finished_step", {"outputs": {"notes.md": "notes.md"}, "session_id": "shared"}
        )
        assert step["begin_step"]["session_id"] == "shared"
        assert step["stack"] == [{"workflow": "demo/main", "step": "part_a"}]
        # Bob's stack of the same name did not move, and a sub-agent of his is his alone.
        active = await call(bob, "get_active_workflow", {"session_id": "shared"})
        assert active["session_id"] == "shared"
        assert active["current_step"]["step_id"] == "gather"
        helper = {**DEMO, "agent_id": "helper"}
        assert len((await call(bob, "start_workflow", helper))["stack"]) == 2
        message = await refused(
            alice,
            "finished_step",
            {"outputs": {"notes.md": "notes.md"}, "session_id": "shared", "agent_id": "helper"},
        )
        assert "No active workflow" in message
        aborted = await call(bob, "abort_workflow", {"explanation": "x", "session_id": "shared"})
        assert aborted["stack"] == []
        active = await call(alice, "get_active_workflow", {"session_id": "shared"})
        assert active["current_step"]["step_id"] == "part_a"

        # Session jobs too: bob's "shared" conversation does not see alice's.
        job = DEMO14_JOB.replace("name: demo14", "name: mine")
        await call(
            alice,
            "register_session_job",
            {"job_name": "mine", "job_definition_yaml": job, "session_id": "shared"},
        )
        mine = await call(alice, "get_session_job", {"job_name": "mine", "session_id": "shared"})
        assert mine["job_definition_yaml"] == job
        theirs = await call(bob, "get_session_job", {"job_name": "mine", "session_id": "shared"})
        assert theirs["error"] == "Session job 'mine' not found for session 'shared'."

        long_id = "x" * 100
        message = await refused(alice, "start_workflow", {**DEMO, "session_id": long_id})
        assert "Over /mcp a session_id may be at most" in message

    kept = {
        (s.conversation_id, s.agent.agent_id)
        async for s in WorkflowSession.objects.select_related("agent")
    }
    alice_pk, bob_pk = (
        tokens.bound_agent.split("-")[1],
        tokens.roaming_agent.split("-")[1],
    )
    assert kept == {
        (f"token-{alice_pk}:shared", f"dw14:token-{alice_pk}:shared"),
        (f"token-{bob_pk}:shared", f"dw14:token-{bob_pk}:shared"),
        (f"token-{bob_pk}:shared", f"dw14:token-{bob_pk}:shared/helper"),
    }


def test_scoping_rules():
    base = "token-7-laptop"

    def scoped(agent_id: str, acting: bool) -> str:
        return token_scoped_agent_id(token_id=7, own=base, agent_id=agent_id, acting=acting)

    def acting(agent_id: str) -> str:
        return scoped(agent_id, True)

    assert acting(base) == base
    assert acting("w") == f"{base}/w"
    assert acting(f"{base}/w") == f"{base}/w"
    assert scoped("token-99-x/w", False) == "token-99-x/w"
    # Another token's agent is not bad input but not this token's to use: refused as such.
    for other in ("token-99-x/w", "token-99"):
        with pytest.raises(Forbidden, match="belongs to another API token"):
            acting(other)
    for bad, says in [
        # This token's number but not its name: not one of its agents.
        ("token-7", "got 'token-7'"),
        (f"{base}/a/b", "got"),
        ("", "got ''"),
        ("x" * 65, "got"),
    ]:
        with pytest.raises(InvalidInput, match=says):
            acting(bad)


# --- A hosted agent's heartbeat and roles, as the agents page shows them ----------------------


def agents_page() -> str:
    watcher = make_user(username="watcher", perms=("workflows.view_workflowsession",))
    page = PageClient()
    page.force_login(watcher)
    response = page.get("/agents/")
    assert response.status_code == 200
    return response.content.decode()


async def test_hosted_agents_heartbeat_and_have_roles_on_the_agents_page(web, tokens):
    token = await ApiToken.objects.aget(pk=int(tokens.bound_agent.split("-")[1]))
    token.mcp_roles = ["swe", "qa"]
    await token.asave(update_fields=["mcp_roles"])
    itself = mcp_client(web, tokens.bound, "auto")
    # A sub-agent named by header takes the roles its header names.
    reviewer = mcp_client(
        web, tokens.bound, "legacy", **{"X-Deepwork-Agent": "rev", "X-Deepwork-Roles": "review"}
    )
    async with itself, reviewer:
        await itself.list_tools()
        await reviewer.list_tools()
    rows = {
        a.agent_id: (a.roles, a.heartbeat_at is not None, a.takes_dag_steps)
        async for a in Agent.objects.filter(agent_id__startswith="token-")
    }
    assert rows == {
        tokens.bound_agent: (["swe", "qa"], True, True),
        f"{tokens.bound_agent}/rev": (["review"], True, True),
    }
    page = await sync_to_async(agents_page)()
    assert f'data-agent-id="{tokens.bound_agent}" data-responsive="true"' in page
    assert "swe, qa" in page
    assert f'data-agent-id="{tokens.bound_agent}/rev" data-responsive="true"' in page

    # Bad roles in the header: refused before anything changes.
    status, body = post(
        web,
        {**ACCEPT, "Authorization": f"Bearer {tokens.bound}", "X-Deepwork-Roles": "a," + "x" * 129},
    )
    assert status == 400
    assert "X-Deepwork-Roles: Roles are names of 1 to 128 characters" in body
    assert (await Agent.objects.aget(agent_id=tokens.bound_agent)).roles == ["swe", "qa"]
