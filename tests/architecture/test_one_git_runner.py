"""Git is started in one place, ``workflows.git``, which runs nothing a project's configuration
names; the product starts no other program except where it is its purpose (a project's review
precompute commands, the reviewer, the migration of a DeepWork install) and those places do not
start git.

Read from the source: every import of ``subprocess`` (or ``asyncio.subprocess``) and every call
that starts a process (``asyncio.create_subprocess_*``, ``os.system``, ``os.popen``, the
``os.spawn*``/``os.exec*``/``os.posix_spawn*`` families), at module level or in a function body.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
APPS = ("api", "dashboard", "deepwork_site", "mcp_bridge", "reviews", "workflows")
GIT_RUNNER = "workflows/git.py"
# Modules whose purpose is to start a program that is not git.
OTHER_PROGRAMS = ("reviews/deepreview/precompute.py", "reviews/gate.py", "mcp_bridge/migrate.py")
_STARTERS = {"create_subprocess_exec", "create_subprocess_shell", "system", "popen"}
_STARTER_PREFIXES = ("spawn", "exec", "posix_spawn")


def process_starts(source: str, filename: str = "<source>") -> list[str]:
    """What in ``source`` imports a process module or starts a process, one line each."""
    found = []
    for node in ast.walk(ast.parse(source, filename=filename)):
        if isinstance(node, ast.Import):
            found += [
                f"{node.lineno}: import {alias.name}"
                for alias in node.names
                if alias.name in ("subprocess", "asyncio.subprocess")
            ]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names = {alias.name for alias in node.names}
            if node.module in ("subprocess", "asyncio.subprocess") or (
                node.module in ("asyncio", "os") and names & (_STARTERS | {"subprocess"})
            ):
                found.append(f"{node.lineno}: from {node.module} import {', '.join(sorted(names))}")
        elif isinstance(node, ast.Attribute) and (
            node.attr in _STARTERS
            and isinstance(node.value, ast.Name)
            and node.value.id in ("os", "asyncio")
            or node.attr.startswith(_STARTER_PREFIXES)
            and isinstance(node.value, ast.Name)
            and node.value.id == "os"
        ):
            found.append(f"{node.lineno}: {node.value.id}.{node.attr}")
    return found


def mentions_git_program(source: str) -> bool:
    """Whether ``source`` holds the string ``"git"`` on its own (a program name)."""
    return any(
        isinstance(node, ast.Constant) and node.value == "git"
        for node in ast.walk(ast.parse(source))
    )


def app_sources() -> list[Path]:
    return sorted(
        path
        for app in APPS
        for path in (ROOT / app).rglob("*.py")
        if "migrations" not in path.relative_to(ROOT).parts
    )


def violations(paths: list[Path], root: Path = ROOT) -> list[str]:
    found = []
    for path in paths:
        name = path.relative_to(root).as_posix()
        if name == GIT_RUNNER:
            continue
        source = path.read_text()
        starts = process_starts(source, name)
        if starts and name not in OTHER_PROGRAMS:
            found += [f"{name}:{start}" for start in starts]
        elif starts and mentions_git_program(source):
            found.append(f"{name}: starts processes and names the git program")
    return found


def test_only_the_git_runner_starts_git_and_only_allowed_modules_start_programs():
    assert violations(app_sources()) == []


def test_the_runner_and_the_allowed_modules_exist():
    # A renamed module would silently leave the allow-list pointing at nothing.
    for name in (GIT_RUNNER, *OTHER_PROGRAMS):
        assert (ROOT / name).is_file(), name
        assert process_starts((ROOT / name).read_text()), f"{name} starts no process any more"


def test_a_planted_git_call_is_found(tmp_path):
    planted = {
        "workflows/sneaky.py": "import subprocess\nsubprocess.run(['git', 'status'])\n",
        "reviews/lazy.py": "def f():\n    from subprocess import run\n    run(['git'])\n",
        "api/shell.py": "import os\nos.system('git status')\n",
        "dashboard/spawn.py": "import os\nos.execvp('git', ['git'])\n",
        "mcp_bridge/aio.py": (
            "import asyncio\nasync def f():\n    await asyncio.create_subprocess_exec('git')\n"
        ),
        "reviews/gate.py": "import asyncio.subprocess\nPROGRAM = 'git'\n",
        "workflows/fine.py": "import os\nos.getcwd()\n",
    }
    for name, source in planted.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(source)

    found = violations(sorted(tmp_path.rglob("*.py")), root=tmp_path)

    assert found == [
        "api/shell.py:2: os.system",
        "dashboard/spawn.py:2: os.execvp",
        "mcp_bridge/aio.py:3: asyncio.create_subprocess_exec",
        "reviews/gate.py: starts processes and names the git program",
        "reviews/lazy.py:2: from subprocess import run",
        "workflows/sneaky.py:1: import subprocess",
    ]
