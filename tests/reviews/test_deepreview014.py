"""The review tools as DeepWork 0.14 answers them."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

from reviews.deepreview import mark_review_as_passed
from reviews.deepreview.agent_tasks import get_configured_reviews, get_review_instructions


def _write(root: Path, rel: str, text: str) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))


def _project(tmp_path: Path) -> Path:
    root = tmp_path / "p"
    _write(
        root,
        ".deepreview",
        """\
        md_style:
          description: "Markdown style"
          match: {include: ["**/*.md"]}
          review: {strategy: individual, instructions: "Check the style."}
        everything:
          description: "Everything"
          match: {include: ["**/*"]}
          review: {strategy: matches_together, instructions: "Look at all of it."}
        """,
    )
    _write(
        root,
        "sub/.deepreview",
        """\
        py_rule:
          description: "Python"
          match: {include: ["*.py"]}
          review: {strategy: individual, instructions: "Check the code."}
        """,
    )
    _write(root, "sub/a.py", "print(1)\n")
    _write(root, "docs/x.md", "# x\n")
    return root


def test_explicit_files_drop_catch_all_rules_and_use_014_format(tmp_path: Path) -> None:
    root = _project(tmp_path)
    text = get_review_instructions(
        project_root=root, files=["sub/a.py", "docs/x.md"], platform=None
    )
    assert text.startswith("Invoke the following list of Agents in parallel.\n")
    assert sorted(re.findall(r"description: (.+)", text)) == [
        "Review md_style",
        "Review sub/py_rule",
    ]
    assert text.count("\tsubagent_type: deepwork:reviewer") == 2
    assert get_review_instructions(project_root=root, files=[], platform=None) == (
        "No changed files detected."
    )
    for review_id in re.findall(r"review_instructions/(.+)\.md", text):
        mark_review_as_passed(project_root=root, review_id=review_id)
    again = get_review_instructions(
        project_root=root, files=["sub/a.py", "docs/x.md"], platform=None
    )
    assert again.endswith("No review tasks to execute.")


def test_configured_reviews_leave_out_catch_all_rules_when_filtering(tmp_path: Path) -> None:
    root = _project(tmp_path)
    assert get_configured_reviews(project_root=root, only_rules_matching_files=["sub/a.py"]) == [
        {"name": "py_rule", "description": "Python", "defining_file": "sub/.deepreview:1"}
    ]
    everything = get_configured_reviews(project_root=root, only_rules_matching_files=None)
    assert {rule["name"] for rule in everything} == {"md_style", "everything", "py_rule"}
