"""One review, two ids, one pass: ``mcpserve --generation both`` over stdio.

A server serving both generations answers the standalone review tools the 0.9.1 way (0.9.1's
ids, which hash the rule's text too) while a 0.14 session's ``finished_step`` names the same
project-rule review by 0.14's id (the content only). An agent marks whichever id it was shown;
a pass under either must count for both, or the review is asked for again. The one-generation
servers keep a single id form each: a marker under the other form means nothing to them.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import pytest

from reviews.models import ReviewResult
from tests.e2e.driver import Driver
from tests.reviews import commit_all, isolate_git, make_repo, rule, write_rules
from tests.support.demo14 import write_demo14

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.e2e]

NOTES = "notes, with a source\n"
CONTENT = hashlib.sha256(NOTES.encode()).hexdigest()[:12]
# 0.14's id of the project rule's review of notes.md: rule, path, content hash.
GATE_ID = f"notes_rule--notes.md--{CONTENT}"
FINISH = {
    "outputs": {"notes.md": "notes.md", "data.json": "data.json"},
    "session_id": "S",
    "work_summary": "cited all",
}
START = {
    "goal": "g",
    "job_name": "demo14",
    "workflow_name": "main",
    "session_id": "S",
    "inputs": {"topic": "cats"},
}
TASK = re.compile(
    r"description: (.+)\n(?:\t.*\n)*?"
    r"\tprompt: \"@\.deepwork/tmp/review_instructions/(.+)\.md\""
)
ALL_PASSED = "All matching reviews have already passed for the current file contents."


@pytest.fixture
def project(demo_project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A git project with the 0.14 job ``demo14`` and one project rule over Markdown files,
    where notes.md (an output of the job's first step) has changed since the last commit."""
    isolate_git(monkeypatch, tmp_path)
    write_demo14(demo_project)
    write_rules(demo_project, {"notes_rule": rule(["*.md"], instructions="Notes read well.")})
    make_repo(demo_project)
    commit_all(demo_project, "initial")
    (demo_project / "notes.md").write_text(NOTES)
    return demo_project


def tasks(text: str) -> list[tuple[str, str]]:
    """(description, review id) of each task in a tool's or the gate's task list."""
    return TASK.findall(text)


def rule_ids(text: str) -> list[str]:
    """The ids of the project rule's tasks, whichever generation's format listed them."""
    return [review_id for _, review_id in tasks(text) if review_id.startswith("notes_rule--")]


async def text_of(agent: Driver, tool: str, args: dict[str, object]) -> str:
    result = await agent.client.call_tool(tool, args, raise_on_error=False)
    assert not result.is_error, result.content[0].text
    return str(result.content[0].text)


async def mark(agent: Driver, review_id: str) -> None:
    answer = await text_of(agent, "mark_review_as_passed", {"review_id": review_id})
    assert answer == f"Review '{review_id}' marked as passed."


async def standalone_ids(agent: Driver) -> list[str]:
    return rule_ids(await text_of(agent, "get_review_instructions", {"files": ["notes.md"]}))


async def test_a_pass_under_the_gates_id_counts_for_the_review_tools(project: Path) -> None:
    async with Driver(project, "--generation", "both") as agent:
        # The tool's own id for the review is the 0.9.1 form, not the gate's.
        (tool_id,) = await standalone_ids(agent)
        assert tool_id != GATE_ID
        await agent.call("start_workflow", START)
        answer = await agent.call("finished_step", FINISH)
        assert answer["status"] == "needs_work"
        assert rule_ids(answer["feedback"]) == [GATE_ID]

        await mark(agent, GATE_ID)
        # The tools name the review by their own id, and know it passed.
        listed = await text_of(agent, "get_review_instructions", {"files": ["notes.md"]})
        assert listed == ALL_PASSED

        # A pass holds for that content only: an edit asks for the review on both paths again.
        (project / "notes.md").write_text(NOTES + "and one more line\n")
        (reopened,) = await standalone_ids(agent)
        assert reopened not in (tool_id, GATE_ID)
        answer = await agent.call("finished_step", FINISH)
        assert len(rule_ids(answer["feedback"])) == 1


async def test_a_pass_under_the_tools_id_counts_for_the_gate(project: Path) -> None:
    async with Driver(project, "--generation", "both") as agent:
        (tool_id,) = await standalone_ids(agent)
        await mark(agent, tool_id)
        assert await text_of(agent, "get_review_instructions", {"files": ["notes.md"]}) == (
            ALL_PASSED
        )

        await agent.call("start_workflow", START)
        answer = await agent.call("finished_step", FINISH)
        # The step's own reviews are still to run; the project rule's has passed already.
        assert [d for d, _ in tasks(answer["feedback"])] == [
            "Review demo14/step_gather_output_notes.md",
            "Review demo14/step_gather_output_notes.md_arg",
            "Review demo14/step_gather_process_quality",
        ]
        assert not (project / f".deepwork/tmp/review_instructions/{GATE_ID}.md").exists()
        for _, review_id in tasks(answer["feedback"]):
            await mark(agent, review_id)
        answer = await agent.call("finished_step", FINISH)
        assert answer["status"] == "next_step"


async def test_asked_by_the_gate_passed_by_the_tools_id(project: Path) -> None:
    async with Driver(project, "--generation", "both") as agent:
        await agent.call("start_workflow", START)
        answer = await agent.call("finished_step", FINISH)
        assert rule_ids(answer["feedback"]) == [GATE_ID]
        step_ids = [i for _, i in tasks(answer["feedback"]) if i != GATE_ID]
        # The agent reviews the rule through the review tools, and marks the id they gave.
        (tool_id,) = await standalone_ids(agent)
        await mark(agent, tool_id)
        for review_id in step_ids:
            await mark(agent, review_id)
        answer = await agent.call("finished_step", FINISH)
        assert answer["status"] == "next_step"
    # The gate stored the review it asked for as passed, under the id it gave.
    results = ReviewResult.objects.filter(run_each=GATE_ID).values_list("passed", flat=True)
    assert sorted([passed async for passed in results]) == [False, True]


async def test_the_014_server_keeps_one_id_form(project: Path) -> None:
    # A 0.9.1 server names the review its way, and the pass is recorded under that id.
    async with Driver(project, "--generation", "0.9") as agent:
        (tool_id,) = await standalone_ids(agent)
        await mark(agent, tool_id)
        assert await text_of(agent, "get_review_instructions", {"files": ["notes.md"]}) == (
            ALL_PASSED
        )
    # 0.14 itself knows only its own ids: its gate and its tool still ask for the review.
    async with Driver(project, "--generation", "0.14") as agent:
        assert await standalone_ids(agent) == [GATE_ID]
        await agent.call("start_workflow", START)
        answer = await agent.call("finished_step", FINISH)
        assert rule_ids(answer["feedback"]) == [GATE_ID]


async def test_the_091_server_keeps_one_id_form(project: Path) -> None:
    async with Driver(project, "--generation", "0.9") as agent:
        (tool_id,) = await standalone_ids(agent)
        # 0.14's id of the same review is just some other id to a 0.9.1 server.
        await mark(agent, GATE_ID)
        assert await standalone_ids(agent) == [tool_id]
