"""A ``.deepreview`` precompute command is a program the project names, run as the server's user.

Over stdio (the user's own project) it runs, as in DeepWork 0.14. On the web server it runs only
for a project a person allowed it for in the admin; otherwise the reviewer reads why it was
skipped. Everywhere: at most ``MAX_CONCURRENT`` at once in the process, and none of the server's
environment but ``PATH``, ``HOME``, ``LANG`` and the project root.
"""

from __future__ import annotations

import asyncio
import json
import re
import threading
from pathlib import Path

import pytest
from django.test import Client
from django.urls import reverse
from fastmcp import Client as McpClient

from mcp_bridge.hosted.config import HostedConfig
from mcp_bridge.hosted.state import hosted_state
from mcp_bridge.server import create_server, server_for_state
from reviews.deepreview import precompute
from tests.support.factories import make_user
from workflows.models import Project
from workflows.services.projects import project_ensure, project_review_commands_set

pytestmark = pytest.mark.django_db(transaction=True)

PROJECTS = reverse("admin:workflows_project_changelist")


def review_project(tmp_path: Path, command: str) -> Path:
    root = tmp_path / "p"
    root.mkdir()
    (root / "a.md").write_text("a\n")
    (root / ".deepreview").write_text(
        "notes:\n"
        "  description: Notes\n"
        "  match: {include: ['*.md']}\n"
        "  review:\n"
        "    strategy: individual\n"
        "    instructions: Check it.\n"
        f"    precomputed_info_for_reviewer_bash_command: {json.dumps(command)}\n"
    )
    return root


def precomputed_context(root: Path, answer: str) -> str:
    """The first paragraph of the instruction file's precomputed context."""
    (review_id,) = re.findall(r'review_instructions/([^"]+)\.md"', answer)
    text = (root / ".deepwork/tmp/review_instructions" / f"{review_id}.md").read_text()
    return text.split("## Precomputed Context\n\n", 1)[1].split("\n\n", 1)[0]


def ask(server, files: list[str]) -> str:
    """``get_review_instructions`` called as an MCP client calls it."""

    async def call() -> str:
        async with McpClient(server) as client:
            answer = await client.call_tool("get_review_instructions", {"files": files})
        return answer.content[0].text

    return asyncio.run(call())


def hosted_server(root: Path):
    project = project_ensure(root_path=root)
    return project, server_for_state(
        hosted_state(project, HostedConfig.from_settings()), toolsets=["deepreview"]
    )


def test_the_web_server_runs_no_command_nobody_allowed(tmp_path):
    root = review_project(tmp_path, "touch ran.marker; echo context")
    project, server = hosted_server(root)

    answer = ask(server, ["a.md"])

    assert not (root / "ran.marker").exists()
    assert precomputed_context(root, answer) == (
        "**Precomputed context skipped:** this server runs a project's precompute commands only "
        'once a person has allowed them for the project (admin, Projects, "Allow review '
        f'commands"), and no one has for {project.name}.'
    )


def test_the_web_server_runs_them_once_a_person_allowed_them_and_not_after(tmp_path):
    root = review_project(tmp_path, "touch ran.marker; echo context")
    project, server = hosted_server(root)
    person = make_user(username="owner", perms=["workflows.allow_review_commands"])

    project_review_commands_set(project=project, allowed=True, by=person)
    answer = ask(server, ["a.md"])

    assert (root / "ran.marker").exists()
    assert precomputed_context(root, answer) == "context"
    (root / "ran.marker").unlink()
    project_review_commands_set(project=project, allowed=False, by=person)
    (root / "a.md").write_text("changed, so the review is written again\n")
    answer = ask(server, ["a.md"])
    assert not (root / "ran.marker").exists()
    assert "Precomputed context skipped" in precomputed_context(root, answer)


def test_over_stdio_the_users_own_project_runs_its_commands(tmp_path):
    root = review_project(tmp_path, "touch ran.marker; echo context")

    answer = ask(create_server(root, toolsets=["deepreview"]), ["a.md"])

    assert (root / "ran.marker").exists()
    assert precomputed_context(root, answer) == "context"


def test_a_command_sees_none_of_the_servers_environment(tmp_path, monkeypatch):
    for name, value in {
        "SECRET_KEY": "server-secret",
        "DATABASE_URL": "postgres://server@db/prod",
        "REDIS_URL": "redis://cache",
        "DEEPWORK_MCP_TOKEN": "tok",
    }.items():
        monkeypatch.setenv(name, value)
    root = review_project(tmp_path, "env > env.txt; echo done")

    ask(create_server(root, toolsets=["deepreview"]), ["a.md"])

    seen = dict(
        line.split("=", 1) for line in (root / "env.txt").read_text().splitlines() if "=" in line
    )
    assert set(seen) - {"SHLVL", "_", "OLDPWD"} <= {"PATH", "HOME", "LANG", "PWD"}
    assert seen["PWD"] == str(root)


def test_the_admin_allows_and_disallows_recording_who_and_when(tmp_path):
    root = tmp_path / "p"
    root.mkdir()
    project = project_ensure(root_path=root)
    person = make_user(
        username="lead",
        perms=["workflows.allow_review_commands", "workflows.view_project"],
        staff=True,
    )
    browser = Client()
    browser.force_login(person)

    def act(action: str) -> Project:
        browser.post(
            PROJECTS,
            {"action": action, "_selected_action": [project.pk], "select_across": "0", "index": 0},
        )
        return Project.objects.get(pk=project.pk)

    allowed = act("allow_review_commands")
    assert allowed.review_commands_allowed is True
    assert allowed.review_commands_changed_by == person
    assert allowed.review_commands_changed_by_name == "lead"
    assert allowed.review_commands_changed_at is not None
    page = browser.get(reverse("admin:workflows_project_change", args=[project.pk]))
    assert "allowed (by lead," in page.content.decode()
    assert act("disallow_review_commands").review_commands_allowed is False

    nobody = make_user(username="viewer", perms=["workflows.view_project"], staff=True)
    browser.force_login(nobody)
    listing = browser.get(PROJECTS).content.decode()
    assert "allow_review_commands" not in listing
    assert act("allow_review_commands").review_commands_allowed is False


def test_ten_concurrent_calls_never_run_more_than_the_cap(tmp_path):
    root = tmp_path / "p"
    root.mkdir()
    log = tmp_path / "times.log"
    # Each command records when it began and ended; the intervals show how many overlapped.
    command = f'echo "b $(date +%s%N)" >> {log}; sleep 0.3; echo "e $(date +%s%N)" >> {log}'
    everyone = threading.Barrier(10)

    def call(n: int) -> None:
        everyone.wait(timeout=30)
        precompute.run_commands([f"{command} # {n}"], root, precompute.RUN_COMMANDS)

    threads = [threading.Thread(target=call, args=(n,)) for n in range(10)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)

    marks = sorted(
        (int(stamp), kind)
        for kind, stamp in (line.split() for line in log.read_text().splitlines())
    )
    assert [kind for _, kind in marks].count("b") == 10
    running = peak = 0
    for _, kind in marks:
        running += 1 if kind == "b" else -1
        peak = max(peak, running)
    assert peak <= precompute.MAX_CONCURRENT == 4
