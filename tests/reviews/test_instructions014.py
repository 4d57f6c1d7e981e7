"""0.14's instruction-file layout: sections, inlined files and their limits."""

from __future__ import annotations

import os
from pathlib import Path

from reviews.deepreview.config import ReviewRule, ReviewTask
from reviews.deepreview.instructions014 import (
    MAX_INLINED_BYTES,
    MAX_INLINED_FILES,
    render_review_task,
)
from tests.reviews import write


def _task(
    root: Path,
    files: tuple[str, ...],
    *,
    strategy: str = "individual",
    references: tuple[tuple[str, str], ...] = (),
    **extra: tuple[str, ...],
) -> ReviewTask:
    rule = ReviewRule(
        name="r",
        description="d",
        include=("*",),
        exclude=(),
        strategy=strategy,
        instructions="  Check it.\n",
        source_file=root / ".deepreview",
        source_dir=root,
        reference_files=references,
    )
    return ReviewTask(rule, files, source_location=".deepreview:1", **extra)


def _headings(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith(("# Review", "## ", "---"))]


def test_every_section_in_order(tmp_path: Path) -> None:
    write(tmp_path, "a.py", "print(1)\n")
    write(tmp_path, "b.md", "b\n")
    text = render_review_task(
        _task(
            tmp_path,
            ("a.py", "b.md"),
            strategy="matches_together",
            references=(("ref.toml", "Settings"),),
            additional_files=("c.md",),
            all_changed_filenames=("a.py", "b.md", "x"),
        ),
        "r--a.py_AND_b.md--0123456789ab",
        tmp_path,
    )
    assert _headings(text) == [
        "# Review: r — 2 files",
        "## Project Root",
        "## Review Instructions",
        "## Relevant File Contents",
        "## Files to Review",
        "## Unchanged Matching Files",
        "## All Changed Files",
        "## After Review",
        "---",
    ]
    # matches_together: only the reference is inlined, and it could not be read.
    assert "### ref.toml\n\nSettings\n\n(could not inline ref.toml: No such file or directory)" in (
        text
    )
    assert "## Files to Review\n\n- @a.py\n- @b.md\n" in text
    assert '- `review_id`: `"r--a.py_AND_b.md--0123456789ab"`\n' in text
    assert text.endswith("This review was requested by the policy at `.deepreview:1`.\n")


def test_inline_values_and_plain_tasks_leave_out_empty_sections(tmp_path: Path) -> None:
    text = render_review_task(
        _task(tmp_path, ()), "r--inline--0123456789ab", tmp_path, inline="Fine."
    )
    assert _headings(text) == [
        "# Review: r — inline content",
        "## Project Root",
        "## Review Instructions",
        "## Content to Review",
        "## After Review",
        "---",
    ]
    assert "## Review Instructions\n\nCheck it.\n\n## Content to Review\n\nFine.\n" in text


def test_inlining_is_bounded_and_fenced_safely(tmp_path: Path) -> None:
    write(tmp_path, "doc.md", "before\n````\nafter\n")
    refs = tuple((f"r{n}.txt", "") for n in range(MAX_INLINED_FILES + 2))
    for name, _ in refs:
        write(tmp_path, name, "x\n")
    text = render_review_task(_task(tmp_path, ("doc.md",), references=refs), "id", tmp_path)
    # The content's own four backticks cannot close the fence.
    assert "\n`````markdown\nbefore\n````\nafter\n`````\n" in text
    assert text.count("\n### ") == MAX_INLINED_FILES
    assert "Not inlined (over the limit of 20 files or 262144 bytes)" in text
    assert "- @r19.txt\n- @r20.txt\n- @r21.txt\n" in text

    big = tmp_path / "big.md"
    with big.open("wb") as handle:
        handle.write(b"\xc3\xa9" * (MAX_INLINED_BYTES // 2 + 10))  # split mid-character at the cut
    text = render_review_task(_task(tmp_path, ("big.md", "doc.md")), "id", tmp_path)
    assert f"(cut after {MAX_INLINED_BYTES} of {big.stat().st_size} bytes" in text
    assert "### doc.md" not in text
    assert "- @doc.md\n" in text.split("Not inlined", 1)[1]


def test_links_out_of_the_project_are_never_inlined(tmp_path: Path) -> None:
    root = tmp_path / "p"
    write(tmp_path, "secret.txt", "secret\n")
    root.mkdir()
    os.symlink(tmp_path / "secret.txt", root / "leak.md")
    text = render_review_task(_task(root, ("leak.md",)), "id", root)
    assert "\nsecret\n" not in text
    assert "(could not inline leak.md:" in text
