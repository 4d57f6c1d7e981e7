"""``get_review_instructions`` and ``get_configured_reviews`` as DeepWork 0.14 answers them.

The one ``.deepreview`` pipeline of ``reviews.deepreview.tools`` run with 0.14's dialect:
its messages, explicit ``files`` dropping catch-all rules (every include
pattern made only of ``*`` and ``/``), and tasks listed in 0.14's agent format
(``Review <dir>/<rule>``, ``deepwork:reviewer``), rules from DeepSchemas beside the
``.deepreview`` ones (``reviews.deepreview.deepschema``) and 0.14's review ids (content only).
Like the 0.9.1 tools these never raise: every failure is a message.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from reviews.deepreview import tools
from reviews.deepreview.config import ReviewRule, ReviewTask
from reviews.deepreview.deepschema import load_deepschema_rules
from reviews.deepreview.discovery import ParseFailure, load_all_rules
from reviews.deepreview.instructions import INSTRUCTIONS_DIR, compute_review_task_id
from reviews.deepreview.instructions014 import prepare_render_review_task, render_review_task
from reviews.deepreview.precompute import NO_COMMANDS, CommandPolicy
from reviews.deepreview.tools import ReviewDialect, is_catch_all

NO_CONFIG = "No .deepreview configuration files or DeepSchema definitions found."
REVIEWER = "deepwork:reviewer"


@dataclass(frozen=True)
class AgentTask:
    """One review the agent is to run: its description line and its instructions file."""

    description: str
    review_id: str
    agent: str
    scope: str  # the reviewed files, or "inline content"


def format_tasks(tasks: Sequence[AgentTask]) -> str:
    """The agent list 0.14's formatter prints: each task ends with an empty
    line, and the text with the newline of that line, no more."""
    if not tasks:
        return "No review tasks to execute."
    lines = [
        "Invoke the following list of Agents in parallel.",
        "IMPORTANT: Do NOT read the prompt files yourself. Pass the prompt field directly to "
        "each agent — the @file references are expanded automatically.",
        "",
    ]
    for task in tasks:
        lines += [
            f"description: {task.description}",
            f"\tsubagent_type: {task.agent}",
            f'\tprompt: "@{INSTRUCTIONS_DIR}/{task.review_id}.md"',
            "",
        ]
    return "\n".join(lines)


__all__ = [
    "AGENT_TASKS_DIALECT",
    "get_configured_reviews",
    "get_review_instructions",
    "is_catch_all",
]


def rule_prefix(rule: ReviewRule, project_root: Path) -> str:
    """``<dir>/`` of the file defining the rule, or nothing when it sits at the root."""
    folder = rule.source_file.parent
    return "" if folder == project_root else f"{folder.name}/"


def as_agent_task(task: ReviewTask, review_id: str, project_root: Path) -> AgentTask:
    return AgentTask(
        f"Review {rule_prefix(task.rule, project_root)}{task.rule_name}",
        review_id,
        task.agent_name or REVIEWER,
        ", ".join(task.files_to_review),
    )


def _format(written: Sequence[tuple[ReviewTask, str]], project_root: Path) -> str:
    return format_tasks([as_agent_task(task, rid, project_root) for task, rid in written])


def load_rules_with_schemas(project_root: Path) -> tuple[list[ReviewRule], list[ParseFailure]]:
    """The project's ``.deepreview`` rules, then its DeepSchema rules."""
    rules, failures = load_all_rules(project_root, extended_keys=True)
    schema_rules, schema_failures = load_deepschema_rules(project_root)
    return rules + schema_rules, failures + schema_failures


def _review_id(task: ReviewTask, project_root: Path) -> str:
    return compute_review_task_id(task, project_root)


AGENT_TASKS_DIALECT = ReviewDialect(
    no_valid_rules="No valid review rules found.",
    no_config=NO_CONFIG,
    all_passed=None,
    drop_catch_all_for_files=True,
    format_tasks=_format,
    load_rules=load_rules_with_schemas,
    review_id=_review_id,
    render=render_review_task,
    prepare_render=prepare_render_review_task,
)


def get_review_instructions(
    *,
    project_root: Path,
    files: list[str] | None,
    platform: str | None,
    commands: CommandPolicy = NO_COMMANDS,
) -> str:
    return tools.get_review_instructions(
        project_root=project_root,
        files=files,
        platform=platform,
        dialect=AGENT_TASKS_DIALECT,
        commands=commands,
    )


def get_configured_reviews(
    *, project_root: Path, only_rules_matching_files: list[str] | None
) -> list[dict[str, str]]:
    return tools.get_configured_reviews(
        project_root=project_root,
        only_rules_matching_files=only_rules_matching_files,
        dialect=AGENT_TASKS_DIALECT,
    )
