"""What every toolset of one server shares: its configuration, project, catalog and agent.

A stdio ``mcpserve`` builds its server, and answers ``tools/list``, before Django's app registry
is ready; so this module imports the database-bound ones (models, services) where they are
used, which is always after the registry is ready.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from reviews.deepreview.precompute import RUN_COMMANDS, CommandPolicy, commands_not_allowed
from reviews.gate import REVIEW_TIMEOUT_SECONDS, ClaudeReviewer, CommandReviewer, GateConfig
from workflows.liveness import ProcessHolder

if TYPE_CHECKING:
    from workflows.models import Agent, Project
    from workflows.services.catalog import Catalog, CatalogView

logger = logging.getLogger("deepwork.mcp")

SERVER_NAME = "deepwork"
EXTERNAL_RUNNERS = ("claude",)


@dataclass(frozen=True)
class ServerConfig:
    """How one server was asked to run, as `create_server` and `mcpserve` receive it."""

    project_root: Path
    enable_quality_gate: bool = True
    quality_gate_timeout: int = REVIEW_TIMEOUT_SECONDS
    quality_gate_max_attempts: int = 3
    external_runner: str | None = None
    external_runner_cmd: str | None = None
    platform: str | None = None
    agent_id: str | None = None
    # Remote workflow sources of the workflow-tools toolset (``workflow_tools.SourceConfig``).
    workflow_sources: tuple[Any, ...] = ()
    # Which DeepWork tool generation the deepwork toolset speaks: "0.9", "0.14" or "both".
    generation: str = "both"
    # Whether the project's review precompute commands run: "run" for a server of the user's
    # own project (``create_server``, ``mcpserve``); "when_allowed" (the web server's ``/mcp``)
    # only while a person allows it for the project in the admin.
    review_commands: str = "when_allowed"


class ServerState:
    """What one server instance knows: its project, catalog and agent (claimed lazily)."""

    def __init__(self, config: ServerConfig) -> None:
        self.config = config
        self.project_root = config.project_root
        self.platform = config.platform
        self.gate = _gate_config(config)
        self.requested_agent_id = config.agent_id
        self.holder = ProcessHolder.for_this_process()
        self._lock = threading.Lock()
        self._project: Project | None = None
        self._catalog: Catalog | None = None
        self._agent: Agent | None = None
        # The caller's stack as the last answer showed it, for the call log.
        self.last_stack: list[Any] = []

    def project(self) -> Project:
        from workflows.services.catalog import Catalog
        from workflows.services.projects import project_ensure

        with self._lock:
            if self._project is None:
                self._project = project_ensure(root_path=self.project_root)
                self._catalog = Catalog(self._project, generation=self.config.generation)
            return self._project

    def catalog(self) -> Catalog:
        self.project()
        assert self._catalog is not None
        return self._catalog

    def catalog_if_unchanged(self) -> CatalogView | None:
        """The catalog view last served, while the job files are as it saw them (no database
        read: a tool may answer from it on the event loop); None before the first view or
        once a sync is due."""
        catalog = self._catalog
        return None if catalog is None else catalog.view_if_unchanged()

    def agent(self) -> Agent:
        from workflows.services.agents import agent_claim

        project = self.project()
        with self._lock:
            if self._agent is None:
                self._agent = agent_claim(
                    project=project, holder=self.holder, agent_id=self.requested_agent_id
                )
                logger.info("Serving %s as agent %s", self.project_root, self._agent.agent_id)
            return self._agent

    def claimed_agent(self) -> Agent | None:
        """The agent once claimed, without claiming it (for the heartbeat)."""
        return self._agent

    def review_commands(self) -> CommandPolicy:
        """Whether this call may run the project's review precompute commands; read from the
        database each time, so a change in the admin counts from the next call."""
        if self.config.review_commands == "run":
            return RUN_COMMANDS
        from workflows.models import Project

        project = self.project()
        allowed = (
            Project.objects.filter(pk=project.pk)
            .values_list("review_commands_allowed", flat=True)
            .first()
        )
        return RUN_COMMANDS if allowed else commands_not_allowed(project.name)

    def ready(self) -> bool:
        return self._agent is not None

    def release(self, *, dispatch: bool = False) -> None:
        """Let go of the agent on a clean exit; with ``dispatch`` (serving the agents toolset)
        the DAG steps it held are handed on at once."""
        with self._lock:
            if self._agent is None:
                return
            if dispatch:
                from dag.services import dag_agent_leave

                dag_agent_leave(agent=self._agent, holder=self.holder)
            else:
                from workflows.services.agents import agent_release

                agent_release(agent=self._agent, holder=self.holder)

    # Tool arguments that name agents or stacks: a stdio server's client is trusted with its
    # project's whole database, so they mean what they say. ``HostedState`` scopes them under
    # the request's token (``/mcp`` serves many identities from one server).

    def acting_agent_id(self, agent_id: str) -> str:
        """The agent an argument naming the caller itself (``agent_id``, ``creator_id``...)
        stands for."""
        return agent_id

    def target_agent_id(self, agent_id: str) -> str:
        """The agent an argument naming some other agent (a step's ``assigned_agent_id``, a
        ``creator_id`` filter) stands for."""
        return agent_id

    def session_check(self, session_id: str | None) -> None:
        """Refuse a call naming a session the caller may not act on (over stdio every session
        of the project is the user's own)."""

    def conversation_id(self, session_id: str) -> str:
        """The stored conversation id of DeepWork 0.14's ``session_id`` (its stacks' key)."""
        return session_id

    def session_id_shown(self, conversation_id: str) -> str:
        """``conversation_id`` as the caller named it (inverse of ``conversation_id``)."""
        return conversation_id

    def conversation_scope(self) -> str:
        """What tells apart the callers whose conversations are kept apart ('' for stdio)."""
        return ""


def _gate_config(config: ServerConfig) -> GateConfig | None:
    if not config.enable_quality_gate:
        return None
    reviewer: ClaudeReviewer | CommandReviewer | None
    if config.external_runner_cmd:
        reviewer = CommandReviewer(config.external_runner_cmd)
    elif config.external_runner == "claude":
        reviewer = ClaudeReviewer()
    else:
        reviewer = None
    return GateConfig(
        reviewer=reviewer,
        timeout=config.quality_gate_timeout,
        max_attempts=config.quality_gate_max_attempts,
    )


def log_call(
    state: ServerState, tool: str, params: dict[str, Any], stack: list[Any] | None = None
) -> None:
    """Log one tool call with the caller's stack, as it stands after the call, at DEBUG.

    The stack comes from the tool's own answer (or the last one seen), so logging costs no
    query. Not at INFO: every transition is an event already (the dashboard's live view, the
    REST API), and on a busy 2-core machine the line cost 0.3 ms of each call's 3-7 ms.
    """
    if stack is not None:
        state.last_stack = stack
    if not logger.isEnabledFor(logging.DEBUG):
        return
    logger.debug(
        "tool=%s params=%s stack=%s depth=%d",
        tool,
        params,
        [f"{entry.workflow}:{entry.step}" for entry in state.last_stack],
        len(state.last_stack),
    )
