"""0.14's ``.deepreview`` keys ``reference_files`` and
``precomputed_info_for_reviewer_bash_command``: accepted and carried out
by the 0.14 dialect only; 0.9.1 keeps refusing them."""

from __future__ import annotations

import os
import re
import textwrap
from pathlib import Path

import pytest

from reviews.deepreview import precompute
from reviews.deepreview.agent_tasks import get_configured_reviews, get_review_instructions
from reviews.deepreview.config import ConfigError, ReviewRule, parse_deepreview_text
from reviews.deepreview.discovery import load_all_rules
from reviews.deepreview.tools import get_review_instructions as get_review_instructions_091

RULE = """\
r:
  description: "d"
  match: {include: ["**/*.md"]}
  review:
    strategy: matches_together
    instructions: "Check it."
"""


def _write(root: Path, rel: str, text: str) -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


def _rule_text(**review: str) -> str:
    return RULE + "".join(f"    {key}: {value}\n" for key, value in review.items())


def _parse(
    root: Path, text: str, *, extended_keys: bool = True, rel: str = ".deepreview"
) -> list[ReviewRule]:
    return parse_deepreview_text(text, root / rel, project_root=root, extended_keys=extended_keys)


def _instruction_files(root: Path, answer: str) -> list[str]:
    ids = re.findall(r'review_instructions/([^"]+)\.md"', answer)
    assert ids, answer
    return [(root / ".deepwork/tmp/review_instructions" / f"{i}.md").read_text() for i in ids]


def _section(text: str, heading: str) -> str:
    after = text.split(f"## {heading}\n\n", 1)[1]
    return after.split("\n## ", 1)[0]


# --- parsing ---------------------------------------------------------------------------------


def test_091_still_refuses_the_new_keys(tmp_path: Path) -> None:
    for key, value in (
        ("reference_files", "[{path: a.md}]"),
        ("precomputed_info_for_reviewer_bash_command", "'echo hi'"),
    ):
        with pytest.raises(ConfigError) as caught:
            _parse(tmp_path, _rule_text(**{key: value}), extended_keys=False)
        assert str(caught.value) == (
            f"Schema validation failed for {tmp_path / '.deepreview'}: Validation error at "
            f"r -> review: Additional properties are not allowed ('{key}' was unexpected)"
        )


def test_014_paths_are_relative_to_the_deepreview_directory(tmp_path: Path) -> None:
    text = _rule_text(
        reference_files="[{path: guide.md, description: Style guide}, {path: ../top.md}]",
        precomputed_info_for_reviewer_bash_command="'git log -1'",
    )
    [rule] = _parse(tmp_path, text, rel="sub/.deepreview")
    assert rule.reference_files == (("sub/guide.md", "Style guide"), ("top.md", ""))
    assert rule.precompute_command == "git log -1"


def test_014_command_naming_a_script_beside_the_file_is_made_absolute(tmp_path: Path) -> None:
    _write(tmp_path, "sub/ctx.sh", "echo ctx\n")
    [rule] = _parse(
        tmp_path,
        _rule_text(precomputed_info_for_reviewer_bash_command="'./ctx.sh --all'"),
        rel="sub/.deepreview",
    )
    assert rule.precompute_command == f"{tmp_path / 'sub' / 'ctx.sh'} --all"


@pytest.mark.parametrize(
    ("review", "message"),
    [
        (
            {"reference_files": "a.md"},
            "r -> review -> reference_files: 'a.md' is not of type 'array'",
        ),
        (
            {"reference_files": "[{description: x}]"},
            "r -> review -> reference_files -> 0: 'path' is a required property",
        ),
        (
            {"reference_files": "[{path: a.md, why: x}]"},
            "r -> review -> reference_files -> 0: Additional properties are not allowed "
            "('why' was unexpected)",
        ),
        (
            {"reference_files": "[{path: 5}]"},
            "r -> review -> reference_files -> 0 -> path: 5 is not of type 'string'",
        ),
        (
            {"precomputed_info_for_reviewer_bash_command": "[echo]"},
            "r -> review -> precomputed_info_for_reviewer_bash_command: ['echo'] is not of "
            "type 'string'",
        ),
    ],
)
def test_014_wrong_types_are_precise_parse_errors(
    tmp_path: Path, review: dict[str, str], message: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        _parse(tmp_path, _rule_text(**review))
    assert str(caught.value) == (
        f"Schema validation failed for {tmp_path / '.deepreview'}: Validation error at {message}"
    )


@pytest.mark.parametrize(
    ("path", "message"),
    [
        (
            "../../etc/passwd",
            "Rule 'r': reference file '../../etc/passwd' is outside the project root",
        ),
        ("/etc/passwd", "Rule 'r': reference file '/etc/passwd' must be a path relative to"),
    ],
)
def test_014_reference_leaving_the_project_is_a_parse_warning(
    tmp_path: Path, path: str, message: str
) -> None:
    _write(tmp_path, "sub/.deepreview", _rule_text(reference_files=f"[{{path: '{path}'}}]"))
    rules, failures = load_all_rules(tmp_path, extended_keys=True)
    assert rules == []
    [failure] = failures
    source = tmp_path / "sub/.deepreview"
    assert failure.error.startswith(f"Failed to parse {source}: {message}"), failure.error
    # The listing shows the broken file as 0.14 does, beside the other rules.
    [entry] = get_configured_reviews(project_root=tmp_path, only_rules_matching_files=None)
    assert entry["name"] == f"PARSE_ERROR:{tmp_path / 'sub/.deepreview'}"


# --- instruction files -----------------------------------------------------------------------


def test_reference_files_are_inlined_and_bad_ones_explained(tmp_path: Path) -> None:
    outside = _write(tmp_path, "outside/secret.txt", "TOP SECRET\n")
    root = tmp_path / "p"
    _write(root, "docs/guide.md", "Use short sentences.\n")
    _write(root, "docs/notes.md", "hello\n")
    os.symlink(outside, root / "docs/leak.md")
    _write(
        root,
        "docs/.deepreview",
        _rule_text(
            reference_files=(
                "[{path: guide.md, description: The style guide}, {path: gone.md}, {path: leak.md}]"
            )
        ).replace('"**/*.md"', '"notes.md"'),
    )
    answer = get_review_instructions(
        project_root=root, files=["docs/notes.md"], platform=None, commands=precompute.RUN_COMMANDS
    )
    [text] = _instruction_files(root, answer)
    relevant = _section(text, "Relevant File Contents")
    assert "### docs/guide.md\n\nThe style guide\n\n```markdown\nUse short sentences.\n```" in (
        relevant
    )
    assert "(could not inline docs/gone.md: " in relevant
    assert "(could not inline docs/leak.md: " in relevant
    assert "TOP SECRET" not in text


def _precompute_project(tmp_path: Path, command: str) -> Path:
    root = tmp_path / "p"
    _write(root, "a.md", "a\n")
    _write(root, "b.md", "b\n")
    _write(
        root,
        ".deepreview",
        _rule_text(precomputed_info_for_reviewer_bash_command=command).replace(
            "matches_together", "individual"
        ),
    )
    return root


def test_precompute_stdout_goes_into_its_section_once_per_command(tmp_path: Path) -> None:
    root = _precompute_project(tmp_path, "'echo run >> runs.log; pwd; echo ok'")
    answer = get_review_instructions(
        project_root=root, files=["a.md", "b.md"], platform=None, commands=precompute.RUN_COMMANDS
    )
    texts = _instruction_files(root, answer)
    assert len(texts) == 2
    for text in texts:
        assert _section(text, "Precomputed Context") == f"{root}\nok\n"
        headings = [line for line in text.splitlines() if line.startswith("## ")]
        assert headings[-2:] == ["## Precomputed Context", "## After Review"]
    # Run from the project root, and once for both tasks of the rule.
    assert (root / "runs.log").read_text() == "run\n"


def test_precompute_script_beside_a_nested_deepreview(tmp_path: Path) -> None:
    root = tmp_path / "p"
    _write(root, "sub/a.md", "a\n")
    script = _write(root, "sub/ctx.sh", '#!/bin/sh\necho "context from $(pwd)"\n')
    script.chmod(0o755)
    _write(
        root, "sub/.deepreview", _rule_text(precomputed_info_for_reviewer_bash_command="./ctx.sh")
    )
    answer = get_review_instructions(
        project_root=root, files=["sub/a.md"], platform=None, commands=precompute.RUN_COMMANDS
    )
    [text] = _instruction_files(root, answer)
    assert _section(text, "Precomputed Context") == f"context from {root}\n"


def test_precompute_failure_shows_exit_code_and_stderr(tmp_path: Path) -> None:
    root = _precompute_project(tmp_path, "'echo partial; echo broken >&2; exit 3'")
    answer = get_review_instructions(
        project_root=root, files=["a.md"], platform=None, commands=precompute.RUN_COMMANDS
    )
    [text] = _instruction_files(root, answer)
    assert _section(text, "Precomputed Context") == (
        "**Precompute command failed** (exit code 3):\n\n```\nbroken\n```\n"
    )


def test_precompute_timeout_kills_the_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(precompute, "TIMEOUT_SECONDS", 0.5)
    root = _precompute_project(tmp_path, "'sleep 30; echo late > late.txt'")
    answer = get_review_instructions(
        project_root=root, files=["a.md"], platform=None, commands=precompute.RUN_COMMANDS
    )
    [text] = _instruction_files(root, answer)
    assert _section(text, "Precomputed Context") == (
        "**Precompute command timed out** after 0.5s:\n\n```\nsleep 30; echo late > late.txt\n```\n"
    )
    assert not (root / "late.txt").exists()


def test_passed_reviews_do_not_run_their_command_again(tmp_path: Path) -> None:
    root = _precompute_project(tmp_path, "'echo run >> runs.log'")
    answer = get_review_instructions(
        project_root=root, files=["a.md"], platform=None, commands=precompute.RUN_COMMANDS
    )
    [review_id] = re.findall(r'review_instructions/([^"]+)\.md"', answer)
    (root / ".deepwork/tmp/review_instructions" / f"{review_id}.passed").touch()
    assert get_review_instructions(
        project_root=root, files=["a.md"], platform=None, commands=precompute.RUN_COMMANDS
    ) == ("No review tasks to execute.")
    assert (root / "runs.log").read_text() == "run\n"


def test_091_reports_the_same_project_as_unparsable(tmp_path: Path) -> None:
    root = _precompute_project(tmp_path, "'echo hi'")
    answer = get_review_instructions_091(
        project_root=root, files=["a.md"], platform=None, commands=precompute.RUN_COMMANDS
    )
    assert answer.startswith("No valid .deepreview rules found. Parse errors:\n")
    assert "'precomputed_info_for_reviewer_bash_command' was unexpected" in answer
