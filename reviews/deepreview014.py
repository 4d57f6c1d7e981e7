"""``get_review_instructions`` and ``get_configured_reviews`` as DeepWork 0.14 answers them.

The one ``.deepreview`` pipeline of ``reviews.deepreview.tools`` run with 0.14's dialect
(digest §5.6-§5.8): its messages, explicit ``files`` dropping catch-all rules (every include
pattern made only of ``*`` and ``/``), and tasks listed in 0.14's agent format
(``Review <dir>/<rule>``, ``deepwork:reviewer``).
Like the 0.9.1 tools these never raise: every failure is a message.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from reviews.deepreview import tools
from reviews.deepreview.config import ReviewRule, ReviewTask
from reviews.deepreview.instructions import describe_scope
from reviews.deepreview.tools import ReviewDialect, is_catch_all
from reviews.gate014 import REVIEWER, Task014, format_tasks

NO_CONFIG = "No .deepreview configuration files or DeepSchema definitions found."

__all__ = ["DIALECT_014", "get_configured_reviews", "get_review_instructions", "is_catch_all"]


def rule_prefix(rule: ReviewRule, project_root: Path) -> str:
    """``<dir>/`` of the file defining the rule, or nothing when it sits at the root."""
    folder = rule.source_file.parent
    return "" if folder == project_root else f"{folder.name}/"


def as_task014(task: ReviewTask, review_id: str, project_root: Path) -> Task014:
    return Task014(
        f"Review {rule_prefix(task.rule, project_root)}{task.rule_name}",
        review_id,
        task.agent_name or REVIEWER,
        describe_scope(task),
    )


def _format(written: Sequence[tuple[ReviewTask, str]], project_root: Path) -> str:
    return format_tasks([as_task014(task, rid, project_root) for task, rid in written])


DIALECT_014 = ReviewDialect(
    no_valid_rules="No valid review rules found.",
    no_config=NO_CONFIG,
    drop_catch_all_for_files=True,
    format_tasks=_format,
)


def get_review_instructions(
    *, project_root: Path, files: list[str] | None, platform: str | None
) -> str:
    return tools.get_review_instructions(
        project_root=project_root, files=files, platform=platform, dialect=DIALECT_014
    )


def get_configured_reviews(
    *, project_root: Path, only_rules_matching_files: list[str] | None
) -> list[dict[str, str]]:
    return tools.get_configured_reviews(
        project_root=project_root,
        only_rules_matching_files=only_rules_matching_files,
        dialect=DIALECT_014,
    )
