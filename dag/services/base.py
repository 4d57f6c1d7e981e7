"""What every DAG service shares: the results they answer in domain terms, the lookups of a
defined workflow and its steps, and the checks of what callers send.

One representation with DeepWork's workflows: a defined workflow is a ``Job`` (source
``defined``, its ``dir_name`` the workflow id) with one ``Workflow``, a ``Step`` per step
(role, agent, tool and arguments) and a ``WorkflowStep`` node per step whose ``depends_on``
holds the edges. Its one execution is a ``WorkflowSession`` in status ``running`` (so it sits on
no agent's stack), with one ``StepRun`` per step: ``pending`` → ``ready`` (dependencies done, no
agent yet) → ``assigned`` → ``completed`` | ``failed``. Every change is an ``Event``.

Concurrency: every change to an execution happens inside one transaction that first locks the
session row (``select_for_update``; SQLite's IMMEDIATE transactions serialise writers anyway),
and step updates compare-and-set on the step's status. So a step is handed out once, a report
lands once, and the workflow completes or fails exactly once, whatever runs at the same time.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from dag.plan import DagStep, dag_plan_stored, json_clean
from workflows import limits
from workflows.errors import InvalidInput, NotFound
from workflows.models import Job, Project, StepRun, WorkflowSession
from workflows.services.agents import agent_id_clean as _agent_id_clean

MAX_ROLES = 32
OPEN = (StepRun.Status.PENDING, StepRun.Status.READY)
# Steps people do in a multi-agent plan: this role, or an assigned id ``user:<username>``.
HUMAN_ROLE = "human"
USER_PREFIX = "user:"
RUNNING = WorkflowSession.Status.RUNNING


# --- Results, in domain terms -----------------------------------------------------------------


@dataclass(frozen=True)
class Delegation:
    step_id: str
    agent_id: str


@dataclass(frozen=True)
class StepNotPlaced:
    """A step the scheduler could not hand out on this pass, and why (the wire calls these
    the run's issues)."""

    step_id: str
    reason: str


@dataclass
class Advance:
    """What one pass of the scheduler did to an execution."""

    delegated: list[Delegation] = field(default_factory=list)
    issues: list[StepNotPlaced] = field(default_factory=list)
    handed_on: list[str] = field(default_factory=list)
    status: str = RUNNING


@dataclass(frozen=True)
class Defined:
    job: Job
    warnings: list[str]


@dataclass(frozen=True)
class Report:
    workflow_id: str
    step_id: str
    status: str
    advance: Advance
    already: bool = False
    note: str = ""


# --- Lookups ------------------------------------------------------------------------------------


def dag_job(*, project: Project, workflow_id: str) -> Job:
    """The defined workflow ``workflow_id`` of ``project``, or ``NotFound``."""
    job = Job.objects.filter(
        project=project, source=Job.Source.DEFINED, dir_name=workflow_id
    ).first()
    if job is None:
        raise NotFound(f"Unknown workflow_id {workflow_id!r}: no such workflow in this project")
    return job


@dataclass(frozen=True)
class _Shape:
    """A defined workflow's steps: immutable once defined, so read once per process."""

    steps: dict[str, DagStep]
    order: tuple[str, ...]
    dependents: dict[str, tuple[str, ...]]


@lru_cache(maxsize=256)
def dag_shape(job_id: int, workflow_id: str) -> _Shape:
    # Keyed by the random workflow id too: a row id alone may come back after a rollback.
    job = Job.objects.only("definition").get(pk=job_id, dir_name=workflow_id)
    plan = dag_plan_stored(job.definition["steps"])
    dependents: dict[str, list[str]] = {step.step_id: [] for step in plan.steps}
    for step in plan.steps:
        for dep in step.depends_on:
            dependents[dep].append(step.step_id)
    return _Shape(
        steps=plan.by_id(),
        order=tuple(step.step_id for step in plan.steps),
        dependents={key: tuple(value) for key, value in dependents.items()},
    )


def dag_status(job: Job, session: WorkflowSession | None) -> str:
    """The workflow status agents see: ``pending`` until executed, then its execution's."""
    return session.status if session is not None else "pending"


def is_human(step: DagStep) -> bool:
    """A step people do: role ``human``, or assigned to ``user:<username>``."""
    return step.assigned_role == HUMAN_ROLE or step.assigned_agent_id.startswith(USER_PREFIX)


def is_human_step(step: dict[str, Any]) -> bool:
    """``is_human`` for a step as the selectors show it (a dict of its wire fields)."""
    return step.get("assigned_role") == HUMAN_ROLE or (
        step.get("assigned_agent_id") or ""
    ).startswith(USER_PREFIX)


def result_check(value: Any) -> None:
    """A step's reported result: JSON the database can store, within the payload limit."""
    limits.check_json_size("result", value, limits.DAG_MAX_PAYLOAD_BYTES)
    json_clean(value, "result")


def error_message_check(error_message: str | None) -> str:
    """Why a step failed: said, and within the limit (refused whole, never cut short)."""
    error_message = (error_message or "").strip()
    if not error_message:
        raise InvalidInput("error_message must say what went wrong")
    limits.DAG_TEXT.check("error_message", error_message)
    return error_message


def agent_id_clean(agent_id: str) -> str:
    """A caller's agent id: 1 to 128 characters of valid text."""
    agent_id = _agent_id_clean(agent_id)
    json_clean(agent_id, "agent_id")
    return agent_id
