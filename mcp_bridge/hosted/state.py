"""The state a hosted server's tools see: one per project, whose agent is the one of the
request being served."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from accounts.identity import identity_session_check
from mcp_bridge.hosted.auth import current_identity, hosted_agent, request_identity, scoped_agent_id
from mcp_bridge.hosted.config import HostedConfig
from mcp_bridge.hosted.refusals import Refused
from mcp_bridge.state import ServerConfig, ServerState
from workflows.errors import InvalidInput
from workflows.models import Agent, Project
from workflows.selectors.sessions import session_agent_id
from workflows.services.catalog import Catalog, CatalogView

# DeepWork 0.14's stack ids are at most this long (``generations.v0_14.stack_id_clean``).
MAX_CONVERSATION_ID = 100


class HostedState(ServerState):
    """A server's state for one project, whose agent is the one of the request in hand."""

    def __init__(self, config: ServerConfig, project: Project) -> None:
        super().__init__(config)
        self._hosted_project = project
        self._hosted_catalog = Catalog(project, generation=config.generation)

    def project(self) -> Project:
        return self._hosted_project

    def catalog(self) -> Catalog:
        return self._hosted_catalog

    def catalog_if_unchanged(self) -> CatalogView | None:
        # One event loop serves every request here: the folder scan stays on the threads.
        return None

    def agent(self) -> Agent:
        return current_identity().agent

    def sub_agent(self, name: str) -> Agent:
        """The agent ``name`` under the request's token, with its own stack; created on first
        use."""
        identity = current_identity()
        return hosted_agent(identity.project, self.acting_agent_id(name))

    def acting_agent_id(self, agent_id: str) -> str:
        return scoped_agent_id(current_identity(), agent_id, acting=True)

    def target_agent_id(self, agent_id: str) -> str:
        return scoped_agent_id(current_identity(), agent_id, acting=False)

    def session_check(self, session_id: str | None) -> None:
        # A session named by id is acted on as its agent: one token never moves another's.
        if session_id is None:
            return
        agent_id = session_agent_id(project=self._hosted_project, session_id=session_id)
        if agent_id is not None:
            identity_session_check(
                current_identity().who, project_id=self._hosted_project.pk, agent_id=agent_id
            )

    def conversation_scope(self) -> str:
        return f"token-{current_identity().token_id}:"

    def conversation_id(self, session_id: str) -> str:
        scope = self.conversation_scope()
        if len(scope) + len(session_id) > MAX_CONVERSATION_ID:
            raise InvalidInput(
                f"Over /mcp a session_id may be at most {MAX_CONVERSATION_ID - len(scope)} "
                f"characters (it is kept as {scope}<session_id>); got {len(session_id)}"
            )
        return scope + session_id

    def session_id_shown(self, conversation_id: str) -> str:
        return conversation_id.removeprefix(self.conversation_scope())

    def claimed_agent(self) -> Agent | None:
        # No process holds a hosted agent: it is whoever presents the token.
        return None

    def ready(self) -> bool:
        return True

    def release(self, *, dispatch: bool = False) -> None:
        pass

    @property
    def last_stack(self) -> list[Any]:
        identity = request_identity.get()
        return identity.last_stack if identity is not None else []

    @last_stack.setter
    def last_stack(self, stack: list[Any]) -> None:
        identity = request_identity.get()
        if identity is not None:
            identity.last_stack = stack


def hosted_state(project: Project, config: HostedConfig) -> HostedState:
    root = Path(project.root_path)
    if not root.is_dir():
        raise Refused(
            409,
            "project_unavailable",
            f"Project folder {project.root_path} is not on this server; its agents connect "
            "to a server where it is",
        )
    return HostedState(
        ServerConfig(
            project_root=root,
            external_runner=config.external_runner,
            external_runner_cmd=config.external_runner_cmd,
            quality_gate_timeout=config.quality_gate_timeout,
        ),
        project,
    )
