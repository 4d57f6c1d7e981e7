"""0.14's ``.deepreview`` keys over stdio: ``reference_files`` inlined and
``precomputed_info_for_reviewer_bash_command`` run, both in ``get_review_instructions`` and in
``finished_step``'s project rules; a 0.9.1 server keeps reporting the file as unparsable."""

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
    write_notes_rule_with_014_keys,
)
from tests.support.demo14 import write_demo14

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.e2e]


@pytest.fixture
def project(demo_project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    isolate_git(monkeypatch, tmp_path)
    write_demo14(demo_project)
    write_notes_rule_with_014_keys(demo_project)
    return demo_project


def task_ids(text: str) -> list[str]:
    return re.findall(r'prompt: "@\.deepwork/tmp/review_instructions/(.+)\.md"', text)


def assert_both_keys_used(project: Path, review_id: str) -> None:
    text = (project / f".deepwork/tmp/review_instructions/{review_id}.md").read_text()
    assert "### docs/guide.md\n\nThe guide\n\n```markdown\nEvery note names a source.\n```" in text
    assert "## Precomputed Context\n\nchanged lines: 1\n\n## After Review" in text


async def test_get_review_instructions_uses_both_keys(project: Path) -> None:
    async with Driver(project, "--generation", "0.14") as agent:
        answer = await agent.client.call_tool("get_review_instructions", {"files": ["notes.md"]})
        [review_id] = task_ids(answer.content[0].text)
        assert review_id.startswith("notes_rule--notes.md--")
        assert_both_keys_used(project, review_id)
    async with Driver(project, "--generation", "0.9") as agent:
        listed = await agent.client.call_tool(
            "get_configured_reviews", {"only_rules_matching_files": None}
        )
        [entry] = json.loads(listed.content[0].text)
        assert entry["name"] == f"PARSE_ERROR:{project / '.deepreview'}"
        # jsonschema names both keys, in an order of its own.
        assert (
            "Validation error at notes_rule -> review: Additional properties are not "
            in (entry["description"])
        )
        for key in ("reference_files", "precomputed_info_for_reviewer_bash_command"):
            assert f"'{key}'" in entry["description"]


async def test_finished_step_project_rule_uses_both_keys(project: Path) -> None:
    make_repo(project)
    commit_all(project, "initial")
    (project / "notes.md").write_text("notes, with a source\n")
    args = {"outputs": {"notes.md": "notes.md", "data.json": "data.json"}, "session_id": "S"}
    async with Driver(project, "--generation", "0.14") as agent:
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
        answer = await agent.call("finished_step", args)
        ids = [i for i in task_ids(answer["feedback"]) if i.startswith("notes_rule--")]
        assert len(ids) == 1, answer["feedback"]
        assert_both_keys_used(project, ids[0])
