"""Output path rules, on real files and symlinks in a temporary project."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from workflows.errors import InvalidInput
from workflows.outputs import DeclaredOutput, validate_outputs

FILE = DeclaredOutput(name="report.md", type="file", required=True)
FILES = DeclaredOutput(name="pages", type="files", required=True)
OPTIONAL = DeclaredOutput(name="extra", type="files", required=False)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    project = (tmp_path / "project").resolve()
    (project / "docs").mkdir(parents=True)
    (project / "report.md").write_text("r")
    (project / "docs" / "a.md").write_text("a")
    (tmp_path / "secret.md").write_text("s")
    return project


def check(root: Path, submitted: dict, declared=(FILE,)) -> None:
    validate_outputs(declared=declared, submitted=submitted, project_root=root)


def test_valid_paths_pass(root: Path):
    check(
        root,
        {"report.md": "report.md", "pages": ["docs/a.md", "./docs/../report.md"]},
        declared=(FILE, FILES),
    )
    check(root, {"report.md": str(root / "report.md")})  # absolute but inside the project


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (
            "",
            "Output 'report.md': the path is empty; give a file path relative to the project root",
        ),
        ("   ", "Output 'report.md': the path is empty"),
        ("docs/\x00a.md", "Output 'report.md': the path contains a NUL byte"),
        ("../secret.md", "Output 'report.md': '../secret.md' resolves outside the project root"),
        ("docs/../../secret.md", "resolves outside the project root"),
        ("docs", "Output 'report.md': 'docs' is a directory; outputs must be files"),
        ("nope.md", "Output 'report.md': file not found at 'nope.md'"),
    ],
)
def test_bad_paths_name_the_output_and_the_rule(root: Path, value: str, message: str):
    with pytest.raises(InvalidInput) as excinfo:
        check(root, {"report.md": value})
    assert message in str(excinfo.value)


def test_absolute_path_elsewhere_is_refused_without_echoing_it(root: Path):
    outside = str(root.parent / "secret.md")
    with pytest.raises(InvalidInput) as excinfo:
        check(root, {"report.md": outside})
    assert "absolute paths outside the project root are not allowed" in str(excinfo.value)
    assert str(root.parent) not in str(excinfo.value)


def test_symlink_out_of_the_project_is_refused(root: Path):
    os.symlink(root.parent / "secret.md", root / "link.md")
    with pytest.raises(InvalidInput, match="'link.md' is a symbolic link to a file outside"):
        check(root, {"report.md": "link.md"})


def test_symlink_inside_the_project_is_fine(root: Path):
    os.symlink(root / "docs" / "a.md", root / "alias.md")
    check(root, {"report.md": "alias.md"})


def test_broken_symlink_is_not_found(root: Path):
    os.symlink(root / "gone.md", root / "dangling.md")
    with pytest.raises(InvalidInput, match="file not found at 'dangling.md'"):
        check(root, {"report.md": "dangling.md"})


def test_required_files_output_needs_a_file_but_optional_may_be_empty(root: Path):
    with pytest.raises(InvalidInput, match="'pages' is required and must list at least one file"):
        check(root, {"pages": []}, declared=(FILES,))
    check(root, {"extra": []}, declared=(OPTIONAL,))


def test_every_member_of_a_files_output_is_checked(root: Path):
    with pytest.raises(InvalidInput, match="Output 'pages': file not found at 'docs/b.md'"):
        check(root, {"pages": ["docs/a.md", "docs/b.md"]}, declared=(FILES,))
    with pytest.raises(InvalidInput, match="Output 'pages': all paths must be strings, got int"):
        check(root, {"pages": ["docs/a.md", 3]}, declared=(FILES,))


def test_order_of_checks_matches_deepwork(root: Path):
    # Unknown names are reported before missing ones, both sorted and comma-joined.
    with pytest.raises(InvalidInput) as excinfo:
        check(root, {"z": "1", "b": "2"}, declared=(FILE, FILES))
    assert str(excinfo.value) == "Unknown output names: b, z. Declared outputs: pages, report.md"
    with pytest.raises(InvalidInput) as excinfo:
        check(root, {}, declared=(FILE, FILES))
    assert str(excinfo.value) == (
        "Missing required outputs: pages, report.md. All required outputs must be provided."
    )
    with pytest.raises(
        InvalidInput, match="type 'file' and must be a single string path, got list"
    ):
        check(root, {"report.md": ["report.md"]})
