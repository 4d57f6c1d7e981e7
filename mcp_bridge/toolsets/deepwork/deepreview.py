"""The ``deepreview`` toolset: the three tools of the `.deepreview` review pipeline.

They work outside any workflow and touch no database: each reads files and runs git, off the
event loop.
"""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import Annotated, Any, TypeVar

import anyio
from fastmcp import FastMCP
from pydantic import Field

from mcp_bridge.runner import tool
from mcp_bridge.state import ServerState, log_call
from mcp_bridge.toolsets import hints

T = TypeVar("T")

TOOL_NAMES = ("get_review_instructions", "get_configured_reviews", "mark_review_as_passed")

# The same three in either generation's wording. Building review tasks writes their
# instruction files and may run the rules' precompute commands.
REVIEW_INSTRUCTIONS_HINTS = hints.writes("Get review tasks", idempotent=True, open_world=True)
CONFIGURED_REVIEWS_HINTS = hints.reads("List review rules")
MARK_PASSED_HINTS = hints.writes("Mark a review as passed", idempotent=True)


def _deepreview() -> ModuleType:
    # Imported on first use: the .deepreview pipeline (jsonschema, wcmatch) is not needed to
    # start serving, and start-up time is what an agent waits for.
    from reviews import deepreview

    return deepreview


def beside_review_tasks(state: ServerState) -> bool:
    """Whether these 0.9.1 tools run beside 0.14's quality gate (``--generation both``), and
    so must see the project as the gate does (``reviews.deepreview.tools.DIALECT_091_BOTH``).

    The same review has two ids there, 0.9.1's here and 0.14's in the gate's feedback, and an
    agent marks whichever it was shown: both sides count a pass under either id
    (``reviews.deepreview.instructions.task_is_passed``), so a review passed one way is not
    asked for again the other way. And a ``.deepreview`` with 0.14's keys, which the gate
    reads, is read here too rather than reported as broken. One-generation servers keep their
    own id form and their own ``.deepreview`` schema.
    """
    return getattr(state.config, "generation", "both") == "both"


async def off_loop(state: ServerState, tool: str, params: dict[str, Any], fn: Callable[[], T]) -> T:
    answer = await anyio.to_thread.run_sync(fn)
    log_call(state, tool, params)
    return answer


def register(mcp: FastMCP, state: ServerState, prefix: str = "") -> None:
    """Put the three review tools on ``mcp``, each named ``prefix + name``."""

    def dialect() -> Any:
        tools = _deepreview().tools
        return tools.DIALECT_091_BOTH if beside_review_tasks(state) else tools.DIALECT_091

    @tool(
        mcp,
        name=f"{prefix}get_review_instructions",
        annotations=REVIEW_INSTRUCTIONS_HINTS,
    )
    async def get_review_instructions(
        files: Annotated[
            list[str] | None,
            Field(
                description="Files to review, relative to the project root. Omit to review "
                "what changed on this branch (against main/master) plus uncommitted and "
                "untracked files."
            ),
        ] = None,
    ) -> str:
        """Turn the project's `.deepreview` rules into review tasks for the given (or changed)
        files. Returns a list of tasks (name, description, subagent_type, prompt) to run in
        parallel as sub-agents; each prompt points at an instructions file. When a review
        passes, call `mark_review_as_passed` with its id so it is not asked for again until one
        of its files changes. Works outside any workflow."""
        return await off_loop(
            state,
            f"{prefix}get_review_instructions",
            {"files": files},
            lambda: _deepreview().get_review_instructions(
                project_root=state.project_root,
                files=files,
                platform=state.platform,
                dialect=dialect(),
                commands=state.review_commands(),
            ),
        )

    @tool(
        mcp,
        name=f"{prefix}get_configured_reviews",
        annotations=CONFIGURED_REVIEWS_HINTS,
    )
    async def get_configured_reviews(
        only_rules_matching_files: Annotated[
            list[str] | None,
            Field(
                description="Only list rules that match at least one of these files "
                "(relative to the project root). Omit to list every rule."
            ),
        ] = None,
    ) -> list[dict[str, str]]:
        """List the review rules configured in the project's `.deepreview` files: each rule's
        name, description and defining file with line. Files that fail to parse are listed as
        `PARSE_ERROR:<path>` entries. Works outside any workflow."""
        return await off_loop(
            state,
            f"{prefix}get_configured_reviews",
            {"only_rules_matching_files": only_rules_matching_files},
            lambda: _deepreview().get_configured_reviews(
                project_root=state.project_root,
                only_rules_matching_files=only_rules_matching_files,
                dialect=dialect(),
            ),
        )

    @tool(mcp, name=f"{prefix}mark_review_as_passed", annotations=MARK_PASSED_HINTS)
    async def mark_review_as_passed(
        review_id: Annotated[
            str, Field(description="The review id named in the review's instructions file.")
        ],
    ) -> str:
        """Record that a review from `get_review_instructions` passed, so it is skipped until
        one of its files changes."""
        return await off_loop(
            state,
            f"{prefix}mark_review_as_passed",
            {"review_id": review_id},
            lambda: _deepreview().mark_review_as_passed(
                project_root=state.project_root, review_id=review_id
            ),
        )
