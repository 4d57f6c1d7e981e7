"""``mcpserve --toolsets tracker`` as a real stdio subprocess in a real git repository (and in a
folder without git): phases, a nested task, logs, and the exact files a task changed."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.driver import Driver
from tests.mcp_bridge.test_lean_start import NOT_NEEDED, WEB_STACK
from tests.support.processes import MANAGE, child_env_on_test_db, handshake

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.e2e]


def git(root: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = (tmp_path / "repo").resolve()
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    git(root, "config", "user.email", "t@example.com")
    git(root, "config", "user.name", "t")
    for name in ("staged.txt", "unstaged.txt", "old.txt", "doomed.txt", "dirty.txt"):
        (root / name).write_text(f"{name} at the start\n")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "start")
    # Already dirty or untracked before the task, and not touched during it: not the task's.
    (root / "dirty.txt").write_text("dirty before the task\n")
    (root / "before.txt").write_text("untracked before the task\n")
    return root


async def test_two_phases_nested_tasks_logs_and_exact_git_changes(repo: Path):
    async with Driver(repo, "--toolsets", "tracker") as agent:
        assert "complete_task" in await agent.tool_names()
        wf = (await agent.call("start_workflow", {"name": "Ship", "objective": "ship it"}))[
            "workflow_id"
        ]
        plan = await agent.call(
            "start_task",
            {"workflow_id": wf, "name": "Plan", "goal": "a plan", "phase": 1, "phase_name": "Plan"},
        )
        assert plan["phase_created"] is True
        assert plan["snapshot_type"] == "git"
        assert len(plan["snapshot_id"]) == 40  # the start commit
        research = await agent.call(
            "start_task",
            {
                "workflow_id": wf,
                "name": "Research",
                "goal": "read",
                "phase": 1,
                "parent_task_id": plan["task_id"],
                "caller_type": "subagent",
                "agent_name": "reader",
            },
        )
        await agent.call(
            "log_decision",
            {
                "task_id": research["task_id"],
                "category": "architecture",
                "question": "One engine?",
                "options_considered": ["one", "two"],
                "chosen": "one",
                "reasoning": "simpler",
            },
        )
        blocker = await agent.call(
            "log_issue",
            {
                "task_id": research["task_id"],
                "type": "unclear_requirement",
                "description": "which format?",
                "resolution": "asked",
                "requires_human_review": True,
            },
        )
        await agent.call(
            "log_milestone", {"task_id": research["task_id"], "message": "read", "progress": 100}
        )
        error = await agent.call_error(
            "complete_task",
            {"task_id": plan["task_id"], "status": "success", "outcome": {"summary": "s"}},
        )
        assert '"code": "CONFLICT"' in error
        assert "'Research'" in error
        await agent.call(
            "complete_task",
            {"task_id": research["task_id"], "status": "success", "outcome": {"summary": "r"}},
        )
        closed = await agent.call(
            "complete_task",
            {
                "task_id": plan["task_id"],
                "status": "success",
                "outcome": {"summary": "planned"},
                "phase_complete": True,
            },
        )
        assert closed["phase_status"] == "completed"
        assert closed["files_changed"] == {"added": [], "modified": [], "deleted": []}

        change = await agent.call(
            "start_task",
            {
                "workflow_id": wf,
                "name": "Change files",
                "goal": "edit",
                "phase": 2,
                "areas": ["*.txt", "docs/"],
            },
        )
        assert change["phase_created"] is True
        (repo / "committed.txt").write_text("committed during the task\n")
        git(repo, "add", "committed.txt")
        git(repo, "commit", "-qm", "during the task")
        (repo / "staged.txt").write_text("staged change\n")
        git(repo, "add", "staged.txt")
        (repo / "unstaged.txt").write_text("unstaged change\n")
        (repo / "untracked.md").write_text("new and untracked\n")
        git(repo, "mv", "old.txt", "renamed.txt")
        (repo / "doomed.txt").unlink()
        done = await agent.call(
            "complete_task",
            {
                "task_id": change["task_id"],
                "status": "partial_success",
                "outcome": {"summary": "e"},
            },
        )
        assert done["files_changed"] == {
            "added": ["committed.txt", "renamed.txt", "untracked.md"],
            "modified": ["staged.txt", "unstaged.txt"],
            "deleted": ["doomed.txt", "old.txt"],
        }
        assert done["verification"]["scope_match"] is False
        assert done["verification"]["unexpected_files"] == ["untracked.md"]
        assert done["phase_status"] == "in_progress"

        context = await agent.call(
            "get_context",
            {
                "workflow_id": wf,
                "include": ["decisions", "milestones", "blockers", "tasks", "phase_summary"],
            },
        )
        assert [b["id"] for b in context["blockers"]] == [blocker["issue_id"]]
        assert context["decisions"][0]["options_considered"] == ["one", "two"]
        assert [p["phase_name"] for p in context["phase_summary"]] == ["Plan", "Phase 2"]
        assert context["tasks_count"] == 3
        tasks = {t["name"]: t for t in context["tasks"]}
        assert tasks["Research"]["parent_task_id"] == plan["task_id"]
        assert tasks["Change files"]["files_changed"]["deleted"] == ["doomed.txt", "old.txt"]

        finished = await agent.call(
            "complete_workflow", {"workflow_id": wf, "status": "completed", "summary": "done"}
        )
        assert finished["metrics"]["total_phases"] == 2
        assert finished["metrics"]["total_tasks"] == 3
        assert finished["metrics"]["files_changed"] == 7


async def test_a_folder_without_git_is_really_compared(tmp_path: Path):
    root = (tmp_path / "plain").resolve()
    root.mkdir()
    (root / "keep.txt").write_text("keep\n")
    (root / "edit.txt").write_text("edit\n")
    (root / "drop.txt").write_text("drop\n")
    async with Driver(root, "--toolsets", "tracker") as agent:
        wf = (await agent.call("start_workflow", {"name": "Plain"}))["workflow_id"]
        task = await agent.call("start_task", {"workflow_id": wf, "name": "t", "goal": "g"})
        assert task["snapshot_type"] == "tree"
        (root / "edit.txt").write_text("edited, longer\n")
        (root / "drop.txt").unlink()
        (root / "sub").mkdir()
        (root / "sub" / "new.txt").write_text("new\n")
        done = await agent.call(
            "complete_task",
            {"task_id": task["task_id"], "status": "success", "outcome": {"summary": "s"}},
        )
        assert done["files_changed"] == {
            "added": ["sub/new.txt"],
            "modified": ["edit.txt"],
            "deleted": ["drop.txt"],
        }
        assert done["verification"] == {"scope_match": True, "unexpected_files": [], "warnings": []}


def test_mcpserve_tracker_starts_lean(tmp_path: Path):
    """Alone, the tracker loads neither the web stack nor what only later calls need."""
    root = (tmp_path / "lean").resolve()
    root.mkdir()
    messages = [
        *handshake("lean"),
        {
            "jsonrpc": "2.0",
            "id": 3,
            "method": "tools/call",
            "params": {"name": "start_workflow", "arguments": {"name": "lean"}},
        },
    ]
    log = (tmp_path / "stderr").open("wb")  # a file: the import list outgrows a pipe's buffer
    args = [sys.executable, "-X", "importtime", MANAGE, "mcpserve", "--path", str(root)]
    server = subprocess.Popen(
        [*args, "--toolsets", "tracker"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=log,
        env=child_env_on_test_db(),
    )
    try:
        assert server.stdin is not None
        assert server.stdout is not None
        server.stdin.write("".join(json.dumps(m) + "\n" for m in messages).encode())
        server.stdin.flush()
        answers = {a["id"]: a for a in (json.loads(server.stdout.readline()) for _ in range(3))}
        server.stdin.close()
        code = server.wait(timeout=60)
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
        log.close()
    stderr = (tmp_path / "stderr").read_text()
    assert code == 0, stderr[-3000:]
    assert len(answers[2]["result"]["tools"]) == 10
    assert not answers[3]["result"].get("isError"), answers[3]
    imported = set(re.findall(r"^import time:.*\|\s*(\S+)$", stderr, re.M))
    assert "tracker.services" in imported  # the list is real
    for root_module in (*WEB_STACK, *NOT_NEEDED, "wcmatch"):
        loaded = sorted(m for m in imported if m == root_module or m.startswith(root_module + "."))
        assert not loaded, f"mcpserve --toolsets tracker imported {loaded}"


async def test_deepwork_and_tracker_on_one_server(demo_project: Path):
    async with Driver(demo_project, "--toolsets", "deepwork,tracker") as agent:
        names = await agent.tool_names()
        assert {"start_workflow", "get_workflows", "tracker_start_workflow"} <= names
        assert "tracker_complete_task" in names
        assert "complete_task" not in names  # the later toolset's names all carry its prefix
        wf = await agent.call("tracker_start_workflow", {"name": "both"})
        task = await agent.call(
            "tracker_start_task", {"workflow_id": wf["workflow_id"], "name": "t", "goal": "g"}
        )
        session = await agent.call(
            "start_workflow", {"goal": "g", "job_name": "demo", "workflow_name": "quick"}
        )
        assert session["begin_step"]["step_id"] == "gather"
        done = await agent.call(
            "tracker_complete_task",
            {"task_id": task["task_id"], "status": "success", "outcome": {"summary": "s"}},
        )
        assert done["status"] == "success"
