"""DeepSchema-generated review rules and the two review dialects."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

from reviews.deepreview import get_configured_reviews as configured_091
from reviews.deepreview import get_review_instructions as review_091
from reviews.deepreview.agent_tasks import get_configured_reviews, get_review_instructions
from reviews.deepreview.deepschema import REQUIREMENTS_POLICY, load_deepschema_rules
from reviews.deepreview.tools import mark_review_as_passed
from tests.reviews import rule, write, write_rules

NOTES_SCHEMA = """\
summary: "Release notes"
instructions: "Notes are for users."
matchers: ["docs/*.md"]
requirements:
  dated: "Each note MUST carry a date."
  short: "Notes SHOULD be short."
examples:
  - path: docs/example.md
    description: "A good one"
references:
  - path: guide.md
    description: "How we write notes"
json_schema_path: notes.schema.json
"""


def _schemas(root: Path) -> Path:
    folder = root / ".deepwork" / "schemas"
    write(folder, "notes/deepschema.yml", NOTES_SCHEMA)
    write(folder, "notes/guide.md", "Be brief.\n")
    write(folder, "notes/notes.schema.json", '{"type": "object"}\n')
    # Listed by get_named_schemas, but no requirements: no rule.
    write(folder, "plain/deepschema.yml", "summary: Plain\nmatchers: ['*.txt']\n")
    write(root, "sub/.deepschema.conf.yml.yml", "requirements:\n  keys: Keys MUST be lower case.\n")
    write(root, "sub/conf.yml", "a: 1\n")
    write(root, "docs/a.md", "# a\n")
    return folder


def test_named_and_anonymous_schemas_become_rules(tmp_path: Path) -> None:
    folder = _schemas(tmp_path)
    rules, failures = load_deepschema_rules(tmp_path)
    assert failures == []
    notes, conf = rules
    assert (notes.name, notes.description, notes.include, notes.strategy) == (
        "notes DeepSchema Compliance",
        "DeepSchema compliance review for notes",
        ("docs/*.md",),
        "individual",
    )
    assert (notes.source_file, notes.source_line) == (folder / "notes/deepschema.yml", 0)
    assert notes.reference_files == (
        (".deepwork/schemas/notes/guide.md", "How we write notes"),
        (".deepwork/schemas/notes/notes.schema.json", "JSON Schema for notes"),
    )
    text = notes.instructions
    assert text.startswith("The file under review is an instance of the `notes` DeepSchema.")
    for part in ("Release notes", "Notes are for users.", "RFC 2119"):
        assert part in text
    assert "- **dated**: Each note MUST carry a date.\n- **short**: Notes SHOULD be short." in text
    assert "- `docs/example.md` — A good one" in text
    # An anonymous schema in a sub-folder applies to its sibling there.
    assert (conf.name, conf.include, conf.source_file) == (
        "conf.yml DeepSchema Compliance",
        ("sub/conf.yml",),
        tmp_path / "sub/.deepschema.conf.yml.yml",
    )


def test_014_review_instructions_and_listing_include_schema_rules(tmp_path: Path) -> None:
    _schemas(tmp_path)
    write_rules(tmp_path, {"md": rule(["docs/*.md"])})
    text = get_review_instructions(
        project_root=tmp_path, files=["docs/a.md", "sub/conf.yml"], platform=None
    )
    assert re.findall(r"description: (.+)", text) == [
        "Review md",
        "Review notes/notes DeepSchema Compliance",
        "Review sub/conf.yml DeepSchema Compliance",
    ]
    ids = re.findall(r"review_instructions/(.+)\.md", text)
    assert ids[1].startswith("notes-DeepSchema-Compliance--docs-a.md--")
    instructions = (tmp_path / f".deepwork/tmp/review_instructions/{ids[1]}.md").read_text()
    # 0.14's layout: the file under review, then the schema's references, inlined.
    headings = [line for line in instructions.splitlines() if line.startswith(("# R", "##"))]
    assert headings == [
        "# Review: notes DeepSchema Compliance — docs/a.md",
        "## Project Root",
        "## Review Instructions",
        "## Relevant File Contents",
        "### docs/a.md",
        "### .deepwork/schemas/notes/guide.md",
        "### .deepwork/schemas/notes/notes.schema.json",
        "## Files to Review",
        "## After Review",
    ]
    assert f"relative to the project root `{tmp_path}`" in instructions
    assert "### docs/a.md\n\nFile under review\n\n```markdown\n# a\n```\n" in instructions
    assert "How we write notes\n\n```markdown\nBe brief.\n```\n" in instructions
    assert "JSON Schema for notes\n\n```json\n" in instructions
    assert "`.deepwork/schemas/notes/deepschema.yml:0`" in instructions
    assert get_configured_reviews(
        project_root=tmp_path, only_rules_matching_files=["docs/a.md"]
    ) == [
        {"name": "md", "description": "A rule", "defining_file": ".deepreview:1"},
        {
            "name": "notes DeepSchema Compliance",
            "description": "DeepSchema compliance review for notes",
            "defining_file": ".deepwork/schemas/notes/deepschema.yml:0",
        },
    ]
    # 0.9.1 knows nothing of DeepSchemas.
    assert "DeepSchema" not in review_091(project_root=tmp_path, files=["docs/a.md"], platform=None)
    assert [
        r["name"] for r in configured_091(project_root=tmp_path, only_rules_matching_files=None)
    ] == ["md"]


def test_schema_problems_are_warnings_never_parse_error_rules(tmp_path: Path) -> None:
    folder = tmp_path / ".deepwork" / "schemas"
    write(folder, "broken/deepschema.yml", "requirements: [unclosed\n")
    write(folder, "odd/deepschema.yml", "requirements: {r: MUST}\nmatchers: ['*.md']\nbogus: 1\n")
    write(
        folder,
        "refs/deepschema.yml",
        textwrap.dedent(
            """\
            matchers: ['*.md']
            requirements: {r: "It MUST exist."}
            references:
              - path: missing.md
              - path: ../../../../outside.md
            """
        ),
    )
    write(tmp_path, "a.md", "# a\n")
    rules, failures = load_deepschema_rules(tmp_path)
    # A bad reference leaves the rest of its schema in force.
    assert [r.name for r in rules] == ["refs DeepSchema Compliance"]
    assert rules[0].reference_files == ()
    assert {str(f.path) for f in failures} == {"deepschema"}
    errors = [f.error for f in failures]
    assert errors[0].startswith(f"{folder / 'broken/deepschema.yml'}: invalid YAML:")
    assert errors[1] == (
        f"{folder / 'odd/deepschema.yml'}: Schema validation failed for "
        f"{folder / 'odd/deepschema.yml'}: Validation error at root: Additional properties are "
        "not allowed ('bogus' was unexpected)"
    )
    assert errors[2] == (
        f"{folder / 'refs/deepschema.yml'}: references entry 'missing.md' not found "
        f"(resolved to {folder / 'refs/missing.md'})"
    )
    assert "references entry '../../../../outside.md' is outside the project" in errors[3]

    text = get_review_instructions(project_root=tmp_path, files=["a.md"], platform=None)
    assert text.startswith(
        "Warning: Some .deepreview files could not be parsed:\n"
        f"  - deepschema: {folder / 'broken/deepschema.yml'}: invalid YAML:"
    )
    assert "description: Review refs/refs DeepSchema Compliance" in text
    assert get_configured_reviews(project_root=tmp_path, only_rules_matching_files=None) == [
        {
            "name": "refs DeepSchema Compliance",
            "description": "DeepSchema compliance review for refs",
            "defining_file": ".deepwork/schemas/refs/deepschema.yml:0",
        }
    ]


def test_dialects_differ_in_wording_and_catch_all_rules_only(tmp_path: Path) -> None:
    write_rules(tmp_path, {"all": rule(["**/*"]), "md": rule(["*.md"])})
    write(tmp_path, "a.md")
    described = re.compile(r"description: Review (\S+)")
    assert described.findall(review_091(project_root=tmp_path, files=["a.md"], platform=None)) == [
        "all",
        "md",
    ]
    assert described.findall(
        get_review_instructions(project_root=tmp_path, files=["a.md"], platform=None)
    ) == ["md"]
    (tmp_path / ".deepreview").write_text("bad: [\n")
    assert review_091(project_root=tmp_path, files=["a.md"], platform=None).startswith(
        "No valid .deepreview rules found. Parse errors:\n  - "
    )
    assert get_review_instructions(project_root=tmp_path, files=["a.md"], platform=None).startswith(
        "No valid review rules found. Parse errors:\n  - "
    )


def test_parents_lend_requirements_and_json_schema(tmp_path: Path) -> None:
    folder = _schemas(tmp_path)
    write(
        folder,
        "child/deepschema.yml",
        textwrap.dedent(
            """\
            summary: Child notes
            matchers: ["child/*.md"]
            parent_deep_schemas: [notes, child, nowhere]
            verification_bash_command: ["true"]
            requirements:
              short: "Child notes MUST be short."
              own: "It MUST name its parent."
            """
        ),
    )
    write(folder, "bad_type/deepschema.yml", "verification_bash_command: 'true'\n")
    rules, failures = load_deepschema_rules(tmp_path)
    child = next(r for r in rules if r.name == "child DeepSchema Compliance")
    # The parent's first, a restated one in its place with the child's wording.
    assert child.instructions.split(REQUIREMENTS_POLICY)[1].strip().splitlines() == [
        "- **dated**: Each note MUST carry a date.",
        "- **short**: Child notes MUST be short.",
        "- **own**: It MUST name its parent.",
    ]
    # The parent's JSON schema, found beside the parent; its references stay its own.
    assert child.reference_files == (
        (".deepwork/schemas/notes/notes.schema.json", "JSON Schema for child"),
    )
    assert [f.error for f in failures] == [
        f"{folder / 'bad_type/deepschema.yml'}: Schema validation failed for "
        f"{folder / 'bad_type/deepschema.yml'}: Validation error at verification_bash_command: "
        "'true' is not of type 'array'",
        f"{folder / 'child/deepschema.yml'}: parent DeepSchema 'nowhere' not found",
    ]

    (folder / "notes/notes.schema.json").unlink()
    _rules, failures = load_deepschema_rules(tmp_path)
    missing = [f.error for f in failures if "json_schema_path" in f.error]
    assert missing == [
        f"{folder / 'notes/deepschema.yml'}: json_schema_path entry 'notes.schema.json' not "
        f"found (resolved to {folder / 'notes/notes.schema.json'})"
    ]


def test_all_passed_answers_of_each_dialect(tmp_path: Path) -> None:
    write_rules(tmp_path, {"md": rule(["*.md"])})
    write(tmp_path, "sub/.deepreview", "bad: [\n")
    write(tmp_path, "a.md")
    for review in (review_091, get_review_instructions):
        for review_id in re.findall(
            r"review_instructions/(.+)\.md",
            review(project_root=tmp_path, files=["a.md"], platform=None),
        ):
            mark_review_as_passed(project_root=tmp_path, review_id=review_id)
    # 0.9.1 answers just that; 0.14 lists no tasks, after its parse warnings.
    assert review_091(project_root=tmp_path, files=["a.md"], platform=None) == (
        "All matching reviews have already passed for the current file contents."
    )
    again = get_review_instructions(project_root=tmp_path, files=["a.md"], platform=None)
    assert again.startswith("Warning: Some .deepreview files could not be parsed:\n")
    assert again.endswith("\n\nNo review tasks to execute.")


def test_a_schema_that_is_an_alias_bomb_is_a_failure_found_at_once(tmp_path: Path) -> None:
    import time

    from tests.support.yaml_bombs import laughs

    write(tmp_path, ".deepwork/schemas/bomb/deepschema.yml", laughs(6))
    started = time.thread_time()
    rules, failures = load_deepschema_rules(tmp_path)
    assert time.thread_time() - started < 1.0
    assert rules == []
    [failure] = failures
    assert "more than 100000 nodes with aliases expanded" in failure.error
