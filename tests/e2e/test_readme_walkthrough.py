"""The README's five-minute walkthrough, as written, against the installed wheel.

The commands and files come out of README.md itself: step 1's shell commands run in a
temporary folder, step 2's job.yml and step files are saved where the README says, and step
3's ``.mcp.json`` names the server this test starts (the installed ``deepwork-server`` in
place of ``uvx``, which would fetch it from PyPI). Then the test is the agent of step 4: it
follows each step's instructions as the server gives them (running the ``git log`` of
``gather`` and writing what it lists), hands each file in, has the quality gate's review done,
and sees the workflow complete. A README edited so that the walkthrough no longer works fails
here.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
from fastmcp import Client
from fastmcp.client.transports import StdioTransport

from tests.e2e.driver import call
from tests.support.installed import CHECKOUT, user_env

pytestmark = pytest.mark.e2e

README = CHECKOUT / "README.md"
FENCE = re.compile(r"^```(\w+)\n(.*?)^```\n", re.M | re.S)
# A person with git set up: commits need a name and an address.
GIT_PERSON = {
    "GIT_AUTHOR_NAME": "Ada",
    "GIT_AUTHOR_EMAIL": "ada@example.com",
    "GIT_COMMITTER_NAME": "Ada",
    "GIT_COMMITTER_EMAIL": "ada@example.com",
}


def _walkthrough() -> str:
    text = README.read_text(encoding="utf-8")
    start = text.index("## A five-minute walkthrough")
    return text[start : text.index("\n## ", start + 1)]


def _step(walkthrough: str, number: int) -> str:
    """The text of the walkthrough's step ``number`` (``**N. Title.**`` to the next one)."""
    start = walkthrough.index(f"**{number}. ")
    end = walkthrough.find(f"**{number + 1}. ", start)
    return walkthrough[start : end if end != -1 else len(walkthrough)]


def _blocks(text: str, language: str) -> list[str]:
    return [body for lang, body in FENCE.findall(text) if lang == language]


def _save_files(project: Path, step: str) -> list[str]:
    """Step 2's files: job.yml where the README says to save it, and each step file at the
    path its first line names, with the whole block pasted in, as a person would."""
    saved = []
    (job,) = _blocks(step, "yaml")
    (where,) = re.findall(r"Save it as\s+`([^`]+)`", step)
    for path, body in [(where, job)] + [
        (re.match(r"<!-- (\S+) -->\n", block).group(1), block)  # type: ignore[union-attr]
        for block in _blocks(step, "markdown")
    ]:
        (project / path).write_text(body)
        saved.append(path)
    return saved


def _shell(script: str, cwd: Path, env: dict[str, str]) -> str:
    done = subprocess.run(
        ["bash", "-e", "-c", script],
        cwd=cwd,
        env={**env, **GIT_PERSON},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, f"{script}\n{done.stderr}"
    return done.stdout


def _server(project: Path, step: str, venv: Path, env: dict[str, str]) -> StdioTransport:
    """Step 3's ``.mcp.json``, with the installed command where it says ``uvx``."""
    (config,) = _blocks(step, "json")
    server = json.loads(config)["mcpServers"]["deepwork"]
    assert server["command"] == "uvx"
    package, *args = server["args"]
    assert package == "deepwork-server"
    return StdioTransport(
        command=str(venv / "bin" / "deepwork-server"), args=args, env=env, cwd=str(project)
    )


def _project(walkthrough: str, folder: Path, env: dict[str, str]) -> Path:
    # 1. A project: a git repository with a tagged release and changes since.
    (commands,) = _blocks(_step(walkthrough, 1), "sh")
    _shell(commands, folder, env)
    (project,) = [path for path in folder.iterdir() if (path / ".git").is_dir()]
    assert (project / ".deepwork" / "jobs" / "release_notes" / "steps").is_dir()
    # 2. A job.
    assert len(_save_files(project, _step(walkthrough, 2))) == 3
    return project


async def test_the_readme_walkthrough_runs_as_written(venv: Path, tmp_path: Path) -> None:
    walkthrough = _walkthrough()
    env = user_env(venv, tmp_path, tmp_path / "data")

    project = _project(walkthrough, tmp_path, env)

    # 3 and 4. Connect, and run it.
    async with Client(_server(project, _step(walkthrough, 3), venv, env)) as agent:
        listed = await call(agent, "get_workflows")
        [job] = [job for job in listed["jobs"] if job["name"] == "release_notes"]
        assert [workflow["name"] for workflow in job["workflows"]] == ["write"]
        assert listed["errors"] == []
        started = await call(
            agent,
            "start_workflow",
            {
                "goal": "Write the notes for the next release",
                "job_name": "release_notes",
                "workflow_name": "write",
            },
        )
        gather = started["begin_step"]
        assert gather["step_id"] == "gather"

        # gather: run the command its instructions give, one line per commit it lists.
        (git_log,) = re.findall(r"^Run `([^`]+)`", gather["step_instructions"], re.M)
        changes = _shell(git_log, project, env).splitlines()
        assert len(changes) == 2, "the project has no changes since its last tag to list"
        (project / "release").mkdir()
        (project / "release" / "changes.md").write_text("".join(f"{c}\n" for c in changes))
        drafting = await call(
            agent, "finished_step", {"outputs": {"release/changes.md": "release/changes.md"}}
        )
        assert drafting["status"] == "next_step", drafting
        draft = drafting["begin_step"]
        assert draft["step_id"] == "draft"
        assert "release/changes.md" in draft["step_instructions"]

        # draft: the notes, grouped as the instructions and the review's criteria ask.
        (project / "release" / "notes.md").write_text(
            "# Release notes\n\n"
            "## Added\n\n- The README says how to print the notes.\n\n"
            "## Changed\n\n- Nothing.\n\n"
            "## Fixed\n\n- Notes are listed oldest first.\n"
        )
        hand_in = {"outputs": {"release/notes.md": "release/notes.md"}}
        reviewed = await call(agent, "finished_step", hand_in)
        assert reviewed["status"] == "needs_work", reviewed

        # The quality gate's review: a sub-agent reads the instructions it wrote and checks
        # the notes against the README's two criteria.
        (instructions_path,) = re.findall(
            r"Review instructions have been written to: (\S+)", reviewed["feedback"]
        )
        instructions = (project / instructions_path).read_text()
        for criterion in ("Grouped", "Plain words"):
            assert criterion in instructions
        assert "release/notes.md" in instructions
        done = await call(
            agent,
            "finished_step",
            {
                **hand_in,
                "quality_review_override_reason": "Self-review passed: grouped, plain words",
            },
        )
        assert done["status"] == "workflow_complete", done
