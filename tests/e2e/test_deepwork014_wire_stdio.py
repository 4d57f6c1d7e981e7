"""Where this server's answers once differed from DeepWork 0.14.0's on the wire, over stdio.

Each expected text below is 0.14.0's own answer, recorded by driving ``deepwork serve`` 0.14.0
with an MCP client through the same calls on the same project (``wire_project``); this server's
answer is compared to it. Where 0.14.0's text names its project folder, the recording shows it
as ``<root>``.

Two parts of 0.14.0's answers are left out on purpose, and the tests say where:
- its wheel lacks a file its own ``job_yml`` DeepSchema names, so every review answer of
  0.14.0 starts with a ``Warning:`` block about that file; the recording starts after it;
- after a ``job.yml`` sent to ``register_session_job`` fails validation, 0.14.0 names the
  server-side file it wrote; this server keeps no such file and names no server path.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from inline_snapshot import snapshot

from tests.e2e.driver import Driver
from tests.support.demo14 import DEMO14_JOB
from tests.support.step_files import git

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.e2e]

SESSION = "S"


@pytest.fixture
def wire_project(project_dir: Path) -> Path:
    """The recorded project: the 0.14-format ``report_job``, an empty ``job.yml``, project
    review rules at the root and in ``sub/``, all committed to git."""
    root = project_dir
    job_dir = root / ".deepwork/jobs/report_job"
    job_dir.mkdir(parents=True)
    (job_dir / "job.yml").write_text(DEMO14_JOB.replace("name: demo14", "name: report_job"))
    (root / "notes.md").write_text("notes\n")
    (root / "data.json").write_text('{"title": "t"}\n')
    (root / ".deepreview").write_text(
        "md_style:\n  description: Markdown style\n  match:\n    include: ['**/*.md']\n"
        "  review:\n    strategy: individual\n    instructions: Check the style.\n"
    )
    (root / "sub").mkdir()
    (root / "sub/a.py").write_text("x = 1\n")
    (root / "sub/.deepreview").write_text(
        "py_rule:\n  description: Python\n  match:\n    include: ['*.py']\n"
        "  review:\n    strategy: matches_together\n    instructions: Check the code.\n"
    )
    (root / "docs").mkdir()
    (root / "docs/x.md").write_text("# x\n")
    empty = root / ".deepwork/jobs/empty_job"
    empty.mkdir(parents=True)
    (empty / "job.yml").write_text("")
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "init")
    return root


def serve(project: Path) -> Driver:
    return Driver(project, "--generation", "0.14")


async def text_of(agent: Driver, tool: str, args: dict[str, object]) -> str:
    result = await agent.client.call_tool(tool, args, raise_on_error=False)
    assert not result.is_error, result.content[0].text
    return result.content[0].text


def with_root(text: str, project: Path) -> str:
    return text.replace(str(project), "<root>")


async def test_review_instructions_end_as_014_ends_them(wire_project: Path) -> None:
    async with serve(wire_project) as agent:
        named = await text_of(
            agent, "get_review_instructions", {"files": ["sub/a.py", "docs/x.md"]}
        )
        # 0.14.0 (after its wheel's Warning block): the last task's empty line, nothing more.
        assert named == snapshot(
            "Invoke the following list of Agents in parallel.\n"
            "IMPORTANT: Do NOT read the prompt files yourself. Pass the prompt field directly "
            "to each agent — the @file references are expanded automatically.\n"
            "\n"
            "description: Review sub/py_rule\n"
            "\tsubagent_type: deepwork:reviewer\n"
            '\tprompt: "@.deepwork/tmp/review_instructions/py_rule--sub-a.py--9e26bf369911.md"\n'
            "\n"
            "description: Review md_style\n"
            "\tsubagent_type: deepwork:reviewer\n"
            '\tprompt: "@.deepwork/tmp/review_instructions/md_style--docs-x.md--253b610bd786.md"\n'
        )

        (wire_project / "sub/a.py").write_text("x = 2\n")
        changed = await text_of(agent, "get_review_instructions", {})
        assert changed == snapshot(
            "Invoke the following list of Agents in parallel.\n"
            "IMPORTANT: Do NOT read the prompt files yourself. Pass the prompt field directly "
            "to each agent — the @file references are expanded automatically.\n"
            "\n"
            "description: Review sub/py_rule\n"
            "\tsubagent_type: deepwork:reviewer\n"
            '\tprompt: "@.deepwork/tmp/review_instructions/py_rule--sub-a.py--4205c4809ab1.md"\n'
        )


async def test_an_empty_job_yml_is_reported_as_014_reports_it(wire_project: Path) -> None:
    async with serve(wire_project) as agent:
        listed = await agent.call("get_workflows")
        assert with_root(json.dumps(listed["errors"]), wire_project) == snapshot(
            '[{"job_name": "empty_job", "job_dir": "<root>/.deepwork/jobs/empty_job", '
            '"error": "job.yml is empty\\nThe file to fix is '
            "<root>/.deepwork/jobs/empty_job/job.yml. If it was edited in this session, fix "
            "it directly. Otherwise repair the project's jobs, older job formats included, "
            'with the repair workflow: start_workflow with job_name \\"deepwork_jobs\\" and '
            'workflow_name \\"repair\\"."}]'
        )
        started = await agent.call_error(
            "start_workflow",
            {"goal": "g", "job_name": "empty_job", "workflow_name": "x", "session_id": SESSION},
        )
        assert started == snapshot(
            "Error calling tool 'start_workflow': Failed to parse job 'empty_job': job.yml is empty"
        )
        sent = await agent.call(
            "register_session_job",
            {"job_name": "tmpjob", "job_definition_yaml": "", "session_id": "S9"},
        )
        # 0.14.0 goes on to name the file it wrote (see the module's docstring).
        first_line = sent["error"].split("\n")[0]
        assert first_line == snapshot("Job definition validation failed: job.yml is empty")


async def test_job_review_policy_is_named_from_the_project_root(wire_project: Path) -> None:
    async with serve(wire_project) as agent:
        await agent.call(
            "start_workflow",
            {
                "goal": "g",
                "job_name": "report_job",
                "workflow_name": "main",
                "session_id": SESSION,
                "inputs": {"topic": "cats"},
            },
        )
        finished = await agent.call(
            "finished_step",
            {
                "outputs": {"notes.md": "notes.md", "data.json": "data.json"},
                "session_id": SESSION,
                "work_summary": "did it",
            },
        )
    assert finished["feedback"] == snapshot(
        "Quality reviews are required before this step can advance.\n"
        "\n"
        "Invoke the following list of Agents in parallel.\n"
        "IMPORTANT: Do NOT read the prompt files yourself. Pass the prompt field directly to "
        "each agent — the @file references are expanded automatically.\n"
        "\n"
        "description: Review report_job/step_gather_output_notes.md\n"
        "\tsubagent_type: deepwork:reviewer\n"
        '\tprompt: "@.deepwork/tmp/review_instructions/'
        'step_gather_output_notes.md--notes.md--444e0fffbd82.md"\n'
        "\n"
        "description: Review report_job/step_gather_output_notes.md_arg\n"
        "\tsubagent_type: deepwork:reviewer\n"
        '\tprompt: "@.deepwork/tmp/review_instructions/'
        'step_gather_output_notes.md_arg--notes.md--444e0fffbd82.md"\n'
        "\n"
        "description: Review report_job/step_gather_process_quality\n"
        "\tsubagent_type: deepwork:reviewer\n"
        '\tprompt: "@.deepwork/tmp/review_instructions/'
        'step_gather_process_quality--data.json_AND_notes.md--03b175258327.md"\n'
        "\n"
        "\n"
        "## How to Run Reviews\n"
        "\n"
        "For each review task listed above, launch it as a parallel Agent. The task's prompt "
        "field points to an instruction file — read it and follow the review instructions.\n"
        "\n"
        "## After Reviews\n"
        "\n"
        "For any failing reviews, if you believe the issue is invalid, then you can call "
        "`mark_review_as_passed` on it. Otherwise, you should act on any feedback from the "
        "review to fix the issues. Once done, call `finished_step` again to see if you will "
        "pass now."
    )
    folder = wire_project / ".deepwork/tmp/review_instructions"
    last_lines = {
        review_id: (folder / f"{review_id}.md").read_text().rstrip("\n").splitlines()[-1]
        for review_id in re.findall(r"review_instructions/(.+)\.md", finished["feedback"])
    }
    assert last_lines == snapshot(
        {
            "step_gather_output_notes.md--notes.md--444e0fffbd82": (
                "This review was requested by the policy at `.deepwork/jobs/report_job/job.yml:0`."
            ),
            "step_gather_output_notes.md_arg--notes.md--444e0fffbd82": (
                "This review was requested by the policy at `.deepwork/jobs/report_job/job.yml:0`."
            ),
            "step_gather_process_quality--data.json_AND_notes.md--03b175258327": (
                "This review was requested by the policy at `.deepwork/jobs/report_job/job.yml:0`."
            ),
        }
    )


YAML_ERRORS_014 = {
    "name: [unclosed\n": snapshot(
        "Invalid YAML syntax: while parsing a flow sequence\n"
        '  in "<unicode string>", line 1, column 7:\n'
        "    name: [unclosed\n"
        "          ^\n"
        "expected ',' or ']', but got '<stream end>'\n"
        '  in "<unicode string>", line 2, column 1:\n'
        "    \n"
        "    ^"
    ),
    "name: x\n  summary: y\n": snapshot(
        "Invalid YAML syntax: mapping values are not allowed here\n"
        '  in "<unicode string>", line 2, column 10:\n'
        "      summary: y\n"
        "             ^"
    ),
    "name: x\n\tsummary: y\n": snapshot(
        "Invalid YAML syntax: while scanning for the next token\n"
        "found character '\\t' that cannot start any token\n"
        '  in "<unicode string>", line 2, column 1:\n'
        "    \tsummary: y\n"
        "    ^"
    ),
    "a: &x 1\nb: *y\n": snapshot(
        "Invalid YAML syntax: found undefined alias 'y'\n"
        '  in "<unicode string>", line 2, column 4:\n'
        "    b: *y\n"
        "       ^"
    ),
}

# Every other way a sent definition can fail: not a mapping, empty, the wrong format, a
# typed scalar that is not one, nesting past the limit, over the size limit.
OTHER_BAD_DEFINITIONS = [
    "- a\n- b\n",
    "hello\n",
    "null\n",
    "name: x\nversion: '1'\nsummary: s\nsteps: []\n",
    "name: x\nsummary: s\nstep_arguments: []\nworkflows: {}\n",
    "name: 2001-13-45\n",
    "name: !!float x\n",
    "a: " + "[" * 200 + "]" * 200 + "\n",
    "a0: &a0 [1]\n" + "".join(f"a{i}: &a{i} [*a{i - 1}, *a{i - 1}]\n" for i in range(1, 40)),
    "name: x\nsummary: " + "y" * (1024 * 1024) + "\n",
]


async def test_session_job_errors_name_the_text_sent_not_a_server_path(
    wire_project: Path,
) -> None:
    async with serve(wire_project) as agent:

        async def register(text: str) -> str:
            answer = await agent.call(
                "register_session_job",
                {"job_name": "tmpjob", "job_definition_yaml": text, "session_id": "S9"},
            )
            return answer["error"]

        for text, expected in YAML_ERRORS_014.items():
            assert await register(text) == expected
        for text in OTHER_BAD_DEFINITIONS:
            error = await register(text)
            assert str(wire_project) not in error, error
            assert ".deepwork/tmp" not in error, error
