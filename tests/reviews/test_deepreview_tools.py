"""The review tools end to end: messages, output format, instruction files, confinement,
pass caching and concurrent calls.

Expected outputs are written out in full: they are the wire contract with agents.
"""

from __future__ import annotations

import hashlib
import os
import re
import threading
import time
from pathlib import Path

import pytest

from reviews.deepreview import (
    get_configured_reviews,
    get_review_instructions,
    mark_review_as_passed,
)
from reviews.deepreview.config import ReviewRule, ReviewTask
from reviews.deepreview.instructions import (
    INSTRUCTIONS_DIR,
    STALE_AFTER,
    build_instruction_file,
    compute_review_id,
)
from reviews.deepreview.tools import format_for_claude
from tests.reviews import (
    commit_all,
    isolate_git,
    make_repo,
    rule,
    write,
    write_rules,
    write_text_rules,
)

PROMPT = re.compile(r'prompt: "@(\.deepwork/tmp/review_instructions/([^"]+)\.md)"')


@pytest.fixture(autouse=True)
def _isolated_git(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    isolate_git(monkeypatch, tmp_path)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A repository on main with two committed Python files and one rule for them."""
    root = make_repo(tmp_path / "project")
    write(root, "a.py", "print('a')\n")
    write(root, "b.py", "print('b')\n")
    write_rules(root, {"py": rule(["**/*.py"], instructions="Look for bugs.")})
    commit_all(root, "initial")
    return root


def review(root: Path, files: list[str] | None = None, platform: str | None = None) -> str:
    return get_review_instructions(project_root=root, files=files, platform=platform)


def prompts(output: str) -> list[tuple[str, str]]:
    """(project-relative instruction file, review id) for each task in an output."""
    return PROMPT.findall(output)


def _task(root: Path, files: tuple[str, ...], **overrides: object) -> ReviewTask:
    test_rule = ReviewRule(
        name=str(overrides.pop("name", "py")),
        description="d",
        include=("*.py",),
        exclude=(),
        strategy="individual",
        instructions=str(overrides.pop("instructions", "  Look for bugs.\n")),
        source_file=root / ".deepreview",
        source_dir=root,
    )
    return ReviewTask(rule=test_rule, files_to_review=files, **overrides)  # type: ignore[arg-type]


# --- the Claude formatter ----------------------------------------------------------------------


def test_format_for_claude_exact_output(tmp_path: Path) -> None:
    single = _task(tmp_path, ("src/app.py",), agent_name="python-expert")
    multiple = _task(tmp_path, ("a.md", "b.md", "c.md"), name="docs")

    output = format_for_claude([(single, "py--src-app.py--0123456789ab"), (multiple, "docs--x")])

    assert output == (
        "Invoke the following list of Tasks in parallel:\n"
        "\n"
        'name: "py review of src/app.py"\n'
        "\tdescription: Review py\n"
        "\tsubagent_type: python-expert\n"
        '\tprompt: "@.deepwork/tmp/review_instructions/py--src-app.py--0123456789ab.md"\n'
        "\n"
        'name: "docs review of 3 files"\n'
        "\tdescription: Review docs\n"
        "\tsubagent_type: general-purpose\n"
        '\tprompt: "@.deepwork/tmp/review_instructions/docs--x.md"\n'
    )


# --- review ids and instruction files ----------------------------------------------------------


def _expected_hash(rule_file: str, name: str, instructions: str, files: dict[str, bytes]) -> str:
    """The documented scheme, recomputed independently of the implementation."""
    digest = hashlib.sha256()
    for part in (rule_file, name, instructions):
        digest.update(part.encode() + b"\0")
    for path in sorted(files):
        digest.update(path.encode() + b"\0" + str(len(files[path])).encode() + b"\0")
        digest.update(files[path])
    return digest.hexdigest()[:12]


def test_review_id_scheme(tmp_path: Path) -> None:
    write(tmp_path, "src/b.py", "bee\n")
    write(tmp_path, "a.py", "ay\n")
    instructions = "  Look for bugs.\n"
    task = _task(tmp_path, ("src/b.py", "a.py"), name="py")

    digest = _expected_hash(
        ".deepreview", "py", instructions, {"a.py": b"ay\n", "src/b.py": b"bee\n"}
    )
    assert compute_review_id(task, tmp_path) == f"py--a.py_AND_src-b.py--{digest}"

    # A file that cannot be read still gets an id; its slot hashes as "-".
    missing = _task(tmp_path, ("gone.py",))
    expected = hashlib.sha256(b".deepreview\0py\0" + instructions.encode() + b"\0gone.py\0-\0")
    assert compute_review_id(missing, tmp_path) == f"py--gone.py--{expected.hexdigest()[:12]}"


def test_review_ids_are_filename_safe_and_bounded(tmp_path: Path) -> None:
    many = tuple(f"some/long/directory/file_{n}.py" for n in range(5))
    tricky = ("odd name..py", "dir/x?.py")

    long_id = compute_review_id(_task(tmp_path, many), tmp_path)
    tricky_id = compute_review_id(_task(tmp_path, tricky), tmp_path)

    assert re.fullmatch(r"py--5_files--[0-9a-f]{12}", long_id)
    assert re.fullmatch(r"py--dir-x-.py_AND_odd-name.py--[0-9a-f]{12}", tricky_id)
    # mark_review_as_passed refuses "..", so no id may contain it.
    assert ".." not in tricky_id


def test_review_ids_change_with_content_and_rule_but_not_otherwise(tmp_path: Path) -> None:
    write(tmp_path, "a.py", "one\n")
    base = compute_review_id(_task(tmp_path, ("a.py",)), tmp_path)

    assert compute_review_id(_task(tmp_path, ("a.py",)), tmp_path) == base
    assert compute_review_id(_task(tmp_path, ("a.py",), instructions="Other"), tmp_path) != base
    write(tmp_path, "a.py", "two\n")
    assert compute_review_id(_task(tmp_path, ("a.py",)), tmp_path) != base


def test_instruction_file_with_every_section(tmp_path: Path) -> None:
    task = _task(
        tmp_path,
        ("a.py", "b.py"),
        source_location="sub/.deepreview:4",
        additional_files=("c.py",),
        all_changed_filenames=("a.py", "b.py", "notes.txt"),
    )

    text = build_instruction_file(task, "py--a.py_AND_b.py--0123456789ab")

    headings = [line for line in text.splitlines() if line.startswith("#") or line == "---"]
    assert headings == [
        "# Review: py — 2 files",
        "## Review Instructions",
        "## Files to Review",
        "## Unchanged Matching Files",
        "## All Changed Files",
        "---",
        "## After Review",
    ]
    assert "\n## Review Instructions\n\nLook for bugs.\n\n## Files to Review\n" in text
    assert "\n## Files to Review\n\n- @a.py\n- @b.py\n\n" in text
    assert "\n- @c.py\n" in text
    assert "\n- a.py\n- b.py\n- notes.txt\n" in text  # no @: listed, not inlined
    assert "\nThis review was requested by the policy at `sub/.deepreview:4`.\n" in text
    after_review = text.split("## After Review", 1)[1]
    assert "`mark_review_as_passed`" in after_review
    assert '`review_id`: `"py--a.py_AND_b.py--0123456789ab"`' in after_review
    assert text.endswith("\n")


def test_instruction_file_leaves_out_empty_sections(tmp_path: Path) -> None:
    text = build_instruction_file(_task(tmp_path, ("a.py",)), "py--a.py--0123456789ab")

    assert text.startswith("# Review: py — a.py\n")
    assert "## Unchanged Matching Files" not in text
    assert "## All Changed Files" not in text
    assert "---" not in text
    assert "## After Review" in text


# --- get_review_instructions: the full pipeline ------------------------------------------------


def test_full_pipeline_output_and_files(project: Path) -> None:
    write(project, "a.py", "print('changed')\n")
    write(project, "new.py", "print('new')\n")  # untracked, still reviewed

    output = review(project)

    rule_part = (".deepreview", "py", "Look for bugs.")
    a_id = "py--a.py--" + _expected_hash(*rule_part, {"a.py": b"print('changed')\n"})
    new_id = "py--new.py--" + _expected_hash(*rule_part, {"new.py": b"print('new')\n"})
    assert output == (
        "Invoke the following list of Tasks in parallel:\n"
        "\n"
        'name: "py review of a.py"\n'
        "\tdescription: Review py\n"
        "\tsubagent_type: general-purpose\n"
        f'\tprompt: "@.deepwork/tmp/review_instructions/{a_id}.md"\n'
        "\n"
        'name: "py review of new.py"\n'
        "\tdescription: Review py\n"
        "\tsubagent_type: general-purpose\n"
        f'\tprompt: "@.deepwork/tmp/review_instructions/{new_id}.md"\n'
    )
    content = (project / INSTRUCTIONS_DIR / f"{a_id}.md").read_text()
    assert content == build_instruction_file(
        _task(project, ("a.py",), instructions="Look for bugs.", source_location=".deepreview:1"),
        a_id,
    )


def test_unsupported_platform(project: Path) -> None:
    assert review(project, ["a.py"], platform="gemini") == (
        "Review error: Unsupported platform: 'gemini'. Supported platforms: claude"
    )
    assert review(project, ["a.py"], platform="claude").startswith("Invoke the following")


def test_no_configuration(tmp_path: Path) -> None:
    assert review(tmp_path, ["a.py"]) == "No .deepreview configuration files found."


def test_no_valid_rules_lists_every_parse_error(tmp_path: Path) -> None:
    first = write_rules(tmp_path / "a", {"r": rule(["*"], strategy="bogus")})
    second = write_rules(tmp_path, {"r": rule(["*"], instructions={"file": "nope.md"})})

    assert review(tmp_path, ["a.py"]) == (
        "No valid .deepreview rules found. Parse errors:\n"
        f"  - {first}: Schema validation failed for {first}: Validation error at "
        "r -> review -> strategy: 'bogus' is not one of "
        "['individual', 'matches_together', 'all_changed_files']\n"
        f"  - {second}: Instructions file not found: {tmp_path / 'nope.md'}"
    )


def test_no_changed_files_from_git_or_an_empty_list(project: Path) -> None:
    assert review(project) == "No changed files detected."
    assert review(project, []) == "No changed files detected."


def test_no_matching_rules(project: Path) -> None:
    write(project, "README.md", "edited\n")

    assert review(project) == "No review rules matched the changed files."


def test_git_errors_become_review_errors(tmp_path: Path) -> None:
    write_rules(tmp_path, {"py": rule(["*.py"])})

    output = review(tmp_path)

    assert output.startswith(
        "Review error: Git error: git rev-parse failed: fatal: not a git repository"
    )


def test_explicit_files_bypass_git_and_are_normalised(tmp_path: Path) -> None:
    root = tmp_path / "not-a-repo"
    write_rules(root, {"py": rule(["**/*.py"], strategy="matches_together")})

    output = review(root, ["b.py", "./a.py", "b.py", "pkg/../c.py", str(root / "d.py")])

    assert 'name: "py review of 4 files"' in output
    [(instruction_file, _)] = prompts(output)
    content = (root / instruction_file).read_text()
    assert "- @a.py\n- @b.py\n- @c.py\n- @d.py\n" in content


def test_write_errors_become_review_errors(tmp_path: Path) -> None:
    write_rules(tmp_path, {"py": rule(["*.py"])})
    write(tmp_path, ".deepwork/tmp", "a file where a directory should be\n")

    output = review(tmp_path, ["a.py"])

    assert output.startswith("Review error: Error writing instruction files: ")


def test_parse_warnings_prefix_a_successful_run(tmp_path: Path) -> None:
    write_rules(tmp_path, {"py": rule(["*.py"])})
    broken = write_rules(tmp_path / "sub", {"r": {"description": "no match or review"}})

    output = review(tmp_path, ["a.py"])

    warning = (
        "Warning: Some .deepreview files could not be parsed:\n"
        f"  - {broken}: Schema validation failed for {broken}: Validation error at r: "
        "'match' is a required property\n"
        "\n"
    )
    assert output.startswith(warning + "Invoke the following list of Tasks in parallel:\n\n")
    # Informational results carry no warning, as in 0.9.1.
    assert review(tmp_path, ["notes.txt"]) == "No review rules matched the changed files."


# --- explicit files must stay inside the project -----------------------------------------------


@pytest.mark.parametrize(
    ("path", "reason"),
    [
        ("../outside.py", "escapes the project root with '..'"),
        ("pkg/../../outside.py", "escapes the project root with '..'"),
        ("/etc/passwd", "is an absolute path outside the project root"),
        ("a\0.py", "contains a NUL byte"),
        (".", "names the project root, not a file"),
        ("link/secret.py", "leads outside the project root through a symbolic link"),
    ],
)
def test_paths_outside_the_project_are_refused(tmp_path: Path, path: str, reason: str) -> None:
    root = tmp_path / "project"
    write_rules(root, {"py": rule(["**/*.py"])})
    write(tmp_path, "elsewhere/secret.py")
    os.symlink(tmp_path / "elsewhere", root / "link")

    output = review(root, ["a.py", path])

    assert output == (
        f"Review error: Only files inside the project can be reviewed; rejected: {path!r} {reason}"
    )
    assert str(tmp_path) not in output
    assert not (root / INSTRUCTIONS_DIR).exists()


def test_every_refused_path_is_named(tmp_path: Path) -> None:
    write_rules(tmp_path, {"py": rule(["**/*.py"])})

    output = review(tmp_path, ["../x.py", "ok.py", "/tmp/y.py"])

    assert output == (
        "Review error: Only files inside the project can be reviewed; rejected: "
        "'../x.py' escapes the project root with '..'; "
        "'/tmp/y.py' is an absolute path outside the project root"
    )


# --- get_configured_reviews --------------------------------------------------------------------


def test_configured_reviews_lists_rules_then_parse_errors(tmp_path: Path) -> None:
    write_text_rules(
        tmp_path,
        """\
        py:
          description: Python code
          match: {include: ["**/*.py"]}
          review: {strategy: individual, instructions: Check.}

        # Documentation rules follow.



        docs:
          description: Docs
          match: {include: ["**/*.md"], exclude: ["CHANGELOG.md"]}
          review: {strategy: matches_together, instructions: Check.}
        """,
    )
    write_rules(tmp_path / "api", {"api": rule(["*.py"], description="API code")})
    broken = write_text_rules(tmp_path / "web", "r: [\n")

    listing = get_configured_reviews(project_root=tmp_path, only_rules_matching_files=None)

    assert listing[:3] == [
        {"name": "api", "description": "API code", "defining_file": "api/.deepreview:1"},
        {"name": "py", "description": "Python code", "defining_file": ".deepreview:1"},
        {"name": "docs", "description": "Docs", "defining_file": ".deepreview:10"},
    ]
    [parse_error] = listing[3:]
    assert parse_error["name"] == f"PARSE_ERROR:{broken}"
    assert parse_error["defining_file"] == str(broken)
    assert parse_error["description"].startswith(f"Failed to parse {broken}: Failed to parse YAML")

    def names(files: list[str]) -> list[str]:
        found = get_configured_reviews(project_root=tmp_path, only_rules_matching_files=files)
        return [entry["name"] for entry in found]

    # Filtering applies to rules; parse errors are always reported.
    parse_name = f"PARSE_ERROR:{broken}"
    assert names(["api/v1.py"]) == ["api", "py", parse_name]
    assert names(["./lib/x.py"]) == ["py", parse_name]
    assert names(["CHANGELOG.md"]) == [parse_name]
    assert names(["guide.md", "app.py"]) == ["py", "docs", parse_name]
    assert names([]) == [parse_name]
    assert names(["../outside.py"]) == [parse_name]


def test_configured_reviews_without_any_files(tmp_path: Path) -> None:
    assert get_configured_reviews(project_root=tmp_path, only_rules_matching_files=None) == []


# --- pass caching ------------------------------------------------------------------------------


def test_a_passed_review_is_skipped_until_its_file_changes(project: Path) -> None:
    write(project, "a.py", "v1\n")
    write(project, "b.py", "v1\n")
    first = prompts(review(project))
    (a_file, a_id), (_, b_id) = first

    assert mark_review_as_passed(project_root=project, review_id=a_id) == (
        f"Review '{a_id}' marked as passed."
    )
    assert (project / INSTRUCTIONS_DIR / f"{a_id}.passed").read_bytes() == b""

    # Only b.py is still open.
    assert [review_id for _, review_id in prompts(review(project))] == [b_id]

    mark_review_as_passed(project_root=project, review_id=b_id)
    assert review(project) == (
        "All matching reviews have already passed for the current file contents."
    )

    write(project, "a.py", "v2\n")
    [(_, reopened_id)] = prompts(review(project))
    assert reopened_id.startswith("py--a.py--")
    assert reopened_id != a_id
    # The earlier instruction file is left for whoever may still be reading it.
    assert (project / a_file).exists()


def test_marking_a_pass_needs_no_existing_directory(tmp_path: Path) -> None:
    assert mark_review_as_passed(project_root=tmp_path, review_id="py--a.py--0123456789ab") == (
        "Review 'py--a.py--0123456789ab' marked as passed."
    )
    assert (tmp_path / INSTRUCTIONS_DIR / "py--a.py--0123456789ab.passed").is_file()


@pytest.mark.parametrize(
    "review_id", ["", "   ", "../escape", "a/b", "/abs", "x..y", "a\0b", "a\\b"]
)
def test_mark_review_as_passed_validates_the_id(tmp_path: Path, review_id: str) -> None:
    result = mark_review_as_passed(project_root=tmp_path, review_id=review_id)

    assert result.startswith("Validation error: ")
    assert not (tmp_path / ".deepwork").exists()


# --- concurrency and stale files ---------------------------------------------------------------


def test_concurrent_calls_never_lose_each_others_files(project: Path) -> None:
    write_rules(
        project,
        {
            "py": rule(["**/*.py"], instructions="Look for bugs."),
            "together": rule(["**/*.py"], strategy="matches_together"),
        },
    )
    for n in range(6):
        write(project, f"pkg/m{n}.py", f"value = {n}\n")
    file_sets = [None, ["pkg/m0.py"], ["pkg/m1.py", "pkg/m2.py"], ["a.py", "pkg/m3.py"]] * 3
    start = threading.Barrier(len(file_sets))
    results: list[str | None] = [None] * len(file_sets)

    def worker(index: int, files: list[str] | None) -> None:
        start.wait()
        results[index] = review(project, files)

    threads = [threading.Thread(target=worker, args=item) for item in enumerate(file_sets)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    for output in results:
        assert output is not None
        assert output.startswith("Invoke the following list of Tasks in parallel:"), output
        for instruction_file, review_id in prompts(output):
            content = (project / instruction_file).read_text()
            assert content.startswith("# Review: ")
            assert f'`review_id`: `"{review_id}"`' in content
    leftovers = [p.name for p in (project / INSTRUCTIONS_DIR).iterdir() if p.suffix == ".tmp"]
    assert leftovers == []


def test_only_stale_instruction_files_are_cleaned_up(project: Path) -> None:
    directory = project / INSTRUCTIONS_DIR
    old = time.time() - STALE_AFTER - 60
    stale = write(directory, "old--a.py--000000000000.md")
    os.utime(stale, (old, old))
    stale_tmp = write(directory, ".old.abc.tmp")
    os.utime(stale_tmp, (old, old))
    recent = write(directory, "other-call--b.py--111111111111.md")
    passed = write(directory, "old--a.py--000000000000.passed", "")
    os.utime(passed, (old, old))

    write(project, "a.py", "edited\n")
    [(instruction_file, _)] = prompts(review(project))

    assert not stale.exists()
    assert not stale_tmp.exists()
    assert recent.exists()
    assert passed.exists()
    assert (project / instruction_file).exists()


def test_scratch_files_are_not_reviewed_on_the_next_run(project: Path) -> None:
    write_rules(project, {"md": rule(["**/*.md"], strategy="matches_together")})
    commit_all(project, "markdown rule")
    write(project, "README.md", "hello\n")

    first = prompts(review(project))
    second = prompts(review(project))

    assert first == second
    # The instruction files from the first run are untracked files now, yet not reviewed.
    [(instruction_file, _)] = second
    assert "- @README.md\n\n" in (project / instruction_file).read_text()


def test_an_instruction_file_quoting_a_private_file_is_private_too(project: Path) -> None:
    (project / "a.py").write_text("TOKEN = 'do not share'\n")
    (project / "a.py").chmod(0o600)
    previous = os.umask(0o022)
    try:
        output = review(project, files=["a.py"])
    finally:
        os.umask(previous)
    [(relative, _)] = prompts(output)
    written = project / relative
    assert oct(written.stat().st_mode & 0o777) == oct(0o600)
    assert oct(written.parent.stat().st_mode & 0o777) == oct(0o700)


def test_a_path_too_deep_to_match_is_refused_by_name(project: Path) -> None:
    deep = "/".join(["a"] * 300) + "/x.py"
    output = review(project, files=[deep])
    assert output.startswith("Review error: Only files inside the project can be reviewed")
    assert "has 301 path segments, more than the 256 a matched path may have" in output


def test_repeated_globstars_match_a_deep_path_in_linear_time(project: Path) -> None:
    # A rule with many `**` used to backtrack over every way of sharing the path's folders
    # among them (half a minute at 60 folders); each call must now answer at once.
    write_rules(project, {"deep": rule(["**/a/**/a/**/a/**/a/**/a/**/a/c"], instructions="x")})
    deep = "/".join(["a"] * 60) + "/x"
    started = time.monotonic()
    output = review(project, files=[deep])
    assert time.monotonic() - started < 5
    assert output == "No review rules matched the changed files."
