"""A project's git configuration names programs; the server runs none of them.

Each test builds a real repository whose ``.git/config`` names a clean/smudge/process filter
driver (used by every file through ``.gitattributes``), an fsmonitor, a hooks folder with a
``post-index-change`` hook, an external diff and a textconv driver. Every program touches a
marker file outside the repository. The tracker (``task_start``/``task_complete``), the review
tools (``get_review_instructions``), the quality gate's changed-files check and the step-files
look then run in it: no marker may appear, and what they report must still be right.
"""

from __future__ import annotations

import os
import re
import stat
import subprocess
import threading
import time
from pathlib import Path

import pytest

from reviews.deepreview.agent_tasks import get_review_instructions
from reviews.deepreview.changes import GitError, get_changed_files
from reviews.review_tasks import _project_rule_tasks
from tests.reviews import commit_all, git, isolate_git, make_repo, rule, write, write_rules
from tracker import services as tracker
from workflows import changes
from workflows import git as git_runner
from workflows.git import Git, GitTimedOut

MARKED_PROGRAMS = ("clean", "smudge", "process", "dotted", "fsmonitor", "extdiff", "textconv")


@pytest.fixture(autouse=True)
def _isolated_git(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    isolate_git(monkeypatch, tmp_path)


def _program(path: Path, body: str) -> str:
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


@pytest.fixture
def markers(tmp_path: Path) -> Path:
    folder = tmp_path / "markers"
    folder.mkdir()
    return folder


def arm(repo: Path, markers: Path) -> None:
    """Make ``repo``'s configuration name a marking program for everything git could run."""
    bin_dir = repo.parent / "programs"
    bin_dir.mkdir(exist_ok=True)
    mark = _program(bin_dir / "mark", f'touch "{markers}/$1"\ncat')
    hooks = repo.parent / "hooks"
    hooks.mkdir(exist_ok=True)
    for hook in ("post-index-change", "pre-commit", "post-checkout", "reference-transaction"):
        _program(hooks / hook, f'touch "{markers}/hook-{hook}"')
    settings = {
        "filter.evil.clean": f"{mark} clean",
        "filter.evil.smudge": f"{mark} smudge",
        "filter.evil.process": f"{mark} process",
        "filter.evil.required": "true",
        # A driver name with a dot and an '=' in it: a `-c name=value` override would split it.
        "filter.odd=x.y.clean": f"{mark} dotted",
        "core.fsmonitor": f"{mark} fsmonitor",
        "core.hooksPath": str(hooks),
        "diff.external": f"{mark} extdiff",
        "diff.tc.textconv": f"{mark} textconv",
    }
    for key, value in settings.items():
        git(repo, "config", key, value)
    (repo / ".git" / "info").mkdir(exist_ok=True)
    # Attributes in .git/info so they need no commit (which would run the filter here).
    (repo / ".git" / "info" / "attributes").write_text(
        "* filter=evil diff=tc\n*.md filter=odd=x.y diff=tc\n"
    )


def agent_git(repo: Path, *args: str) -> None:
    """Git as the agent at work would run it, with the marking programs switched off."""
    quiet = {
        "core.fsmonitor": "false",
        "core.hooksPath": os.devnull,
        "filter.evil.process": "",
        "filter.evil.clean": "",
        "filter.evil.smudge": "",
        "filter.evil.required": "false",
        "filter.odd=x.y.clean": "",
    }
    env = {**os.environ, "GIT_CONFIG_COUNT": str(len(quiet))}
    for n, (key, value) in enumerate(quiet.items()):
        env |= {f"GIT_CONFIG_KEY_{n}": key, f"GIT_CONFIG_VALUE_{n}": value}
    done = subprocess.run(
        ["git", "-c", "user.name=T", "-c", "user.email=t@example.com", *args],
        cwd=repo,
        env=env,
        check=False,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr


def marks(markers: Path) -> list[str]:
    return sorted(p.name for p in markers.iterdir())


def make_everything_stat_dirty(repo: Path) -> None:
    """Change every tracked file's time, so git must read (and filter) each one to compare."""
    later = time.time() + 5
    for path in repo.rglob("*"):
        if ".git" not in path.parts and path.is_file():
            os.utime(path, (later, later))


@pytest.fixture
def hostile(tmp_path: Path, markers: Path) -> Path:
    repo = make_repo(tmp_path / "repo")
    write(repo, "src/keep.py", "keep\n")
    write(repo, "src/edit.py", "edit\n")
    write(repo, "docs/readme.md", "docs\n")
    write(repo, "gone.txt", "gone\n")
    write_rules(repo, {"everything": rule(["**/*"])})
    commit_all(repo, "initial")
    arm(repo, markers)
    make_everything_stat_dirty(repo)
    assert marks(markers) == []
    return repo


def test_plain_git_would_run_every_program(hostile: Path, markers: Path) -> None:
    # The repository is really armed: git, run as a user would, starts its programs.
    subprocess.run(["git", "status"], cwd=hostile, capture_output=True, check=False)
    assert {"fsmonitor", "process"} <= set(marks(markers))


@pytest.mark.django_db(transaction=True)
def test_the_tracker_runs_nothing_the_configuration_names(project, agent, hostile, markers):
    workflow = tracker.tracked_workflow_start(project=project, agent=agent, name="w", objective="o")
    started = tracker.task_start(
        project=project, agent=agent, workflow_id=str(workflow.pk), name="t", goal="g", root=hostile
    )
    assert started.task.snapshot["kind"] == "git"
    write(hostile, "src/edit.py", "edited\n")
    write(hostile, "src/new.py", "new\n")
    (hostile / "gone.txt").unlink()
    agent_git(hostile, "add", "src/new.py")
    make_everything_stat_dirty(hostile)

    done = tracker.task_complete(
        project=project,
        agent=agent,
        task_id=str(started.task.pk),
        status="success",
        summary="s",
        root=hostile,
    )

    assert done.files.as_dict() == {
        "added": ["src/new.py"],
        "modified": ["src/edit.py"],
        "deleted": ["gone.txt"],
    }
    assert done.files.warnings == []
    assert marks(markers) == []


def test_the_changes_look_runs_nothing_and_is_right_after_a_commit(hostile, markers):
    snapshot = changes.snapshot_take(root=hostile)
    write(hostile, "src/edit.py", "edited\n")
    agent_git(hostile, "rm", "-q", "gone.txt")
    agent_git(hostile, "commit", "-q", "-am", "during the task")
    write(hostile, "docs/new.md", "new\n")
    make_everything_stat_dirty(hostile)

    found, after = changes.changes_and_snapshot(root=hostile, snapshot=snapshot)

    assert (found.added, found.modified, found.deleted) == (
        ["docs/new.md"],
        ["src/edit.py"],
        ["gone.txt"],
    )
    assert after.kind == "git"
    assert marks(markers) == []


def test_review_instructions_and_the_gate_run_nothing(hostile, markers):
    write(hostile, "src/edit.py", "edited\n")
    write(hostile, "docs/new.md", "new\n")
    make_everything_stat_dirty(hostile)

    assert get_changed_files(hostile) == ["docs/new.md", "src/edit.py"]
    text = get_review_instructions(project_root=hostile, files=None, platform=None)
    reviewed = re.findall(r"review_instructions/everything--(.+)--[0-9a-f]+\.md", text)
    assert sorted(reviewed) == ["docs-new.md", "src-edit.py"]
    assert "Warning" not in text
    tasks = _project_rule_tasks(hostile, {"out": ["src/edit.py", "src/keep.py"]})
    assert [task.files_to_review for task in tasks] == [("src/edit.py",)]
    assert marks(markers) == []


def test_git_gets_none_of_the_servers_environment(hostile, monkeypatch, tmp_path):
    monkeypatch.setenv("SECRET_KEY", "server-secret")
    monkeypatch.setenv("DATABASE_URL", "postgres://server@db/prod")
    monkeypatch.setenv("GIT_EXTERNAL_DIFF", "/bin/false")
    dump = tmp_path / "env.txt"
    # An alias is the one way to make git itself start a program this test controls.
    git(hostile, "config", "alias.dumpenv", f"!env > {dump}")

    Git(hostile).run("dumpenv")

    seen = dict(line.split("=", 1) for line in dump.read_text().splitlines() if "=" in line)
    assert "SECRET_KEY" not in seen
    assert "DATABASE_URL" not in seen
    assert "GIT_EXTERNAL_DIFF" not in seen
    assert seen["LC_ALL"] == "C"
    assert seen["GIT_CONFIG_NOSYSTEM"] == "1"
    assert seen["GIT_CONFIG_GLOBAL"] == os.devnull


def test_a_hanging_git_is_killed_with_everything_it_started(hostile, tmp_path):
    pid_file = tmp_path / "child.pid"
    # The shell git starts starts a sleep of its own: both must die at the timeout.
    git(hostile, "config", "alias.hang", f"!sh -c 'echo $$ > {pid_file}; exec sleep 300'")

    begun = time.monotonic()
    with pytest.raises(GitTimedOut, match="git hang did not answer within 1 seconds"):
        Git(hostile, timeout=1).run("hang")

    assert time.monotonic() - begun < 30  # did not wait for the sleep
    child = int(pid_file.read_text())
    for _ in range(100):
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            break
        time.sleep(0.05)
    else:
        pytest.fail(f"the sleep git started (pid {child}) outlived the timeout")


def test_review_changes_time_out_on_a_git_that_blocks(hostile, monkeypatch):
    # Git reads the excludes file while listing untracked files: a named pipe there blocks it
    # for real until the timeout kills it.
    exclude = hostile / ".git" / "info" / "exclude"
    exclude.unlink(missing_ok=True)
    os.mkfifo(exclude)
    monkeypatch.setattr(git_runner, "DEFAULT_TIMEOUT_SECONDS", 1.0)
    outcome: list[object] = []

    def look() -> None:
        try:
            outcome.append(get_changed_files(hostile))
        except GitError as exc:
            outcome.append(exc)

    worker = threading.Thread(target=look, daemon=True)
    worker.start()
    worker.join(30)
    if worker.is_alive():
        os.close(os.open(exclude, os.O_RDWR | os.O_NONBLOCK))  # let the old code's git go
        worker.join(30)
        pytest.fail("get_changed_files waited on a blocked git with no timeout")
    (error,) = outcome
    assert isinstance(error, GitError)
    assert re.fullmatch(r"git [a-z-]+ did not answer within 1 seconds", str(error))


@pytest.mark.parametrize("elsewhere", ["/etc", "/"])
@pytest.mark.django_db(transaction=True)
def test_a_work_tree_pointed_elsewhere_is_read_where_the_git_folder_is_with_a_warning(
    project, agent, tmp_path, elsewhere
):
    repo = make_repo(tmp_path / "repo")
    write(repo, "a.txt", "a\n")
    write_rules(repo, {"everything": rule(["**/*"])})
    commit_all(repo, "initial")
    git(repo, "config", "core.worktree", elsewhere)
    warning = (
        f"the repository's core.worktree setting points git at {elsewhere}, not at {repo} "
        f"where its .git is; {repo} was read instead"
    )
    workflow = tracker.tracked_workflow_start(project=project, agent=agent, name="w", objective="o")
    started = tracker.task_start(
        project=project, agent=agent, workflow_id=str(workflow.pk), name="t", goal="g", root=repo
    )
    write(repo, "a.txt", "changed\n")
    write(repo, "b.txt", "new\n")

    done = tracker.task_complete(
        project=project,
        agent=agent,
        task_id=str(started.task.pk),
        status="success",
        summary="s",
        root=repo,
    )

    assert done.files.as_dict() == {"added": ["b.txt"], "modified": ["a.txt"], "deleted": []}
    assert warning in done.files.warnings
    text = get_review_instructions(project_root=repo, files=None, platform=None)
    assert text.startswith(f"Warning: {warning}\n")
    reviewed = re.findall(r"review_instructions/everything--(.+)--[0-9a-f]+\.md", text)
    assert sorted(reviewed) == ["a.txt", "b.txt"]
