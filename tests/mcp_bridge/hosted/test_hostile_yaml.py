"""Hostile YAML over ``/mcp``: a megabyte built to be expensive, in each place a token can make
the server read YAML, is answered within a second, and another token's call meanwhile is not
held up (every caller shares the server's database thread)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest
from fastmcp import Client

from tests.mcp_bridge.hosted.conftest import Tokens, call, mcp_client
from tests.support.yaml_bombs import laughs

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.e2e]

MB = 1024 * 1024
# A megabyte of small mappings: past the node limit, and the slowest of the hostile shapes
# (every event up to the limit is read before the refusal).
WIDE = "".join(f"k{i}: [1, 2, 3]\n" for i in range(80_000))[:MB]
DEEP = "[" * (MB // 2) + "]" * (MB // 2)
HOSTILE = {"wide": WIDE, "deep": DEEP, "bomb": laughs(9)}

CHECKED_JOB = """\
name: checked
summary: s
step_arguments:
  - {name: f, description: d, type: file_path, json_schema: {type: integer}}
workflows:
  main:
    summary: s
    steps: [{name: only, instructions: i, outputs: {f: {}}}]
"""


async def answered_without_holding_up(
    hostile: Any, other: Client, *, rounds: int = 3
) -> tuple[Any, float, float]:
    """``hostile`` (a coroutine) run while ``other`` lists its workflows again and again;
    (its answer, how long it took, the longest of the other's calls meanwhile)."""
    started = time.monotonic()
    task = asyncio.ensure_future(hostile)
    longest = 0.0
    for _ in range(rounds):
        before = time.monotonic()
        await call(other, "get_workflows")
        longest = max(longest, time.monotonic() - before)
        if task.done():
            break
    answer = await task
    return answer, time.monotonic() - started, longest


async def warm(*clients: Client) -> None:
    # The first call of each token sets up its agent and the catalog: not what is measured.
    for client in clients:
        await call(client, "get_workflows")


@pytest.mark.parametrize("shape", sorted(HOSTILE))
async def test_a_hostile_hand_in(web, tokens: Tokens, demo_project: Path, shape: str):
    (demo_project / "out.yml").write_text(HOSTILE[shape])
    agent = mcp_client(web, tokens.bound, "auto")
    other = mcp_client(
        web, tokens.roaming, "auto", **{"X-Deepwork-Project": tokens.project.root_path}
    )
    async with agent, other:
        await warm(agent, other)
        registered = await call(
            agent,
            "register_session_job",
            {"job_name": "checked", "job_definition_yaml": CHECKED_JOB, "session_id": "S1"},
        )
        assert registered["status"] == "registered"
        await call(
            agent,
            "start_workflow",
            {"goal": "g", "job_name": "checked", "workflow_name": "main", "session_id": "S1"},
        )
        answer, took, longest = await answered_without_holding_up(
            call(agent, "finished_step", {"outputs": {"f": "out.yml"}, "session_id": "S1"}),
            other,
        )
    assert answer["status"] == "needs_work"
    assert "failed to parse" in answer["feedback"]
    assert len(answer["feedback"]) < 1000
    assert took < 1.0
    assert longest < 1.0


@pytest.mark.parametrize("shape", sorted(HOSTILE))
async def test_a_hostile_session_job(web, tokens: Tokens, shape: str):
    agent = mcp_client(web, tokens.bound, "auto")
    other = mcp_client(
        web, tokens.roaming, "auto", **{"X-Deepwork-Project": tokens.project.root_path}
    )

    def register(text: str) -> Any:
        return call(
            agent,
            "register_session_job",
            {"job_name": "hostile", "job_definition_yaml": text, "session_id": "S1"},
        )

    async with agent, other:
        await warm(agent, other)
        too_big, took, longest = await answered_without_holding_up(register(HOSTILE[shape]), other)
        if shape != "bomb":
            assert too_big["error"].startswith(f"The job definition is {MB} bytes")
        assert took < 1.0
        assert longest < 1.0
        # Cut to the size a session job may have, the document is parsed: up to 100,000
        # nodes of it, which takes a while (a definition of 5,000 steps does too), on a worker
        # thread of its own.
        cut, _, longest = await answered_without_holding_up(
            register(HOSTILE[shape][: 250 * 1024]), other, rounds=10
        )
        assert "error" in cut
        assert longest < 1.0


@pytest.mark.parametrize("shape", sorted(HOSTILE))
async def test_hostile_review_rules_and_schemas(
    web, tokens: Tokens, demo_project: Path, shape: str
):
    (demo_project / ".deepreview").write_text(HOSTILE[shape])
    schema = demo_project / ".deepwork" / "schemas" / "hostile" / "deepschema.yml"
    schema.parent.mkdir(parents=True)
    schema.write_text(HOSTILE[shape])
    agent = mcp_client(web, tokens.bound, "auto")
    other = mcp_client(
        web, tokens.roaming, "auto", **{"X-Deepwork-Project": tokens.project.root_path}
    )
    async with agent, other:
        await warm(agent, other)
        for tool, args in (
            ("get_configured_reviews", {}),
            ("get_review_instructions", {"files": ["notes.md"]}),
            ("get_named_schemas", {}),
        ):
            result, took, longest = await answered_without_holding_up(
                agent.call_tool(tool, args, raise_on_error=False), other
            )
            assert not result.is_error, result.content[0].text
            assert took < 1.0, tool
            assert longest < 1.0, tool
