"""0.14's review ids: rule, files and a hash of the files' content only."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

from reviews.deepreview import get_review_instructions as review_091
from reviews.deepreview.agent_tasks import get_review_instructions as review_014
from reviews.deepreview.config import ReviewRule, ReviewTask
from reviews.deepreview.instructions import compute_review_task_id
from reviews.deepreview.tools import mark_review_as_passed
from tests.reviews import rule as rule_spec
from tests.reviews import write, write_rules


def _rule(
    root: Path, name: str = "py", instructions: str = "Check it.", folder: str = ""
) -> ReviewRule:
    source_dir = root / folder if folder else root
    return ReviewRule(
        name=name,
        description="d",
        include=("**/*",),
        exclude=(),
        strategy="individual",
        instructions=instructions,
        source_file=source_dir / ".deepreview",
        source_dir=source_dir,
    )


def _id(root: Path, files: tuple[str, ...], **rule: str) -> str:
    return compute_review_task_id(ReviewTask(_rule(root, **rule), files), root)


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:12]


def test_ids_as_deepwork_014_makes_them(tmp_path: Path) -> None:
    # Both ids were observed on DeepWork 0.14.0 for these exact contents.
    write(tmp_path, "docs/a.md", "# n\n")
    write(tmp_path, "top.txt", "top\n")
    assert _id(tmp_path, ("docs/a.md",), name="notes_schema DeepSchema Compliance") == (
        "notes_schema-DeepSchema-Compliance--docs-a.md--5f4d23b31f57"
    )
    assert _id(tmp_path, ("top.txt", "docs/a.md"), name="both") == (
        "both--docs-a.md_AND_top.txt--c83b7c986ac6"
    )
    # The documented scheme, recomputed: contents in path order, nothing else.
    assert _id(tmp_path, ("top.txt", "docs/a.md")).endswith(_sha(b"# n\ntop\n"))


def test_missing_files_long_path_lists_and_inline_values(tmp_path: Path) -> None:
    write(tmp_path, "a.md", "A")
    assert _id(tmp_path, ("a.md", "gone.md")) == f"py--a.md_AND_gone.md--{_sha(b'AMISSING')}"
    many = tuple(f"some/long/directory/file_{n}.md" for n in range(5))
    assert re.fullmatch(r"py--5_files--[0-9a-f]{12}", _id(tmp_path, many))
    inline = compute_review_task_id(
        ReviewTask(_rule(tmp_path, name="step_judge_output_verdict"), ()),
        tmp_path,
        inline="Fine.",
    )
    expected = _sha(b"\x00INLINE\x00Fine.")
    assert inline == f"step_judge_output_verdict--inline--{expected}"


def test_ids_keep_014_spelling_but_never_a_traversal(tmp_path: Path) -> None:
    # 0.14 keeps a space; it would also keep "..", which its own mark_review_as_passed refuses.
    assert _id(tmp_path, ("docs/my notes.md",)).startswith("py--docs-my notes.md--")
    odd = _id(tmp_path, ("docs/a..b.md", "x\\y\n.md"), name="a..b/c")
    assert odd.startswith("a.b-c--docs-a.b.md_AND_x-y-.md--")
    assert mark_review_as_passed(project_root=tmp_path, review_id=odd) == (
        f"Review '{odd}' marked as passed."
    )


def test_only_content_counts(tmp_path: Path) -> None:
    write(tmp_path, "a.md", "one\n")
    base = _id(tmp_path, ("a.md",))
    # Instructions and the rule's folder are not part of the key (0.9.1's ids hash both).
    assert _id(tmp_path, ("a.md",), instructions="Something else.", folder="sub") == base
    write(tmp_path, "a.md", "two\n")
    assert _id(tmp_path, ("a.md",)) != base


def test_014_pipeline_uses_014_ids_and_091_keeps_its_own(tmp_path: Path) -> None:
    write(tmp_path, "a.md", "# n\n")
    write_rules(tmp_path, {"md": rule_spec(["*.md"])})
    text_014 = review_014(project_root=tmp_path, files=["a.md"], platform=None)
    content_hash = _sha(b"# n\n")
    assert f'"@.deepwork/tmp/review_instructions/md--a.md--{content_hash}.md"' in text_014
    text_091 = review_091(project_root=tmp_path, files=["a.md"], platform=None)
    (id_091,) = re.findall(r"review_instructions/(.+)\.md", text_091)
    assert id_091.startswith("md--a.md--")
    assert not id_091.endswith(content_hash)
