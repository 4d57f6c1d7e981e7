"""A project's DeepWork job workflows as a workflow source: a run is a session; its
start answers in DeepWork's wording, as ``start_workflow`` does, so it lives with the dialect.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from workflow_tools.selectors import DEEPWORK_SOURCE_KEY, deepwork_published, session_run_status
from workflow_tools.services import goal_with_inputs
from workflow_tools.sources import PublishedWorkflow, RunStarted, RunStatus
from workflows.dialects import deepwork
from workflows.errors import Forbidden, InvalidInput, NotFound
from workflows.models import Agent, Project, WorkflowSession
from workflows.services.catalog import CatalogView
from workflows.services.sessions import session_abort


class DeepWorkSource:
    """A project's DeepWork job workflows. A run is a session: ``start`` starts it for the
    calling agent and answers its first step exactly as ``start_workflow`` does."""

    key = DEEPWORK_SOURCE_KEY
    label = "DeepWork jobs"
    local = True
    cancel_on_timeout = True

    def __init__(
        self,
        *,
        project: Callable[[], Project],
        view: Callable[[], CatalogView],
        agent: Callable[[], Agent] | None = None,
    ) -> None:
        self._project = project
        self._view = view
        self._agent = agent
        self._lock = threading.Lock()
        self._cached: tuple[CatalogView, tuple[PublishedWorkflow, ...]] | None = None

    def workflows(self) -> Sequence[PublishedWorkflow]:
        """From the catalog as it is now (a changed job.yml is synced first); built once per
        catalog view, so an unchanged catalog costs a directory listing and no query."""
        view = self._view()
        with self._lock:
            cached = self._cached
        if cached is not None and cached[0] is view:
            return cached[1]
        published = deepwork_published(view=view)
        with self._lock:
            self._cached = (view, published)
        return published

    def refresh(self, *, force: bool) -> None:
        """Nothing to fetch: ``workflows`` reads the catalog every time."""

    def start(
        self, *, workflow: PublishedWorkflow, arguments: Mapping[str, Any], agent_id: str
    ) -> RunStarted:
        job_name = str(workflow.metadata["job"])
        workflow_name = str(workflow.metadata["workflow"])
        inputs = {k: v for k, v in arguments.items() if k not in ("goal", "instance_id")}
        agent_args: dict[str, Any] = (
            {"agent": self._agent()} if self._agent is not None else {"agent_id": agent_id}
        )
        answer = deepwork.start_workflow(
            project=self._project(),
            catalog=self._view(),
            job_name=job_name,
            workflow_name=workflow_name,
            goal=goal_with_inputs(str(arguments.get("goal", "")), inputs),
            instance_id=arguments.get("instance_id"),
            **agent_args,
        )
        return RunStarted(
            run_id=answer.begin_step.session_id,
            workflow_id=workflow.id,
            status="RUNNING",
            result=answer,
            answer=answer.model_dump(mode="json"),
        )

    def status(self, *, run_id: str) -> RunStatus:
        return session_run_status(project=self._project(), session_id=run_id)

    def cancel(self, *, run_id: str, reason: str, by: Any = None, via: str = "") -> RunStatus:
        """Abort the session (as its own agent would, or as the person ``by``, through
        ``via``)."""
        project = self._project()
        if not reason.strip():
            raise InvalidInput("A reason is required to cancel a run")
        session = (
            WorkflowSession.objects.filter(project=project, session_id=run_id)
            .select_related("agent")
            .first()
        )
        if session is None:
            raise NotFound(f"Unknown run id '{run_id}': no workflow run of this project has it")
        if by is None and self._agent is not None:
            # An agent cancels only its own runs, as abort_workflow aborts only its own
            # session: another agent's work is a person's to stop.
            caller = self._agent()
            if session.agent_id != caller.pk:
                held = session.agent.agent_id if session.agent is not None else "(none)"
                raise Forbidden(
                    f"Run '{run_id}' is agent {held[:120]!r}'s; agent "
                    f"{caller.agent_id[:120]!r} may cancel only its own runs (a person can "
                    "abort it on the dashboard)"
                )
        session_abort(
            project=project,
            agent=session.agent,
            explanation=reason,
            session_id=run_id,
            by=by,
            via=via,
        )
        return session_run_status(project=project, session_id=run_id)
