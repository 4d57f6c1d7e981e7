"""A project's defined multi-agent DAG workflows as a workflow source:
each workflow not executed yet is published, and its tool executes it as ``execute_workflow``
does, with the calling agent as the triggering agent.

A run is the workflow's one execution, so its run id is the workflow id (served as
``dag:<workflow id>``). Its execution type is the one given at definition (``define_workflow``'s
``execution_type``), ``async`` by default: other agents do the steps, which may take long. A
``sync`` run outliving the caller's wait keeps running (``cancel_on_timeout`` is false):
failing a plan that other agents are working on because one caller stopped waiting would throw
their work away. Cancelling fails the execution with the reason; it cannot be resumed.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from dag.plan import DAG_SOURCE_KEY
from dag.selectors import dag_published, dag_run_status
from dag.services import dag_cancel, dag_execute
from workflow_tools.sources import (
    MAX_DESCRIPTION_CHARS,
    PublishedWorkflow,
    RunStarted,
    RunState,
    RunStatus,
)
from workflows.models import Agent, Project

if TYPE_CHECKING:
    from django.contrib.auth.models import User

__all__ = ["DAG_SOURCE_KEY", "DagSource"]

DAG_CATEGORY = "dag"

_STARTED: dict[str, RunState] = {"running": "RUNNING", "completed": "COMPLETED", "failed": "FAILED"}


def _published(row: Mapping[str, Any]) -> PublishedWorkflow:
    steps = row["step_count"]
    text = row["description"] or row["name"]
    about = (
        f" (a multi-agent workflow of {steps} step{'' if steps == 1 else 's'} defined by "
        f"{row['creator_id']})"
    )
    return PublishedWorkflow(
        id=row["workflow_id"],
        name=row["name"],
        description=text[: MAX_DESCRIPTION_CHARS - len(about)] + about,
        category=DAG_CATEGORY,
        version=row["version"],
        input_schema=row["input_schema"],
        execution_type="sync" if row["execution_type"] == "sync" else "async",
        metadata={"kind": "dag", "creator_id": row["creator_id"], "step_count": steps},
    )


class DagSource:
    """The project's defined DAG workflows that have not run yet. ``agent`` is the calling
    server's agent: the default triggering agent, and who cancels. ``acting`` says what an
    agent id the caller names itself by stands for (its identity's rule; as given when
    None), so a ``triggering_agent_id`` argument claims no one else. ``person``: the person
    the caller acts for, whose permission (the caller's check) lets them execute any
    workflow."""

    key = DAG_SOURCE_KEY
    label = "multi-agent DAG workflows"
    local = True
    cancel_on_timeout = False

    def __init__(
        self,
        *,
        project: Callable[[], Project],
        agent: Callable[[], Agent] | None = None,
        acting: Callable[[str], str] | None = None,
        person: User | None = None,
    ) -> None:
        self._project = project
        self._agent = agent
        self._acting = acting
        self._person = person
        self._lock = threading.Lock()
        self._cached: tuple[PublishedWorkflow, ...] = ()

    def workflows(self) -> Sequence[PublishedWorkflow]:
        """As the database has them now (one query). An unchanged list is answered as the
        same object, which tells the provider nothing changed."""
        found = tuple(_published(row) for row in dag_published(project=self._project()))
        with self._lock:
            if found != self._cached:
                self._cached = found
            return self._cached

    def refresh(self, *, force: bool) -> None:
        """Nothing to fetch: ``workflows`` reads the database every time."""

    def start(
        self, *, workflow: PublishedWorkflow, arguments: Mapping[str, Any], agent_id: str
    ) -> RunStarted:
        named = arguments.get("triggering_agent_id")
        if named and self._acting is not None:
            named = self._acting(str(named))
        advance = dag_execute(
            project=self._project(),
            workflow_id=workflow.id,
            triggering_agent_id=str(named or agent_id),
            by=self._person,
        )
        return RunStarted(
            run_id=workflow.id,
            workflow_id=workflow.id,
            status=_STARTED.get(advance.status, "RUNNING"),
            result={
                "delegated": [
                    {"step_id": d.step_id, "agent_id": d.agent_id} for d in advance.delegated
                ],
                "issues": [{"step_id": i.step_id, "reason": i.reason} for i in advance.issues],
            },
        )

    def status(self, *, run_id: str) -> RunStatus:
        return RunStatus(**dag_run_status(project=self._project(), workflow_id=run_id))

    def cancel(self, *, run_id: str, reason: str, by: Any = None, via: str = "") -> RunStatus:
        """Fail the execution with ``reason``, as this server's agent (or the person ``by``,
        through ``via``)."""
        project = self._project()
        agent_id = self._agent().agent_id if self._agent is not None and by is None else None
        dag_cancel(
            project=project, workflow_id=run_id, reason=reason, agent_id=agent_id, by=by, via=via
        )
        return RunStatus(**dag_run_status(project=project, workflow_id=run_id))
