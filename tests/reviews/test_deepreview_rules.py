"""`.deepreview` parsing, discovery, glob matching and review strategies.

No git and no database: rules are written to ``tmp_path`` and changed-file lists are given
directly. Error texts are spelled out in full because agents see them verbatim.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
import yaml

from reviews.deepreview.config import ConfigError, parse_deepreview_file, parse_deepreview_text
from reviews.deepreview.discovery import find_deepreview_files, load_all_rules
from reviews.deepreview.matching import (
    build_tasks,
    file_matches_rule,
    glob_matches,
    relative_to_dir,
    unchanged_matching_files,
)
from tests.reviews import rule, write, write_rules, write_text_rules

# --- parsing -----------------------------------------------------------------------------------


def test_parses_a_rule_with_defaults(tmp_path: Path) -> None:
    path = write_rules(tmp_path, {"py": rule(["**/*.py"], description="Python files")})

    [parsed] = parse_deepreview_file(path)

    assert parsed.name == "py"
    assert parsed.description == "Python files"
    assert parsed.include == ("**/*.py",)
    assert parsed.exclude == ()
    assert parsed.strategy == "individual"
    assert parsed.instructions == "Check it."
    assert parsed.agent is None
    assert parsed.agent_for("claude") is None
    assert parsed.all_changed_filenames is False
    assert parsed.unchanged_matching_files is False
    assert parsed.source_file == path
    assert parsed.source_dir == tmp_path
    assert parsed.source_line == 1


@pytest.mark.parametrize("strategy", ["individual", "matches_together", "all_changed_files"])
def test_parses_every_strategy_with_all_options(tmp_path: Path, strategy: str) -> None:
    path = write_rules(
        tmp_path,
        {
            "full": rule(
                ["src/**"],
                strategy=strategy,
                exclude=["src/vendor/**"],
                agent={"claude": "security-expert"},
                context={"all_changed_filenames": True, "unchanged_matching_files": True},
            )
        },
    )

    [parsed] = parse_deepreview_file(path)

    assert parsed.strategy == strategy
    assert parsed.exclude == ("src/vendor/**",)
    assert parsed.agent_for("claude") == "security-expert"
    assert parsed.agent_for("gemini") is None
    assert parsed.all_changed_filenames is True
    assert parsed.unchanged_matching_files is True


def test_reads_instruction_files_relative_to_the_deepreview(tmp_path: Path) -> None:
    write(tmp_path, "sub/.deepwork/review/python.md", "Look for bugs.\n")
    path = write_rules(
        tmp_path / "sub",
        {"py": rule(["*.py"], instructions={"file": ".deepwork/review/python.md"})},
    )

    [parsed] = parse_deepreview_file(path)

    assert parsed.instructions == "Look for bugs.\n"


def test_a_missing_instruction_file_fails_the_whole_file(tmp_path: Path) -> None:
    path = write_rules(
        tmp_path,
        {
            "fine": rule(["*.md"]),
            "broken": rule(["*.py"], instructions={"file": "missing.md"}),
        },
    )

    with pytest.raises(ConfigError) as excinfo:
        parse_deepreview_file(path)
    assert str(excinfo.value) == f"Instructions file not found: {tmp_path / 'missing.md'}"

    rules, failures = load_all_rules(tmp_path)
    assert rules == []
    assert [(f.path, f.error) for f in failures] == [(path, str(excinfo.value))]


def test_an_unreadable_instruction_file_is_a_parse_error(tmp_path: Path) -> None:
    (tmp_path / "instructions").mkdir()
    path = write_rules(tmp_path, {"py": rule(["*.py"], instructions={"file": "instructions"})})

    with pytest.raises(ConfigError, match="^Failed to read instructions file .*instructions: "):
        parse_deepreview_file(path)


@pytest.mark.parametrize("text", ["", "\n", "~\n", "# only a comment\n"])
def test_an_empty_file_yields_no_rules(tmp_path: Path, text: str) -> None:
    assert parse_deepreview_file(write_text_rules(tmp_path, text)) == []


def test_a_nonexistent_file_is_reported(tmp_path: Path) -> None:
    path = tmp_path / ".deepreview"

    with pytest.raises(ConfigError) as excinfo:
        parse_deepreview_file(path)

    assert str(excinfo.value) == f"File not found: {path}"


def test_rule_line_numbers_come_from_top_level_keys(tmp_path: Path) -> None:
    path = write_text_rules(
        tmp_path,
        """\
        first:
          description: One
          match:
            include: ["*.py"]
          review:
            strategy: individual
            instructions: Check.

        # A comment between rules.
        second:
          description: Two
          match: {include: ["*.md"]}
          review: {strategy: matches_together, instructions: Check.}
        "third":
          description: Quoted names are not found by the line scan
          match: {include: ["*"]}
          review: {strategy: individual, instructions: Check.}
        """,
    )

    parsed = parse_deepreview_file(path)

    assert [(r.name, r.source_line) for r in parsed] == [("first", 1), ("second", 10), ("third", 1)]


def test_invalid_yaml_is_reported_with_the_path(tmp_path: Path) -> None:
    path = write_text_rules(tmp_path, "rule: [unclosed\n")

    with pytest.raises(ConfigError) as excinfo:
        parse_deepreview_file(path)

    message = str(excinfo.value)
    assert message.startswith(f"Failed to parse {path}: Failed to parse YAML file {path}: ")
    assert f'in "{path}", line 2' in message


SCHEMA_ERRORS = [
    (
        {
            "r": {
                "match": {"include": ["*"]},
                "review": {"strategy": "individual", "instructions": "x"},
            }
        },
        "r: 'description' is a required property",
    ),
    (
        {"r": rule(["*"], strategy="sometimes")},
        "r -> review -> strategy: 'sometimes' is not one of "
        "['individual', 'matches_together', 'all_changed_files']",
    ),
    ({"r": rule([])}, "r -> match -> include: [] should be non-empty"),
    (
        {"r": rule(["*"], description="x" * 257)},
        f"r -> description: '{'x' * 257}' is too long",
    ),
    (
        {"r": {**rule(["*"]), "match": {"include": ["*"], "only": ["a"]}}},
        "r -> match: Additional properties are not allowed ('only' was unexpected)",
    ),
    (
        {"r": rule(["*"], instructions={"path": "x.md"})},
        "r -> review -> instructions: {'path': 'x.md'} is not valid under any of the given schemas",
    ),
    (
        {"r": rule(["*"], agent={"claude": 3})},  # type: ignore[dict-item]
        "r -> review -> agent -> claude: 3 is not of type 'string'",
    ),
    (
        {"r": rule(["*"], context={"all_changed_filenames": "yes"})},  # type: ignore[dict-item]
        "r -> review -> additional_context -> all_changed_filenames: "
        "'yes' is not of type 'boolean'",
    ),
    (
        {"bad name": rule(["*"])},
        "root: 'bad name' does not match any of the regexes: '^[a-zA-Z0-9_-]+$'",
    ),
    (["a list"], "root: ['a list'] is not of type 'object'"),
    ({1: rule(["*"])}, "root: 1 is not a valid key (keys must be strings)"),
]


@pytest.mark.parametrize(("data", "detail"), SCHEMA_ERRORS)
def test_schema_errors(tmp_path: Path, data: object, detail: str) -> None:
    path = tmp_path / ".deepreview"

    with pytest.raises(ConfigError) as excinfo:
        parse_deepreview_text(yaml.safe_dump(data, sort_keys=False), path)

    assert str(excinfo.value) == (
        f"Schema validation failed for {path}: Validation error at {detail}"
    )


# --- discovery ---------------------------------------------------------------------------------


def test_discovery_is_deepest_first_then_alphabetical_and_skips_tool_dirs(tmp_path: Path) -> None:
    for directory in [
        "",
        "b",
        "a",
        "a/deeper",
        ".deepwork",  # not skipped: 0.9.1 looks inside .deepwork
        ".git",
        "node_modules/pkg",
        "__pycache__",
        ".venv",
        "venv",
        ".tox",
        ".mypy_cache",
        ".pytest_cache",
        ".ruff_cache",
        ".eggs",
        "thing.egg-info",
        "src/node_modules",
    ]:
        write_rules(tmp_path / directory, {"r": rule(["*"])})

    found = [p.relative_to(tmp_path).as_posix() for p in find_deepreview_files(tmp_path)]

    assert found == [
        "a/deeper/.deepreview",
        ".deepwork/.deepreview",
        "a/.deepreview",
        "b/.deepreview",
        ".deepreview",
    ]


def test_discovery_does_not_follow_symlinked_directories(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    write_rules(outside, {"r": rule(["*"])})
    project = tmp_path / "project"
    project.mkdir()
    os.symlink(outside, project / "linked")

    assert find_deepreview_files(project) == []


def test_rules_keep_file_order_and_a_bad_file_does_not_block_the_rest(tmp_path: Path) -> None:
    write_rules(tmp_path, {"lint": rule(["*.py"]), "docs": rule(["*.md"])})
    write_rules(tmp_path / "api", {"lint": rule(["*.py"], description="API lint")})
    broken = write_text_rules(tmp_path / "web", "lint: [\n")

    rules, failures = load_all_rules(tmp_path)

    assert [(r.name, r.source_dir) for r in rules] == [
        ("lint", tmp_path / "api"),
        ("lint", tmp_path),
        ("docs", tmp_path),
    ]
    assert [f.path for f in failures] == [broken]
    assert failures[0].error.startswith(f"Failed to parse {broken}: Failed to parse YAML file")


# --- matching ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("pattern", "path", "expected"),
    [
        # The §5.4 table.
        ("*.py", "app.py", True),
        ("*.py", "lib/app.py", False),
        ("config/*", "config/settings.yaml", True),
        # `**/` spans zero or more directories; `*` and `?` stay within one.
        ("**/*.py", "app.py", True),
        ("**/*.py", "lib/deep/app.py", True),
        ("config/*", "config/sub/settings.yaml", False),
        ("src/**", "src/a/b.py", True),
        ("docs/**/*.md", "docs/index.md", True),
        ("?.py", "a.py", True),
        ("?.py", "ab.py", False),
        ("a?b", "a/b", False),
        # Dotfiles are not special, as in 0.9.1.
        ("*.yml", ".pre-commit.yml", True),
        ("**/*.yml", ".github/workflows/ci.yml", True),
        ("*.py", "app.pyc", False),
    ],
)
def test_glob_semantics(pattern: str, path: str, expected: bool) -> None:
    assert glob_matches(path, pattern) is expected


@pytest.mark.parametrize(
    ("path", "directory", "expected"),
    [
        ("a.py", "", "a.py"),
        ("sub/a.py", "sub", "a.py"),
        ("sub/deep/a.py", "sub", "deep/a.py"),
        ("subway/a.py", "sub", None),
        ("a.py", "sub", None),
        ("sub", "sub", None),
    ],
)
def test_relative_to_dir(path: str, directory: str, expected: str | None) -> None:
    assert relative_to_dir(path, directory) == expected


def test_include_and_exclude(tmp_path: Path) -> None:
    write_rules(tmp_path, {"py": rule(["**/*.py"], exclude=["tests/**", "**/migrations/*.py"])})
    [py] = load_all_rules(tmp_path)[0]

    assert file_matches_rule("app.py", py, tmp_path)
    assert file_matches_rule("pkg/models.py", py, tmp_path)
    assert not file_matches_rule("tests/test_app.py", py, tmp_path)
    assert not file_matches_rule("pkg/migrations/0001_initial.py", py, tmp_path)
    assert not file_matches_rule("README.md", py, tmp_path)


def test_a_subdirectory_rule_only_sees_its_own_directory(tmp_path: Path) -> None:
    write_rules(tmp_path / "sub", {"py": rule(["*.py"], exclude=["skip_*.py"])})
    [py] = load_all_rules(tmp_path)[0]

    assert file_matches_rule("sub/a.py", py, tmp_path)
    assert not file_matches_rule("sub/deeper/a.py", py, tmp_path)  # `*` does not cross `/`
    assert not file_matches_rule("sub/skip_me.py", py, tmp_path)
    assert not file_matches_rule("a.py", py, tmp_path)
    assert not file_matches_rule("subway/a.py", py, tmp_path)


# --- strategies --------------------------------------------------------------------------------


def _tasks(root: Path, changed: list[str], platform: str = "claude") -> list[tuple]:
    rules, failures = load_all_rules(root)
    assert failures == []
    return [
        (t.rule_name, t.files_to_review, t.agent_name, t.source_location)
        for t in build_tasks(changed, rules, root, platform)
    ]


def test_individual_gives_one_task_per_matched_file_in_changed_order(tmp_path: Path) -> None:
    write_rules(
        tmp_path / "sub",
        {"py": rule(["**/*.py"], agent={"claude": "python-expert"})},
    )
    changed = ["README.md", "sub/b.py", "sub/a.py", "x.py"]

    assert _tasks(tmp_path, changed) == [
        ("py", ("sub/b.py",), "python-expert", "sub/.deepreview:1"),
        ("py", ("sub/a.py",), "python-expert", "sub/.deepreview:1"),
    ]
    # Another platform has no persona configured for it.
    assert [agent for _, _, agent, _ in _tasks(tmp_path, changed, "gemini")] == [None, None]


def test_matches_together_gives_one_task_with_every_match(tmp_path: Path) -> None:
    write_rules(tmp_path, {"docs": rule(["**/*.md"], strategy="matches_together")})

    assert _tasks(tmp_path, ["a.md", "app.py", "docs/b.md"]) == [
        ("docs", ("a.md", "docs/b.md"), None, ".deepreview:1"),
    ]


def test_all_changed_files_is_a_tripwire_for_the_whole_change_set(tmp_path: Path) -> None:
    write_rules(
        tmp_path,
        {"schema": rule(["db/*.sql"], exclude=["db/seed.sql"], strategy="all_changed_files")},
    )

    fired = _tasks(tmp_path, ["app.py", "db/001.sql", "db/seed.sql"])
    # Excludes only decide whether it fires; the task then carries every changed file.
    assert fired == [("schema", ("app.py", "db/001.sql", "db/seed.sql"), None, ".deepreview:1")]
    assert _tasks(tmp_path, ["app.py", "db/seed.sql"]) == []


def test_all_changed_filenames_is_attached_to_every_task_of_the_rule(tmp_path: Path) -> None:
    write_rules(
        tmp_path,
        {
            "with": rule(["*.py"], context={"all_changed_filenames": True}),
            "without": rule(["*.py"], strategy="matches_together"),
        },
    )
    changed = ["a.py", "b.py", "notes.txt"]
    rules, _ = load_all_rules(tmp_path)

    tasks = build_tasks(changed, rules, tmp_path, "claude")

    assert [(t.rule_name, t.all_changed_filenames) for t in tasks] == [
        ("with", tuple(changed)),
        ("with", tuple(changed)),
        ("without", ()),
    ]


def test_rules_are_independent_and_ordered_by_discovery(tmp_path: Path) -> None:
    write_rules(
        tmp_path, {"lint": rule(["**/*.py"]), "all": rule(["**"], strategy="matches_together")}
    )
    write_rules(tmp_path / "api", {"lint": rule(["*.py"])})

    assert [(name, files) for name, files, _, _ in _tasks(tmp_path, ["api/v.py", "b.py"])] == [
        ("lint", ("api/v.py",)),
        ("lint", ("api/v.py",)),
        ("lint", ("b.py",)),
        ("all", ("api/v.py", "b.py")),
    ]


def test_unchanged_matching_files_for_matches_together(tmp_path: Path) -> None:
    write_rules(
        tmp_path / "app",
        {
            "together": rule(
                ["**/*.py"],
                strategy="matches_together",
                exclude=["legacy/**"],
                context={"unchanged_matching_files": True},
            ),
            "individual": rule(["**/*.py"], context={"unchanged_matching_files": True}),
        },
    )
    for rel in [
        "app/a.py",
        "app/b.py",
        "app/pkg/c.py",
        "app/legacy/old.py",
        "app/node_modules/dep.py",
        "app/__pycache__/a.cpython-311.py",
        "app/notes.md",
        "other/d.py",
    ]:
        write(tmp_path, rel)
    (tmp_path / "app" / "dir.py").mkdir()
    rules, _ = load_all_rules(tmp_path)
    together, individual = rules

    assert unchanged_matching_files(together, ["app/a.py"], tmp_path) == [
        "app/b.py",
        "app/pkg/c.py",
    ]
    tasks = build_tasks(["app/a.py"], rules, tmp_path, "claude")
    assert [(t.rule_name, t.additional_files) for t in tasks] == [
        ("together", ("app/b.py", "app/pkg/c.py")),
        # Honoured only for matches_together, as in 0.9.1.
        ("individual", ()),
    ]


def test_an_alias_bomb_is_refused_by_the_bounded_loader_at_once(tmp_path: Path) -> None:
    from tests.support.yaml_bombs import laughs

    path = write_text_rules(tmp_path, laughs(6))
    started = time.thread_time()
    with pytest.raises(ConfigError) as excinfo:
        parse_deepreview_file(path)
    assert time.thread_time() - started < 1.0
    assert "more than 100000 nodes with aliases expanded" in str(excinfo.value)


def test_a_rules_file_nested_too_deeply_is_refused_as_such(tmp_path: Path) -> None:
    path = write_text_rules(tmp_path, "r: " + "[" * 2000 + "]" * 2000 + "\n")
    with pytest.raises(ConfigError, match="nesting deeper than 32 levels"):
        parse_deepreview_file(path)


def test_review_globs_match_as_wcmatch_does(tmp_path: Path) -> None:
    """The linear matcher gives wcmatch's answers for the globs rules write (GLOBSTAR and
    DOTGLOB, no braces): a differential run over random globs and paths."""
    import random

    from wcmatch import glob as wcglob

    from reviews.deepreview.matching import GLOB_FLAGS, glob_matches

    rng = random.Random(7)
    parts = ["a", "b", ".c", "*", "**", "?", "[ab]", "*.py", "a*", "[!a]", "x.py"]
    names = ["a", "b", ".c", "x.py", "ab", "c.py", ".py"]
    for _ in range(3000):
        pattern = "/".join(rng.choice(parts) for _ in range(rng.randint(1, 5)))
        path = "/".join(rng.choice(names) for _ in range(rng.randint(1, 6)))
        expected = bool(wcglob.globmatch(path, pattern, flags=GLOB_FLAGS))
        assert glob_matches(path, pattern) == expected, (pattern, path)
