"""Every ``job.yml`` and ``.deepreview`` example in the README and the docs loads, through the
same catalog and rule loader the server uses, so the documentation cannot drift from the parser.

An example is a fenced ``yaml`` block whose first line is the comment ``# job.yml`` or
``# .deepreview``. A yaml block that looks like a job or a rules file but carries neither mark
fails too: an unmarked example would silently escape the check.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from reviews.deepreview.discovery import load_all_rules
from workflows.services.catalog import catalog_view
from workflows.services.projects import project_ensure

ROOT = Path(__file__).resolve().parents[2]
JOB_MARK = "# job.yml"
RULES_MARK = "# .deepreview"
FENCE = re.compile(r"^```yaml[^\n]*\n(.*?)^```", re.MULTILINE | re.DOTALL)


@dataclass(frozen=True)
class Example:
    where: str  # "<file>:<line>", for the test id and the failure message
    text: str

    @property
    def kind(self) -> str | None:
        first = self.text.lstrip().splitlines()[0].strip() if self.text.strip() else ""
        return {JOB_MARK: "job", RULES_MARK: "rules"}.get(first)


def documents(root: Path = ROOT) -> list[Path]:
    return [root / "README.md", *sorted((root / "docs").rglob("*.md"))]


def examples_in(path: Path, root: Path = ROOT) -> Iterator[Example]:
    text = path.read_text(encoding="utf-8")
    for match in FENCE.finditer(text):
        line = text.count("\n", 0, match.start()) + 1
        yield Example(f"{path.relative_to(root)}:{line}", match.group(1))


def all_examples() -> list[Example]:
    return [example for path in documents() for example in examples_in(path)]


def _strings_under(data: Any, key: str) -> Iterator[str]:
    """Every string value of ``key`` anywhere in ``data``."""
    if isinstance(data, dict):
        for name, value in data.items():
            if name == key and isinstance(value, str):
                yield value
            else:
                yield from _strings_under(value, key)
    elif isinstance(data, list):
        for item in data:
            yield from _strings_under(item, key)


def job_load_errors(text: str, project: Path) -> list[str]:
    """Load ``text`` as a project's only job through the catalog; its load errors, if any.

    The files the job names (instructions, hook prompts) are written as placeholders: an
    example shows the job file, not every file beside it.
    """
    data = yaml.safe_load(text)
    name = data.get("name") if isinstance(data, dict) else None
    folder = name if isinstance(name, str) and name else "example"
    job_dir = project / ".deepwork" / "jobs" / folder
    job_dir.mkdir(parents=True)
    (job_dir / "job.yml").write_text(text, encoding="utf-8")
    for key in ("instructions_file", "prompt_file"):
        for relative in _strings_under(data, key):
            target = job_dir / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text("# Placeholder instructions\n", encoding="utf-8")
    view = catalog_view(project=project_ensure(root_path=project))
    errors = [error.error for error in view.errors]
    if not errors and folder not in {job.dir_name for job in view.jobs}:
        errors.append(f"job folder {folder!r} is not in the catalog")
    return errors


def rules_load_errors(text: str, project: Path) -> list[str]:
    """Load ``text`` as the project's ``.deepreview`` (DeepWork 0.14's keys accepted, as a
    server of both generations reads it); the failures, if any."""
    data = yaml.safe_load(text)
    for relative in _strings_under(data, "file"):
        target = project / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text("Review instructions.\n", encoding="utf-8")
    for relative in _strings_under(data, "path"):
        target = project / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text("A reference file.\n", encoding="utf-8")
    (project / ".deepreview").write_text(text, encoding="utf-8")
    rules, failures = load_all_rules(project, extended_keys=True)
    errors = [failure.error for failure in failures]
    if not errors and not rules:
        errors.append("the file holds no rule")
    return errors


def load_errors(example: Example, project: Path) -> list[str]:
    project.mkdir(parents=True, exist_ok=True)
    if example.kind == "job":
        return job_load_errors(example.text, project)
    return rules_load_errors(example.text, project)


MARKED = [example for example in all_examples() if example.kind is not None]


def test_the_documents_hold_examples_of_both_kinds():
    kinds = {example.kind for example in MARKED}
    assert kinds == {"job", "rules"}, "no job.yml or no .deepreview example was found"
    readme = [example for example in MARKED if example.where.startswith("README.md:")]
    assert [example.kind for example in readme] == ["job"], "the README's walkthrough job"


@pytest.mark.parametrize("example", MARKED, ids=[example.where for example in MARKED])
@pytest.mark.django_db
def test_every_example_loads(example: Example, tmp_path: Path):
    assert load_errors(example, tmp_path / "project") == [], example.where


def _looks_like_an_example(text: str) -> bool:
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError:
        return False
    if not isinstance(data, dict):
        return False
    if {"steps", "step_arguments"} & set(
        data
    ) or "common_job_info_provided_to_all_steps_at_runtime" in data:
        return True
    return any(
        isinstance(rule, dict) and {"match", "review"} <= set(rule) for rule in data.values()
    )


def test_no_example_goes_unmarked():
    unmarked = [
        example.where
        for example in all_examples()
        if example.kind is None and _looks_like_an_example(example.text)
    ]
    assert unmarked == []


BROKEN_JOB = """\
# job.yml
name: broken
version: "1.0.0"
summary: "A review names an output the step does not have."
common_job_info_provided_to_all_steps_at_runtime: "Nothing."
workflows:
  - name: main
    summary: "One step."
    steps: [only]
steps:
  - id: only
    name: "Only"
    description: "The only step."
    instructions_file: steps/only.md
    outputs:
      out.md: {type: file, description: "Out.", required: true}
    reviews:
      - run_each: missing.md
        quality_criteria: {"Good": "It is good."}
"""
BROKEN_JOB_014 = """\
# job.yml
name: broken_typed
summary: "A step names an argument nobody declared."
step_arguments: []
workflows:
  main:
    summary: "One step."
    steps:
      - name: only
        instructions: "Do it."
        outputs:
          report: {}
"""
BROKEN_RULES = """\
# .deepreview
python_style:
  description: "A strategy that does not exist."
  match:
    include: ["**/*.py"]
  review:
    strategy: sometimes
    instructions: "Check the style."
"""


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (BROKEN_JOB, "run_each='missing.md'"),
        (BROKEN_JOB_014, "non-existent step_argument 'report'"),
        (BROKEN_RULES, "sometimes"),
    ],
    ids=["job", "job-0.14", "deepreview"],
)
@pytest.mark.django_db
def test_a_broken_example_fails(text: str, expected: str, tmp_path: Path):
    """The check is not vacuous: a broken example in a document would be reported."""
    errors = load_errors(Example("planted.md:1", text), tmp_path / "project")
    assert any(expected in error for error in errors), errors


def test_a_planted_unmarked_example_is_found(tmp_path: Path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "README.md").write_text("# x\n")
    (tmp_path / "docs" / "page.md").write_text(
        "Text.\n\n```yaml\n" + BROKEN_JOB.removeprefix("# job.yml\n") + "```\n"
    )
    found = [
        example
        for path in documents(tmp_path)
        for example in examples_in(path, tmp_path)
        if example.kind is None and _looks_like_an_example(example.text)
    ]
    assert [example.where for example in found] == ["docs/page.md:3"]
