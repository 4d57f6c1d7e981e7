"""How the workflow tools are set up: the environment variables a server reads at start and
the settings they make."""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass

from mcp_bridge.toolsets.specs import SourceConfig, env_float
from workflow_tools.selectors import FilterRule, env_filters

logger = logging.getLogger("deepwork.workflow_tools")


ENABLED_ENV = "DEEPWORK_WORKFLOW_TOOLS_ENABLED"
POLL_ENV = "DEEPWORK_WORKFLOW_TOOLS_POLL_SECONDS"
TIMEOUT_ENV = "DEEPWORK_WORKFLOW_TOOLS_TIMEOUT"
SOURCE_POLL_ENV = "DEEPWORK_WORKFLOW_SOURCE_POLL_SECONDS"
SOURCE_URL_ENV = "DEEPWORK_WORKFLOW_SOURCE"
SOURCE_TOKEN_ENV = "DEEPWORK_WORKFLOW_SOURCE_TOKEN"
PAGE_SIZE_ENV = "DEEPWORK_TOOLS_PAGE_SIZE"
INCLUDE_ENV = "DEEPWORK_WORKFLOW_TOOLS_INCLUDE"
EXCLUDE_ENV = "DEEPWORK_WORKFLOW_TOOLS_EXCLUDE"

# The key of a tool's `_meta` that Claude Code reads, when it defers MCP tools behind its tool
# search, for words to match a deferred tool by besides its name (its always-loaded mark is
# ``mcp_bridge.runner.ALWAYS_LOAD_META``).
SEARCH_HINT_META = "anthropic/searchHint"
SEARCH_HINT_CHARS = 200
# Beyond this many workflow tools a listing is logged as too long: models choose tools less
# well among many, and a client that loads every schema pays for all of them on every turn.
MANY_WORKFLOW_TOOLS = 30


def page_size_from_env() -> int | None:
    """Tools per tools/list page, or None (the default, and 0): one page holds them all.

    Off by default because several clients read only the first page (see the README)."""
    raw = os.environ.get(PAGE_SIZE_ENV, "").strip()
    if not raw:
        return None
    try:
        size = int(raw)
    except ValueError:
        size = -1
    if size < 0:
        logger.warning(
            "%s=%r is not a whole number >= 0; tools/list is not paged", PAGE_SIZE_ENV, raw
        )
        return None
    return size or None


@dataclass(frozen=True)
class Settings:
    enabled: bool = True
    poll_seconds: float = 2.0
    run_timeout: float = 300.0
    source_poll_seconds: float = 30.0
    page_size: int | None = None
    # DEEPWORK_WORKFLOW_TOOLS_INCLUDE / _EXCLUDE, read once at start.
    env_rules: tuple[FilterRule, ...] = ()

    @classmethod
    def from_env(cls) -> Settings:
        return cls(
            env_rules=env_filters(os.environ, INCLUDE_ENV, EXCLUDE_ENV),
            enabled=os.environ.get(ENABLED_ENV, "true").strip().lower()
            not in ("0", "false", "no", "off"),
            poll_seconds=env_float(POLL_ENV, 2.0),
            run_timeout=env_float(TIMEOUT_ENV, 300.0),
            source_poll_seconds=env_float(SOURCE_POLL_ENV, 30.0),
            page_size=page_size_from_env(),
        )


def remote_sources_from_env() -> list[SourceConfig]:
    url = os.environ.get(SOURCE_URL_ENV, "").strip()
    if not url:
        return []
    return [SourceConfig(url, os.environ.get(SOURCE_TOKEN_ENV) or None)]
