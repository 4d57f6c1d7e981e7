"""A fresh hosted server (real uvicorn, real HTTP) has no project, and ``/mcp`` answers "No
project" for any folder: a person's token adds one over ``POST /api/projects``, and an agent's
token is served it at once by naming its root path."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from accounts.services import api_token_create
from tests.mcp_bridge.hosted.conftest import call, mcp_client
from tests.mcp_bridge.hosted.test_hosted_mcp import post
from tests.support.factories import make_user
from workflows.models import Project

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.e2e]


async def test_a_project_added_over_rest_is_served_over_mcp(web: str, demo_project: Path):
    from asgiref.sync import sync_to_async

    @sync_to_async
    def people() -> tuple[str, str, str]:
        ops = make_user(username="ops", perms=("workflows.add_project", "workflows.drive_session"))
        return (
            api_token_create(user=ops, name="key")[1],
            api_token_create(user=ops, name="agent", mcp=True)[1],
            str(demo_project.resolve()),
        )

    key, agent, root = await people()
    headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
    api = web.removesuffix("/mcp") + "/api/projects"
    # The MCP token may not add it (an agent's token); the person's key may.
    status, text = post(
        api,
        {**headers, "Authorization": f"Bearer {agent}"},
        json.dumps({"root_path": root}).encode(),
    )
    assert status == 403, text
    status, text = post(api, headers, json.dumps({"root_path": root}).encode())
    assert status == 201, text
    added = json.loads(text)
    assert (added["root_path"], added["folder_found"], added["warnings"]) == (root, True, [])
    assert await Project.objects.filter(pk=added["id"]).aexists()

    async with mcp_client(web, agent, "auto", **{"X-Deepwork-Project": root}) as client:
        started = await call(
            client, "start_workflow", {"goal": "g", "job_name": "demo", "workflow_name": "main"}
        )
        assert started["begin_step"]["step_id"] == "gather"
