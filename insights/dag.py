"""Insights into multi-agent DAG workflows: how long steps waited to be handed off, and how
much work each role carries.

A DAG step becomes ready when its dependencies are done (``StepRun.ready_at``, set again when
it is taken from a lost agent) and is claimed when an agent of its role, or a person for a
``human`` step, takes it (``assigned_at``). Figures are grouped by the step's role
(``Step.assigned_role``); a step that names an agent instead of a role is counted under
``ANY_ROLE``. A fixed number of queries each, bounded by the filter's date range.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

from django.db.models import Count, F, Q, Sum, Value
from django.db.models.functions import Coalesce, NullIf

from insights.durations import exact_duration, percentiles_once
from insights.filters import Dialect, InsightFilter
from insights.percentiles import seconds
from workflows.models import Agent, Job, StepRun, WorkflowSession

# The label of steps that name no role (handed to a named agent, or to any agent).
ANY_ROLE = "(no role)"


def _dag_runs(filters: InsightFilter) -> Q:
    """Runs of DAG executions the filter allows: project, job and workflow from the session,
    agent as the one that claimed the step."""
    q = Q(session__job__source=Job.Source.DEFINED)
    if filters.project_id is not None:
        q &= Q(session__project_id=filters.project_id)
    if filters.job is not None:
        q &= Q(session__job_name=filters.job) | Q(session__job__dir_name=filters.job)
    if filters.workflow is not None:
        q &= Q(session__workflow_name=filters.workflow)
    if filters.agent_id is not None:
        q &= Q(assigned_agent__agent_id=filters.agent_id)
    return q


def _role() -> Coalesce:
    return Coalesce(NullIf(F("step_def__assigned_role"), Value("")), Value(ANY_ROLE))


@dataclass(frozen=True)
class HandoffWait:
    """One role's hand-offs in the range: how many, median and p90 seconds from ready to
    claimed, and the longest wait with the workflow it was in."""

    role: str
    handoffs: int
    median_seconds: float
    p90_seconds: float
    longest_seconds: float
    longest_workflow: str
    longest_step: str


def handoff_waits(*, filters: InsightFilter) -> list[HandoffWait]:
    """Per role, over the DAG steps claimed in the range (``assigned_at``; a person's step is
    claimed when the person reports it): median and p90 of the wait from ready to claimed,
    and the longest wait. Two queries; most hand-offs first."""
    if not filters.wants(Dialect.DAG):
        return []
    claimed = StepRun.objects.filter(
        _dag_runs(filters),
        ready_at__isnull=False,
        assigned_at__gte=filters.start,
        assigned_at__lt=filters.end,
    ).annotate(role=_role())
    wait = exact_duration("assigned_at", "ready_at")
    ranked = percentiles_once(claimed, value=wait, group="role", largest=True)
    # The run behind each role's longest wait: matched on the figure itself rather than ranked
    # by a second window over every run (SQLite sorts each window anew); the first run wins a
    # tie.
    longest_q = Q(pk__in=[])
    for role, p in ranked.items():
        longest_q |= Q(role=role, wait=p.extra["max"])
    longest: dict[str, dict[str, Any]] = {}
    for row in (
        claimed.annotate(wait=wait)
        .filter(longest_q)
        .order_by("pk")
        .values("role", "wait", "session__session_id", "step_id")
    ):
        longest.setdefault(row["role"], row)
    waits = [
        HandoffWait(
            role=role,
            handoffs=p.count,
            median_seconds=seconds(p.median) or 0.0,
            p90_seconds=seconds(p.p90) or 0.0,
            longest_seconds=seconds(longest[role]["wait"]) or 0.0,
            longest_workflow=longest[role]["session__session_id"],
            longest_step=longest[role]["step_id"],
        )
        for role, p in ranked.items()
    ]
    return sorted(waits, key=lambda w: (-w.handoffs, w.role))


@dataclass(frozen=True)
class RoleLoad:
    """One role's work: steps waiting for an agent and held by one now (running workflows),
    steps completed and failed in the range, the hours agents spent on those (claimed to
    finished), and the registered agents that take the role."""

    role: str
    waiting: int
    held: int
    completed: int
    failed: int
    busy_hours: float
    agents: int

    @property
    def open(self) -> int:
        return self.waiting + self.held


def role_load(*, filters: InsightFilter) -> list[RoleLoad]:
    """Per role: waiting and held now, completed, failed and busy hours in the range, and the
    agents with the role. Two queries; roles with the most open work first."""
    if not filters.wants(Dialect.DAG):
        return []
    running = Q(session__status=WorkflowSession.Status.RUNNING)
    # Every DAG step that ran was ready first: ``ready_at`` picks DAG runs out of all runs
    # (wf_steprun_dag_done_idx), as the open ones are (wf_steprun_dag_open_idx).
    in_range = Q(
        ready_at__isnull=False, completed_at__gte=filters.start, completed_at__lt=filters.end
    )
    done = Q(status=StepRun.Status.COMPLETED) & in_range
    failed = Q(status=StepRun.Status.FAILED) & in_range
    now_open = running & Q(status__in=[StepRun.Status.READY, StepRun.Status.ASSIGNED])
    rows = (
        StepRun.objects.filter(_dag_runs(filters))
        .filter(now_open | done | failed)
        .annotate(role=_role())
        .values("role")
        .annotate(
            waiting=Count("pk", filter=running & Q(status=StepRun.Status.READY)),
            held=Count("pk", filter=running & Q(status=StepRun.Status.ASSIGNED)),
            completed=Count("pk", filter=done),
            failed=Count("pk", filter=failed),
            busy=Sum(
                exact_duration("completed_at", "assigned_at"),
                filter=(done | failed) & Q(assigned_at__isnull=False),
            ),
        )
        .order_by()
    )
    figures = {row["role"]: row for row in rows}
    agents = Agent.objects.filter(takes_dag_steps=True)
    if filters.project_id is not None:
        agents = agents.filter(project_id=filters.project_id)
    if filters.agent_id is not None:
        agents = agents.filter(agent_id=filters.agent_id)
    takers: Counter[str] = Counter()
    for roles in agents.values_list("roles", flat=True):
        for role in set(roles or []):
            takers[role] += 1
    loads = [
        RoleLoad(
            role=role,
            waiting=row["waiting"],
            held=row["held"],
            completed=row["completed"],
            failed=row["failed"],
            busy_hours=(seconds(row["busy"]) or 0.0) / 3600,
            agents=takers.get(role, 0),
        )
        for role, row in figures.items()
    ]
    # Roles agents take that had no work in the range still show, as idle.
    loads += [
        RoleLoad(role, 0, 0, 0, 0, 0.0, n) for role, n in takers.items() if role not in figures
    ]
    return sorted(loads, key=lambda r: (-r.open, -r.completed, r.role))
