"""0.14's ``.deepreview`` keys under ``mcpserve --generation both``, over stdio.

The 0.14 gate of a ``both`` server reads ``reference_files`` and
``precomputed_info_for_reviewer_bash_command``; the 0.9.1 review tools beside it read the same
file the same way (not as a parse error) and give the reviewer what the keys ask for, in 0.9.1's
layout. A 0.9-only server still refuses the keys, as 0.9.1 does.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.e2e.driver import Driver
from tests.reviews import (
    commit_all,
    isolate_git,
    make_repo,
    rule,
    write_notes_rule_with_014_keys,
    write_rules,
)
from tests.support.demo14 import write_demo14

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.e2e]

GUIDE = "### docs/guide.md\n\nThe guide\n\n```markdown\nEvery note names a source.\n```"
CONTEXT = "## Precomputed Context\n\nchanged lines: 1\n"


@pytest.fixture
def project(demo_project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    isolate_git(monkeypatch, tmp_path)
    write_demo14(demo_project)
    write_notes_rule_with_014_keys(demo_project)
    make_repo(demo_project)
    commit_all(demo_project, "initial")
    (demo_project / "notes.md").write_text("notes, with a source\n")
    return demo_project


def task_ids(text: str) -> list[str]:
    return re.findall(r'prompt: "@\.deepwork/tmp/review_instructions/(.+)\.md"', text)


def instructions(project: Path, review_id: str) -> str:
    return (project / f".deepwork/tmp/review_instructions/{review_id}.md").read_text()


async def text_of(agent: Driver, tool: str, args: dict[str, object]) -> str:
    result = await agent.client.call_tool(tool, args, raise_on_error=False)
    assert not result.is_error, result.content[0].text
    return str(result.content[0].text)


async def test_both_reads_the_keys_alike_for_tools_and_gate(project: Path) -> None:
    async with Driver(project, "--generation", "both") as agent:
        listed = json.loads(await text_of(agent, "get_configured_reviews", {}))
        assert [(r["name"], r["defining_file"]) for r in listed] == [
            ("notes_rule", ".deepreview:1")
        ]

        answer = await text_of(agent, "get_review_instructions", {"files": ["notes.md"]})
        # 0.9.1's task list, no parse warning in front of it.
        assert answer.startswith("Invoke the following list of Tasks in parallel:\n")
        [tool_id] = task_ids(answer)
        text = instructions(project, tool_id)
        assert text.startswith("# Review: notes_rule — notes.md\n\n## Review Instructions\n")
        assert GUIDE in text
        assert CONTEXT in text
        # The reviewed file is named for the reviewer to read, as 0.9.1 does, not inlined.
        assert "File under review" not in text

        await agent.call(
            "start_workflow",
            {
                "goal": "g",
                "job_name": "demo14",
                "workflow_name": "main",
                "session_id": "S",
                "inputs": {"topic": "cats"},
            },
        )
        finished = await agent.call(
            "finished_step",
            {"outputs": {"notes.md": "notes.md", "data.json": "data.json"}, "session_id": "S"},
        )
        [gate_id] = [i for i in task_ids(finished["feedback"]) if i.startswith("notes_rule--")]
        text = instructions(project, gate_id)
        assert GUIDE in text
        assert CONTEXT in text


async def test_a_rule_without_the_keys_keeps_091s_file(project: Path) -> None:
    write_rules(project, {"notes_rule": rule(["*.md"], instructions="Notes follow the guide.")})
    written = []
    for generation in ("0.9", "both"):
        async with Driver(project, "--generation", generation) as agent:
            answer = await text_of(agent, "get_review_instructions", {"files": ["notes.md"]})
            [review_id] = task_ids(answer)
            written.append((review_id, instructions(project, review_id)))
    # The same id and the same file, byte for byte, from both servers.
    assert written[0] == written[1]
    assert "## Relevant File Contents" not in written[0][1]


async def test_091_server_still_refuses_the_keys(project: Path) -> None:
    async with Driver(project, "--generation", "0.9") as agent:
        [entry] = json.loads(await text_of(agent, "get_configured_reviews", {}))
        assert entry["name"] == f"PARSE_ERROR:{project / '.deepreview'}"
        answer = await text_of(agent, "get_review_instructions", {"files": ["notes.md"]})
        assert answer.startswith("No valid .deepreview rules found. Parse errors:\n")
