"""get_named_schemas: the project's named DeepSchemas, a broken one listed as such."""

from __future__ import annotations

from pathlib import Path

from workflows.selectors.deepschemas import named_schemas


def test_named_schemas_sorted_with_failures_listed(tmp_path: Path) -> None:
    folder = tmp_path / ".deepwork" / "schemas"
    (folder / "b_schema").mkdir(parents=True)
    (folder / "b_schema" / "deepschema.yml").write_text(
        "summary: Release notes\nmatchers: ['docs/releases/*.md']\n"
    )
    (folder / "a_broken").mkdir()
    (folder / "a_broken" / "deepschema.yml").write_text("summary: [unclosed\n")
    (folder / "no_file").mkdir()
    assert named_schemas(project_root=tmp_path) == [
        {
            "name": "a_broken",
            "summary": f"(failed to parse {folder / 'a_broken' / 'deepschema.yml'})",
            "matchers": [],
        },
        {"name": "b_schema", "summary": "Release notes", "matchers": ["docs/releases/*.md"]},
    ]
    assert named_schemas(project_root=tmp_path / "elsewhere") == []


def test_a_schema_that_is_an_alias_bomb_is_listed_as_failing(tmp_path: Path) -> None:
    from tests.support.yaml_bombs import laughs

    folder = tmp_path / ".deepwork" / "schemas" / "bomb"
    folder.mkdir(parents=True)
    (folder / "deepschema.yml").write_text(laughs(9))
    [listed] = named_schemas(project_root=tmp_path)
    assert listed["summary"].startswith("(failed to parse ")
