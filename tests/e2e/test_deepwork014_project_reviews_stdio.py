"""0.14's gate over stdio with the project's own rules.

``finished_step`` of a 0.14 session asks, after the step's own reviews, for the project's
``.deepreview`` and DeepSchema rules on the submitted output files that git reports as changed
(catch-all rules included; none at all when git fails), with 0.14's content-only review ids,
which ``get_review_instructions`` shares.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import pytest

from reviews.models import ReviewResult
from tests.e2e.driver import Driver
from tests.reviews import commit_all, isolate_git, make_repo, rule, write, write_rules
from tests.support.demo14 import write_demo14

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.e2e]

OUTPUTS = {"notes.md": "notes.md", "data.json": "data.json"}
STEP_TASKS = [
    "Review demo14/step_gather_output_notes.md",
    "Review demo14/step_gather_output_notes.md_arg",
    "Review demo14/step_gather_process_quality",
]


@pytest.fixture
def project(demo_project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    isolate_git(monkeypatch, tmp_path)
    write_demo14(demo_project)
    write_rules(
        demo_project,
        {
            "notes_rule": rule(["*.md"], instructions="Notes read well."),
            "everything": rule(["**/*"], strategy="matches_together"),
            "json_rule": rule(["*.json"]),
        },
    )
    write(
        demo_project,
        ".deepwork/schemas/notes/deepschema.yml",
        "matchers: ['notes.md']\nrequirements:\n  sourced: Every note MUST name a source.\n",
    )
    return demo_project


def descriptions(feedback: str) -> list[str]:
    return re.findall(r"description: (.+)", feedback)


def task_ids(text: str) -> list[str]:
    return re.findall(r'prompt: "@\.deepwork/tmp/review_instructions/(.+)\.md"', text)


@pytest.mark.parametrize("generation", ["0.14", "both"])
async def test_project_rules_review_changed_outputs_only(project: Path, generation: str) -> None:
    args = {"outputs": OUTPUTS, "session_id": "S", "work_summary": "cited all"}
    async with Driver(project, "--generation", generation) as agent:
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
        # Not a git repository: git fails, so no project rule applies.
        answer = await agent.call("finished_step", args)
        assert descriptions(answer["feedback"]) == STEP_TASKS

        make_repo(project)
        commit_all(project, "initial")
        (project / "notes.md").write_text("notes, with a source\n")
        write(project, "other.md", "changed, but not an output\n")
        answer = await agent.call("finished_step", args)
        feedback = answer["feedback"]
        # The step's own tasks, then .deepreview rules in order, then DeepSchema rules;
        # data.json is unchanged and other.md is no output; the catch-all rule stays.
        assert descriptions(feedback) == [
            *STEP_TASKS,
            "Review notes_rule",
            "Review everything",
            "Review notes/notes DeepSchema Compliance",
        ]
        ids = task_ids(feedback)
        content = hashlib.sha256(b"notes, with a source\n").hexdigest()[:12]
        assert ids[0] == f"step_gather_output_notes.md--notes.md--{content}"
        assert ids[3:] == [
            f"notes_rule--notes.md--{content}",
            f"everything--notes.md--{content}",
            f"notes-DeepSchema-Compliance--notes.md--{content}",
        ]
        schema_task = (project / f".deepwork/tmp/review_instructions/{ids[5]}.md").read_text()
        assert "- **sourced**: Every note MUST name a source." in schema_task
        assert "`.deepwork/schemas/notes/deepschema.yml:0`" in schema_task

        listed = await agent.client.call_tool(
            "get_review_instructions", {"files": ["notes.md"]}, raise_on_error=False
        )
        if generation == "0.14":
            # The 0.14 tool names the same review by the same id, so its pass counts.
            assert f"notes_rule--notes.md--{content}" in task_ids(listed.content[0].text)
            rules = await agent.client.call_tool(
                "get_configured_reviews", {"only_rules_matching_files": ["notes.md"]}
            )
            # The catch-all rule is left out when filtering; the DeepSchema rule is listed.
            assert [(r["name"], r["defining_file"]) for r in json.loads(rules.content[0].text)] == [
                ("notes_rule", ".deepreview:1"),
                ("notes DeepSchema Compliance", ".deepwork/schemas/notes/deepschema.yml:0"),
            ]
        else:
            # In "both" the tool answers the 0.9.1 way, with 0.9.1's ids (rule text hashed).
            assert f"notes_rule--notes.md--{content}" not in task_ids(listed.content[0].text)
        for review_id in ids:
            text = (
                (await agent.client.call_tool("mark_review_as_passed", {"review_id": review_id}))
                .content[0]
                .text
            )
            assert text == f"Review '{review_id}' marked as passed."
        answer = await agent.call("finished_step", args)
        assert answer["status"] == "next_step"
    # Each project-rule task was stored as asked for, then as passed, like the step's own.
    results = ReviewResult.objects.filter(run_each__in=ids[3:]).values_list("run_each", "passed")
    stored = [row async for row in results.order_by("id")]
    assert sorted(stored) == sorted([(i, False) for i in ids[3:]] + [(i, True) for i in ids[3:]])
