"""``/mcp`` of the web server over real HTTP: uvicorn serving ``deepwork_site.asgi`` on the test
database, FastMCP clients in both protocol eras, each API token its own agent."""

from __future__ import annotations

import asyncio
import http.client
import json
import sys
import textwrap
from pathlib import Path

import pytest
from asgiref.sync import sync_to_async
from django.test import Client as PageClient
from fastmcp import Client as FastMCPClient
from mcp.shared.exceptions import MCPError

from accounts.models import ApiToken
from accounts.services import api_token_create, api_token_revoke
from mcp_bridge.server import create_server
from tests.mcp_bridge.hosted.conftest import DRIVE, Tokens, call, mcp_client, start_web
from tests.support.factories import make_user
from tests.support.processes import stop
from workflows.models import Agent, Event, WorkflowSession

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.e2e]

MODES = ["legacy", "auto"]


async def run_demo(client, goal: str) -> str:
    """The demo workflow start to finish; every answer shows this agent's stack alone."""
    started = await call(
        client, "start_workflow", {"goal": goal, "job_name": "demo", "workflow_name": "main"}
    )
    assert started["stack"] == [{"workflow": "demo/main", "step": "gather"}]
    step = await call(client, "finished_step", {"outputs": {"notes.md": "notes.md"}})
    assert step["begin_step"]["step_id"] == "part_a"
    assert len(step["stack"]) == 1
    step = await call(client, "finished_step", {"outputs": {"a.md": "a.md", "b.md": "b.md"}})
    assert step["stack"] == [{"workflow": "demo/main", "step": "wrap_up"}]
    # The summary is reviewed: self-review first, then the agent's own verdict.
    step = await call(client, "finished_step", {"outputs": {"summary.md": "summary.md"}})
    assert step["status"] == "needs_work"
    step = await call(
        client,
        "finished_step",
        {"outputs": {"summary.md": "summary.md"}, "quality_review_override_reason": "checked"},
    )
    assert step["status"] == "workflow_complete"
    assert step["stack"] == []
    return started["begin_step"]["session_id"]


def sessions_page(agent_id: str) -> str:
    watcher = make_user(
        username=f"watcher-{agent_id[:20]}", perms=("workflows.view_workflowsession",)
    )
    page = PageClient()
    page.force_login(watcher)
    response = page.get("/sessions/", {"agent": agent_id})
    assert response.status_code == 200
    return response.content.decode()


@pytest.mark.parametrize("mode", MODES)
async def test_two_tokens_are_two_agents_with_their_own_stacks(web, tokens: Tokens, mode):
    bound = mcp_client(web, tokens.bound, mode)
    # The roaming token names the project per request, here by its root path.
    roaming = mcp_client(
        web, tokens.roaming, mode, **{"X-Deepwork-Project": tokens.project.root_path}
    )
    async with bound, roaming:
        listed = await call(bound, "get_workflows")
        assert [job["name"] for job in listed["jobs"]][:2] == ["demo", "nested"]
        # Interleaved on one server: each answer shows only its caller's stack.
        ours, theirs = await asyncio.gather(run_demo(bound, "alice's"), run_demo(roaming, "bob's"))

    sessions = {
        s.session_id: s.agent.agent_id
        async for s in WorkflowSession.objects.select_related("agent").all()
    }
    assert sessions == {ours: tokens.bound_agent, theirs: tokens.roaming_agent}
    # Every event of a session names its agent.
    for session_id, agent_id in sessions.items():
        agents = {
            e.agent.agent_id
            async for e in Event.objects.filter(session__session_id=session_id).select_related(
                "agent"
            )
        }
        assert agents == {agent_id}
    # The dashboard's session list shows each session under its agent.
    ours_page = await sync_to_async(sessions_page)(tokens.bound_agent)
    theirs_page = await sync_to_async(sessions_page)(tokens.roaming_agent)
    assert ours in ours_page
    assert tokens.bound_agent in ours_page
    assert theirs not in ours_page
    assert theirs in theirs_page
    assert ours not in theirs_page


@pytest.mark.parametrize("mode", MODES)
async def test_sub_agents_of_one_token_have_their_own_stacks(web, tokens: Tokens, mode):
    first = mcp_client(web, tokens.bound, mode, **{"X-Deepwork-Agent": "writer"})
    second = mcp_client(web, tokens.bound, mode, **{"X-Deepwork-Agent": "reviewer"})
    itself = mcp_client(web, tokens.bound, mode)
    async with first, second, itself:
        start = {"goal": "g", "job_name": "nested", "workflow_name": "only"}
        assert (await call(first, "start_workflow", start))["stack"] == [
            {"workflow": "nested/only", "step": "first"}
        ]
        assert len((await call(second, "start_workflow", start))["stack"]) == 1
        # The token's own agent has no workflow: nothing to finish.
        result = await itself.call_tool(
            "finished_step", {"outputs": {"first.md": "first.md"}}, raise_on_error=False
        )
        assert result.is_error
        step = await call(first, "finished_step", {"outputs": {"first.md": "first.md"}})
        assert step["stack"] == [{"workflow": "nested/only", "step": "second"}]
    owners = sorted(
        [s.agent.agent_id async for s in WorkflowSession.objects.select_related("agent")]
    )
    assert owners == [f"{tokens.bound_agent}/reviewer", f"{tokens.bound_agent}/writer"]


async def test_toolsets_are_chosen_per_url(web, tokens: Tokens):
    async with mcp_client(web, tokens.bound, "auto") as default:
        names = {tool.name for tool in await default.list_tools()}
    assert "get_workflows" in names
    assert "tracker_start_workflow" not in names
    async with mcp_client(web + "?toolsets=deepwork,tracker", tokens.bound, "legacy") as both:
        names = {tool.name for tool in await both.list_tools()}
        started = await call(
            both,
            "tracker_start_workflow",
            {"name": "hosted", "profile": "simple", "total_phases": 1},
        )
    assert {"get_workflows", "tracker_start_workflow", "tracker_complete_task"} <= names
    assert started["workflow_id"]
    # Every toolset `mcpserve --toolsets` knows plugs in by name.
    async with mcp_client(web + "?toolsets=workflow-tools", tokens.bound, "auto") as published:
        names = {tool.name for tool in await published.list_tools()}
        refreshed = await published.call_tool("refresh_workflow_tools", {}, raise_on_error=False)
    assert {"refresh_workflow_tools", "get_workflow_status", "cancel_workflow_run"} <= names
    assert not refreshed.is_error
    async with mcp_client(web + "?toolsets=agents", tokens.bound, "legacy") as dag:
        registered = await call(dag, "register_agent", {"agent_id": "qa-1", "roles": ["QA"]})
    # Over /mcp a bare agent id is a sub-agent of the token (test_scoping.py beside this).
    assert registered["agent_id"] == f"{tokens.bound_agent}/qa-1"


# --- Refusals: raw requests, so the status and body are exactly what the server sent ----------

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"},
    },
}
ACCEPT = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def post(url: str, headers: dict[str, str], body: bytes | None = None) -> tuple[int, str]:
    """POST an initialize (or ``body``) to ``url`` with exactly these headers."""
    host, rest = url.removeprefix("http://").split("/", 1)
    conn = http.client.HTTPConnection(host, timeout=20)
    conn.putrequest("POST", "/" + rest, skip_host=True, skip_accept_encoding=True)
    data = body if body is not None else json.dumps(INITIALIZE).encode()
    for name, value in {"Host": host, **headers, "Content-Length": str(len(data))}.items():
        conn.putheader(name, value)
    conn.endheaders(data)
    response = conn.getresponse()
    status, text = response.status, response.read().decode(errors="replace")
    conn.close()
    return status, text


def message(text: str) -> str:
    return json.loads(text)["error"]["message"]


def counts() -> tuple[int, int, int]:
    return Agent.objects.count(), WorkflowSession.objects.count(), Event.objects.count()


def test_refusals_say_why_and_change_nothing(web, tokens: Tokens, transactional_db):
    port = web.split(":")[2].split("/")[0]
    bound = {**ACCEPT, "Authorization": f"Bearer {tokens.bound}"}
    roaming = {**ACCEPT, "Authorization": f"Bearer {tokens.roaming}"}
    carol = make_user(username="carol")  # may not drive sessions
    _, no_mcp = api_token_create(user=make_user(username="dave", perms=(DRIVE,)), name="rest")
    _, powerless = api_token_create(user=carol, name="mcp", mcp=True)
    other = tokens.project.pk + 1000
    before = counts()

    assert post(web, ACCEPT)[0] == 401
    status, text = post(web, {**ACCEPT, "Authorization": "Bearer dwk_wrong"})
    assert (status, message(text)) == (
        401,
        "The token is unknown or revoked, or its user is inactive",
    )
    status, text = post(web, {**ACCEPT, "Authorization": f"Bearer {no_mcp}"})
    assert status == 403
    assert "may not use MCP" in message(text)
    status, text = post(
        web + f"?project={tokens.project.pk}", {**ACCEPT, "Authorization": f"Bearer {powerless}"}
    )
    assert (status, message(text)) == (403, f"This needs the permission '{DRIVE}'")
    # The Host and Origin guard of `mcpserve --transport http`, before the token is looked at.
    assert post(web, {**bound, "Host": "evil.example.com"}) == (421, "Misdirected Request")
    assert post(web, {**ACCEPT, "Host": "evil.example.com"})[0] == 421
    assert post(web, {**bound, "Origin": "http://evil.example.com"}) == (403, "Forbidden Origin")
    # Projects: a bound token keeps to its own; an unbound one must name an existing one.
    status, text = post(web + f"?project={other}", bound)
    assert status == 403
    assert f"may use only project {tokens.project.pk}" in message(text)
    status, text = post(web, roaming)
    assert status == 400
    assert message(text).startswith("Name the project")
    status, text = post(web, {**roaming, "X-Deepwork-Project": str(other)})
    assert (status, message(text)) == (404, f"No project '{other}' (give its id or root path)")
    status, text = post(web + "?toolsets=deepwork,nope", bound)
    assert status == 400
    assert "Unknown toolset 'nope'" in message(text)
    status, text = post(web, {**bound, "X-Deepwork-Agent": "../escape"})
    assert status == 400
    assert "X-Deepwork-Agent must be 1 to 64" in message(text)
    # The SDK's body limit, as for `mcpserve --transport http`.
    assert post(web, bound, b" " * (4 * 1024 * 1024 + 1))[0] == 413
    assert counts() == before
    assert post(web, {**bound, "Origin": f"http://127.0.0.1:{port}"})[0] == 200


# --- A revoked token -----------------------------------------------------------------------

# A reviewer that says it started, then waits (at most 30 s) for the test to let it finish.
SLOW_REVIEWER = textwrap.dedent(
    """\
    import pathlib, sys, time
    pathlib.Path(sys.argv[1]).touch()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not pathlib.Path(sys.argv[2]).exists():
        time.sleep(0.05)
    sys.stdin.read()
    print('{"passed": true, "feedback": "fine", "criteria_results": []}')
    """
)


@pytest.mark.parametrize("mode", MODES)
async def test_a_token_revoked_mid_call_is_cut_off_and_refused_after(
    tokens: Tokens, tmp_path: Path, mode
):
    script, started, release = tmp_path / "reviewer.py", tmp_path / "started", tmp_path / "go"
    script.write_text(SLOW_REVIEWER)
    process, url = start_web(
        DEEPWORK_MCP_EXTERNAL_RUNNER_CMD=f"{sys.executable} {script} {started} {release}"
    )
    try:
        async with mcp_client(url, tokens.bound, mode) as agent:
            await call(
                agent, "start_workflow", {"goal": "g", "job_name": "demo", "workflow_name": "main"}
            )
            await call(agent, "finished_step", {"outputs": {"notes.md": "notes.md"}})
            await call(agent, "finished_step", {"outputs": {"a.md": "a.md", "b.md": "b.md"}})
            # The wrap-up's review runs as long as the test lets it: the call stays open.
            handing_in = asyncio.ensure_future(
                agent.call_tool("finished_step", {"outputs": {"summary.md": "summary.md"}})
            )
            for _ in range(400):
                if started.exists() or handing_in.done():
                    break
                await asyncio.sleep(0.05)
            assert started.exists(), "the review never started"
            token = await ApiToken.objects.aget(mcp=True, mcp_project=tokens.project)
            await sync_to_async(api_token_revoke)(token=token)
            # The open call ends with an error naming the revocation, long before the review.
            with pytest.raises(MCPError, match="API token of this request was revoked"):
                await asyncio.wait_for(handing_in, timeout=15)
        release.touch()
        status, text = post(url, {**ACCEPT, "Authorization": f"Bearer {tokens.bound}"})
        assert status == 401
        # The hand-in never completed: the session is still at its wrap-up.
        session = await WorkflowSession.objects.aget()
        assert (session.status, session.current_step_id) == ("active", "wrap_up")
    finally:
        release.touch()
        stop(process)


async def test_input_is_refused_as_over_stdio(web, tokens: Tokens, demo_project: Path):
    """The same limits and messages as ``mcpserve`` (here its server in memory)."""
    bad_calls = [
        ("start_workflow", {"goal": "x" * 1_000_001, "job_name": "demo", "workflow_name": "main"}),
        ("start_workflow", {"goal": "g", "job_name": "nope", "workflow_name": "main"}),
        ("start_workflow", {"goal": "g\x00", "job_name": "demo", "workflow_name": "main"}),
        ("finished_step", {"outputs": {"notes.md": "/etc/passwd"}}),
        ("get_workflows", {"unexpected": 1}),
    ]

    async def errors(client) -> list[str]:
        found = []
        async with client:
            for tool, args in bad_calls:
                result = await client.call_tool(tool, args, raise_on_error=False)
                assert result.is_error, tool
                found.append(result.content[0].text)
        return found

    hosted = await errors(mcp_client(web, tokens.bound, "auto"))
    stdio_server = await sync_to_async(create_server)(demo_project)
    assert hosted == await errors(FastMCPClient(stdio_server))
    assert "goal is 1,000,001 characters; the limit is 1,000,000" in hosted[0]
    assert await WorkflowSession.objects.acount() == 0


def test_allowed_hosts_setting_names_the_hosts_served(tokens: Tokens):
    process, url = start_web(ALLOWED_HOSTS="deepwork.example.lan,.agents.example.lan")
    port = url.split(":")[2].split("/")[0]
    bound = {**ACCEPT, "Authorization": f"Bearer {tokens.bound}"}
    try:
        for allowed in (
            f"deepwork.example.lan:{port}",
            "agents.example.lan",
            f"a.agents.example.lan:{port}",
            f"localhost:{port}",
        ):
            assert post(url, {**bound, "Host": allowed})[0] == 200, allowed
        for refused in ("example.lan", f"deepwork.example.lan.evil.com:{port}", "10.0.0.1"):
            assert post(url, {**bound, "Host": refused})[0] == 421, refused
        # A page on an allowed host may not call /mcp from elsewhere.
        foreign = {**bound, "Host": "deepwork.example.lan", "Origin": "http://evil.example.com"}
        assert post(url, foreign)[0] == 403
    finally:
        stop(process)
