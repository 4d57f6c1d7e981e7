"""Issue 9 point 12: one set of input limits, whichever interface a field arrives through.

Each field the defect report named is sent over MCP (an in-memory FastMCP client), REST (a
token) and, where the dashboard takes it, a dashboard form; each is refused with a message
naming the field and the limit, and nothing is left behind. Only the interfaces' public
behaviour is used: tool errors, HTTP answers, flash messages.
"""

from __future__ import annotations

import html
import json
import re
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.test import Client as HttpClient
from fastmcp import Client

from accounts.services import api_token_create
from mcp_bridge.server import create_server
from tests.support.factories import make_user
from workflows.models import Agent, Event, WorkflowSession
from workflows.services.projects import project_add

pytestmark = pytest.mark.django_db(transaction=True)

TOO_LONG_GOAL = "x" * 1_000_001
GOAL_REFUSED = "goal is 1,000,001 characters; the limit is 1,000,000"
CONTROL = "stop\x1bnow"
EXPLANATION_REFUSED = (
    "explanation contains the control character U+001B at position 4; only tab, line feed "
    "and carriage return are allowed"
)
START = {"job_name": "demo", "workflow_name": "main"}


@pytest.fixture
def project(demo_project):
    return project_add(root_path=str(demo_project)).project


@pytest.fixture
def rest(project, db):
    """A REST caller allowed to drive, abort and decide."""
    user = make_user(
        username="rita",
        perms=(
            "workflows.view_workflowsession",
            "workflows.drive_session",
            "workflows.abort_session",
            "reviews.decide_review",
        ),
    )
    _, token = api_token_create(user=user, name="abuse")
    client = HttpClient()

    def post(path: str, body: dict[str, Any]) -> tuple[int, str]:
        response = client.post(
            path,
            json.dumps(body),
            content_type="application/json",
            headers={"Authorization": f"Bearer {token}"},
        )
        payload = response.json()
        message = payload["error"]["message"] if "error" in payload else ""
        if "error" in payload and payload["error"].get("details"):
            message += " " + json.dumps(payload["error"]["details"])
        return response.status_code, message

    return post


async def mcp_call(server, tool: str, args: dict[str, Any]) -> tuple[bool, str]:
    async with Client(server) as client:
        result = await client.call_tool(tool, args, raise_on_error=False)
    return result.is_error, result.content[0].text if result.content else ""


def nothing_started() -> None:
    assert not WorkflowSession.objects.exists()
    assert not Event.objects.filter(kind=Event.Kind.SESSION_STARTED).exists()


async def test_a_20_mb_goal_is_refused_over_mcp_and_nothing_is_stored(demo_project):
    server = create_server(demo_project)
    is_error, text = await mcp_call(
        server, "start_workflow", {**START, "goal": "g" * (20 * 1024 * 1024)}
    )
    assert is_error
    assert text == (
        "Error calling tool 'start_workflow': goal is 20,971,520 characters; the limit is 1,000,000"
    )
    await sync_to_async(nothing_started)()


async def test_a_goal_over_the_limit_gets_the_same_answer_over_mcp_and_rest(
    demo_project, project, rest
):
    is_error, text = await mcp_call(
        create_server(demo_project), "start_workflow", {**START, "goal": TOO_LONG_GOAL}
    )
    assert is_error
    assert text.endswith(GOAL_REFUSED)

    status, message = await sync_to_async(rest)(
        "/api/sessions", {"project": project.pk, **START, "goal": TOO_LONG_GOAL}
    )
    assert (status, message) == (400, GOAL_REFUSED)
    await sync_to_async(nothing_started)()
    # The REST start failed, so the agent it would have started for was not created either.
    assert not await Agent.objects.filter(agent_id="api:rita").aexists()


async def test_instance_id_longer_than_its_column_is_refused_everywhere(
    demo_project, project, rest
):
    label = "i" * 300
    is_error, text = await mcp_call(
        create_server(demo_project),
        "start_workflow",
        {**START, "goal": "g", "instance_id": label},
    )
    assert is_error
    assert text.endswith("instance_id is 300 characters; the limit is 255")

    status, message = await sync_to_async(rest)(
        "/api/sessions", {"project": project.pk, **START, "goal": "g", "instance_id": label}
    )
    assert status == 400
    assert "instance_id" in message
    assert "255" in message
    await sync_to_async(nothing_started)()


async def test_nul_and_control_characters_in_a_goal_are_refused(demo_project, project, rest):
    server = create_server(demo_project)
    is_error, text = await mcp_call(server, "start_workflow", {**START, "goal": "a\x00b"})
    assert is_error
    assert text.endswith("goal contains a NUL character (at position 1); it is not allowed")

    status, message = await sync_to_async(rest)(
        "/api/sessions", {"project": project.pk, **START, "goal": "a\x00b"}
    )
    assert status == 400
    assert "goal" in message

    bell = "ring\x07"
    refused = (
        "goal contains the control character U+0007 at position 4; only tab, line feed and "
        "carriage return are allowed"
    )
    is_error, text = await mcp_call(server, "start_workflow", {**START, "goal": bell})
    assert (is_error, text.endswith(refused)) == (True, True), text
    status, message = await sync_to_async(rest)(
        "/api/sessions", {"project": project.pk, **START, "goal": bell}
    )
    assert (status, message) == (400, refused)
    await sync_to_async(nothing_started)()

    # Line breaks and tabs are text, not control: a multi-line goal starts.
    is_error, text = await mcp_call(
        server, "start_workflow", {**START, "goal": "line one\n\tline two\r\n"}
    )
    assert not is_error, text


def flashes(client: HttpClient, url: str) -> list[tuple[str, str]]:
    page = client.get(url).content.decode()
    found = re.findall(r'data-testid="flash" data-level="(\w+)"[^>]*>([^<]*)<', page)
    return [(level, html.unescape(text)) for level, text in found]


async def test_an_abort_reason_is_refused_alike_over_mcp_rest_and_the_dashboard(
    demo_project, project, rest
):
    server = create_server(demo_project)
    async with Client(server) as client:
        started = await client.call_tool("start_workflow", {**START, "goal": "g"})
        sid = started.structured_content["begin_step"]["session_id"]
        refused = await client.call_tool(
            "abort_workflow", {"explanation": CONTROL}, raise_on_error=False
        )
    assert refused.is_error
    assert refused.content[0].text.endswith(EXPLANATION_REFUSED)

    status, message = await sync_to_async(rest)(f"/api/sessions/{sid}/abort", {"reason": CONTROL})
    assert (status, message) == (400, EXPLANATION_REFUSED)

    def dashboard_abort() -> list[tuple[str, str]]:
        person = make_user(
            username="dana",
            perms=("workflows.view_workflowsession", "workflows.abort_session"),
        )
        browser = HttpClient()
        browser.force_login(person)
        url = f"/sessions/{sid}/"
        browser.post(url + "abort/", {"reason": CONTROL, "confirm": "on"})
        return flashes(browser, url)

    assert await sync_to_async(dashboard_abort)() == [("error", EXPLANATION_REFUSED)]
    session = await WorkflowSession.objects.aget(session_id=sid)
    assert (session.status, session.revision) == ("active", 0)
    assert not await Event.objects.filter(kind=Event.Kind.SESSION_ABORTED).aexists()


async def test_an_override_reason_and_outputs_are_bounded(demo_project, project, rest):
    server = create_server(demo_project)
    async with Client(server) as client:
        started = await client.call_tool("start_workflow", {**START, "goal": "g"})
        sid = started.structured_content["begin_step"]["session_id"]
        reason = "r" * 10_001
        over = await client.call_tool(
            "finished_step",
            {"outputs": {"notes.md": "notes.md"}, "quality_review_override_reason": reason},
            raise_on_error=False,
        )
        many = await client.call_tool(
            "finished_step",
            {"outputs": {"notes.md": "notes.md", "extras": ["notes.md"] * 1_001}},
            raise_on_error=False,
        )
        long_path = await client.call_tool(
            "finished_step", {"outputs": {"notes.md": "p" * 4_097}}, raise_on_error=False
        )
        notes = await client.call_tool(
            "finished_step",
            {"outputs": {"notes.md": "notes.md"}, "notes": "n" * 1_000_001},
            raise_on_error=False,
        )
    assert over.is_error
    assert over.content[0].text.endswith(
        "override_reason is 10,001 characters; the limit is 10,000"
    )
    assert many.content[0].text.endswith("output 'extras' has 1,001 paths; the limit is 1,000")
    assert long_path.content[0].text.endswith(
        "output 'notes.md' path is 4,097 characters; the limit is 4,096"
    )
    assert notes.content[0].text.endswith("notes is 1,000,001 characters; the limit is 1,000,000")

    status, message = await sync_to_async(rest)(
        f"/api/sessions/{sid}/finish",
        {"outputs": {"notes.md": "notes.md"}, "override_reason": reason},
    )
    assert (status, message) == (400, "override_reason is 10,001 characters; the limit is 10,000")
    session = await WorkflowSession.objects.aget(session_id=sid)
    assert (session.current_step_id, session.revision) == ("gather", 0)
