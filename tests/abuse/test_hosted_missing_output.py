"""Over hosted ``/mcp`` (real uvicorn, real HTTP) an agent on another machine hands in a file
the server cannot see: the refusal says the file is missing *on the server* and names the
server's project root, so the agent knows why a file it just wrote is "not found". A stdio
server keeps DeepWork's own words (``tests/e2e/test_deepwork014_stdio.py`` pins them)."""

from __future__ import annotations

import pytest

from tests.mcp_bridge.hosted.conftest import Tokens, call, mcp_client
from workflows.errors import InvalidInput
from workflows.outputs import check_output_path

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.e2e]


def on_the_server(root: str) -> str:
    return (
        "Output 'notes.md': file not found at 'absent.md' on the server. The server checks "
        f"outputs in its own copy of the project, whose root on the server is '{root}', not on "
        "your machine: the file must exist under that folder on the server (write or sync it "
        "there) before the step is handed in"
    )


async def test_a_missing_output_is_missing_on_the_server_with_its_root_named(
    web: str, tokens: Tokens
):
    root = tokens.project.root_path
    async with mcp_client(web, tokens.bound, "auto") as agent:
        started = await call(
            agent, "start_workflow", {"goal": "g", "job_name": "demo", "workflow_name": "main"}
        )
        session_id = started["begin_step"]["session_id"]
        result = await agent.call_tool(
            "finished_step",
            {"outputs": {"notes.md": "absent.md"}, "session_id": session_id},
            raise_on_error=False,
        )
        assert result.is_error
        assert on_the_server(root) in result.content[0].text
        checked = await call(
            agent,
            "validate_step_outputs",
            {"outputs": {"notes.md": "absent.md"}, "session_id": session_id},
        )
        assert checked["valid"] is False
        assert checked["errors"] == [on_the_server(root)]
        # A file that is there passes as before.
        moved = await call(
            agent, "finished_step", {"outputs": {"notes.md": "notes.md"}, "session_id": session_id}
        )
        assert moved["status"] == "next_step"


def test_outside_hosted_mcp_the_words_stay_deepworks(tmp_path):
    with pytest.raises(InvalidInput) as refused:
        check_output_path("notes.md", "absent.md", tmp_path)
    assert str(refused.value) == "Output 'notes.md': file not found at 'absent.md'"
