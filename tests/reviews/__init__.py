"""Helpers for the DeepWork Reviews tests: real git repositories and ``.deepreview`` files.

They live here rather than in a conftest so each test module imports what it uses explicitly.
"""

from __future__ import annotations

import subprocess
import textwrap
from pathlib import Path
from typing import Any

import pytest
import yaml


def isolate_git(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Keep the developer's git config and any enclosing repository out of the tests."""
    for name in ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(tmp_path / "no-global-gitconfig"))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    # Without a ceiling, a tmp dir that happens to sit inside a checkout would count as a repo.
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))


def git(repo: Path, *args: str) -> str:
    result = subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=False)
    assert result.returncode == 0, f"git {' '.join(args)} failed: {result.stderr}"
    return result.stdout


def make_repo(path: Path, *, branch: str = "main") -> Path:
    path.mkdir(parents=True, exist_ok=True)
    git(path, "-c", f"init.defaultBranch={branch}", "init", "-q")
    git(path, "config", "user.name", "Review Tests")
    git(path, "config", "user.email", "reviews@example.com")
    git(path, "config", "commit.gpgsign", "false")
    return path


def commit_all(repo: Path, message: str = "commit") -> None:
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message)


def write(root: Path, rel: str, text: str = "content\n") -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def rule(
    include: list[str],
    *,
    strategy: str = "individual",
    instructions: Any = "Check it.",
    description: str = "A rule",
    exclude: list[str] | None = None,
    agent: dict[str, str] | None = None,
    context: dict[str, bool] | None = None,
) -> dict[str, Any]:
    review: dict[str, Any] = {"strategy": strategy, "instructions": instructions}
    if agent is not None:
        review["agent"] = agent
    if context is not None:
        review["additional_context"] = context
    match: dict[str, Any] = {"include": include}
    if exclude is not None:
        match["exclude"] = exclude
    return {"description": description, "match": match, "review": review}


def write_rules(directory: Path, rules: dict[str, dict[str, Any]]) -> Path:
    """Write a ``.deepreview`` holding ``rules`` (in order) into ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / ".deepreview"
    path.write_text(yaml.safe_dump(rules, sort_keys=False))
    return path


def write_text_rules(directory: Path, text: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / ".deepreview"
    path.write_text(textwrap.dedent(text))
    return path


def write_notes_rule_with_014_keys(project_dir: Path) -> None:
    """A `.deepreview` rule on every Markdown file that uses DeepWork 0.14's two extra keys: a
    reference file (docs/guide.md) and a precomputed-context command (docs/context.sh, which
    counts the lines of notes.md)."""
    notes = rule(["*.md"], instructions="Notes follow the guide.")
    notes["review"]["reference_files"] = [{"path": "docs/guide.md", "description": "The guide"}]
    notes["review"]["precomputed_info_for_reviewer_bash_command"] = "docs/context.sh"
    write_rules(project_dir, {"notes_rule": notes})
    write(project_dir, "docs/guide.md", "Every note names a source.\n")
    script = write(project_dir, "docs/context.sh", 'echo "changed lines: $(wc -l < notes.md)"\n')
    script.chmod(0o755)
