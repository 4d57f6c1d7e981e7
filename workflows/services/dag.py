"""Multi-agent DAG workflows: define, execute, hand steps to agents, report, delete.

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

Why one long module: definitions, the scheduler, reports and deletion share the locked
session row and its compare-and-set rules; it is to become the ``dag`` app's
``services/{definitions,scheduler,reports}.py`` when that app is split off.
"""

from __future__ import annotations

import hashlib
import json
import logging
import secrets
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from django.db import IntegrityError, transaction
from django.db.models import Count, F, Max, Q
from django.utils import timezone

from workflows import events, limits
from workflows.dag import (
    DAG_SOURCE_KEY,
    DagPlan,
    DagStep,
    dag_check_size,
    dag_description,
    dag_execution_type,
    dag_name,
    dag_plan,
    dag_plan_stored,
    json_clean,
    responsive_q,
    responsive_seconds,
    same_identity,
    unresponsive_q,
)
from workflows.errors import Conflict, Forbidden, InvalidInput, NotFound
from workflows.models import (
    Agent,
    Event,
    Job,
    Project,
    Step,
    StepRun,
    Workflow,
    WorkflowSession,
    WorkflowStep,
)
from workflows.services.agents import (
    ProcessHolder,
    agent_ensure,
    agent_heartbeat,
    agent_release,
)
from workflows.services.agents import agent_id_clean as _agent_id_clean
from workflows.services.workflow_tools import workflow_key, workflow_tool_name_release

if TYPE_CHECKING:
    from django.contrib.auth.models import User

logger = logging.getLogger(__name__)

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
class Issue:
    step_id: str
    reason: str


@dataclass
class Advance:
    """What one pass of the scheduler did to an execution."""

    delegated: list[Delegation] = field(default_factory=list)
    issues: list[Issue] = field(default_factory=list)
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
def _shape(job_id: int, workflow_id: str) -> _Shape:
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


# --- Define and delete --------------------------------------------------------------------------


def _warnings(*, project: Project, plan: DagPlan) -> list[str]:
    """Roles no registered agent has and agent ids not registered: fine now, told anyway."""
    agents = dict(_registered(project))
    known_roles = {role for roles in agents.values() for role in roles}
    warnings = []
    for step in plan.steps:
        if is_human(step):
            continue
        if step.assigned_agent_id and step.assigned_agent_id not in agents:
            warnings.append(
                f"Step {step.step_id!r}: agent {step.assigned_agent_id!r} is not registered yet; "
                "the step waits for it"
            )
        role = step.assigned_role
        if role and not step.assigned_agent_id and role not in known_roles:
            warnings.append(
                f"Step {step.step_id!r}: no registered agent has the role "
                f"{step.assigned_role!r} yet; the step waits for one"
            )
    return warnings


def _registered(project: Project) -> list[tuple[str, list[str]]]:
    return list(
        Agent.objects.filter(project=project, takes_dag_steps=True).values_list("agent_id", "roles")
    )


def dag_define(
    *,
    project: Project,
    creator_id: str,
    name: str,
    description: str | None,
    steps: Any,
    execution_type: str | None = None,
) -> Defined:
    """Store a new workflow after checking it (nothing is stored if any rule is broken).

    ``execution_type`` (``async`` unless given) says how its tool in the workflow-tools toolset
    runs it: ``sync`` waits for the result, ``async`` answers a run id at once.

    The size limits are checked first, by counting, outside any transaction: a definition
    too big is refused before its steps are parsed, its cycles looked for or a row written."""
    creator_id = agent_id_clean(creator_id)
    name = dag_name(name)
    text = dag_description(description)
    dag_check_size(name=name, description=text, steps=steps)
    plan = dag_plan(steps)
    execution = dag_execution_type(execution_type)
    definition = {
        "name": name,
        "description": text,
        "creator_id": creator_id,
        "execution_type": execution,
        "steps": [
            {
                "step_id": s.step_id,
                "description": s.description,
                "assigned_role": s.assigned_role or None,
                "assigned_agent_id": s.assigned_agent_id or None,
                "depends_on": list(s.depends_on),
                "tool_to_call": s.tool_to_call or None,
                "tool_arguments": s.tool_arguments,
            }
            for s in plan.steps
        ],
    }
    try:
        encoded = json.dumps(definition, sort_keys=True)
    except (TypeError, ValueError) as exc:
        raise InvalidInput(f"tool_arguments must be JSON: {exc}") from None
    warnings = _warnings(project=project, plan=plan)
    for _ in range(5):
        workflow_id = f"dag-{secrets.token_hex(6)}"
        try:
            with transaction.atomic():
                job = _store(
                    project=project,
                    workflow_id=workflow_id,
                    definition=definition,
                    content_hash=hashlib.sha256(encoded.encode()).hexdigest(),
                    plan=plan,
                )
        except IntegrityError:
            continue
        return Defined(job=job, warnings=warnings)
    raise RuntimeError("could not allocate a unique workflow id")


def _store(
    *,
    project: Project,
    workflow_id: str,
    definition: dict[str, Any],
    content_hash: str,
    plan: DagPlan,
) -> Job:
    name, text = definition["name"], definition["description"]
    job = Job.objects.create(
        project=project,
        source=Job.Source.DEFINED,
        dir_name=workflow_id,
        job_dir=f"defined:{workflow_id}",
        name=name,
        version="1",
        summary=(text or name)[:255],
        common_info=text,
        definition=definition,
        content_hash=content_hash,
        file_mtime_ns=0,
        file_size=0,
        is_current=False,
        creator_id=definition["creator_id"],
    )
    workflow = Workflow.objects.create(job=job, name=name, summary=(text or name)[:255])
    steps = Step.objects.bulk_create(
        [
            Step(
                job=job,
                step_id=s.step_id,
                name=s.step_id,
                description=s.description,
                instructions_file="",
                position=position,
                assigned_role=s.assigned_role,
                assigned_agent_id=s.assigned_agent_id,
                tool_to_call=s.tool_to_call,
                tool_arguments=s.tool_arguments,
            )
            for position, s in enumerate(plan.steps)
        ]
    )
    per_level: dict[int, int] = {}
    for s in plan.steps:
        per_level[s.level] = per_level.get(s.level, 0) + 1
    seen: dict[int, int] = {}
    nodes = []
    for step, s in zip(steps, plan.steps, strict=True):
        nodes.append(
            WorkflowStep(
                workflow=workflow,
                step=step,
                entry_index=s.level,
                position_in_entry=seen.get(s.level, 0),
                is_concurrent=per_level[s.level] > 1,
            )
        )
        seen[s.level] = seen.get(s.level, 0) + 1
    nodes = WorkflowStep.objects.bulk_create(nodes)
    node_of = {s.step_id: node.pk for node, s in zip(nodes, plan.steps, strict=True)}
    through = WorkflowStep.depends_on.through
    through.objects.bulk_create(
        [
            through(from_workflowstep_id=node_of[s.step_id], to_workflowstep_id=node_of[dep])
            for s in plan.steps
            for dep in s.depends_on
        ]
    )
    events.event_record(
        kind=Event.Kind.DAG_DEFINED,
        project=project,
        payload=events.DagDefined(
            workflow_id=workflow_id,
            name=name,
            creator_id=definition["creator_id"],
            steps=len(plan.steps),
        ),
    )
    return job


def dag_status(job: Job, session: WorkflowSession | None) -> str:
    """The workflow status agents see: ``pending`` until executed, then its execution's."""
    return session.status if session is not None else "pending"


def dag_delete(
    *, project: Project, workflow_id: str, requesting_agent_id: str, force: bool = False
) -> str:
    """Delete a workflow and its execution; only its creator may, and a running one only with
    ``force``. Returns the status it had."""
    requesting_agent_id = agent_id_clean(requesting_agent_id)
    with transaction.atomic():
        job = dag_job(project=project, workflow_id=workflow_id)
        job = Job.objects.select_for_update().get(pk=job.pk)
        if job.creator_id != requesting_agent_id:
            raise Forbidden(
                f"Only the workflow's creator ({job.creator_id!r}) may delete workflow "
                f"{workflow_id!r}; {requesting_agent_id!r} may not"
            )
        session = WorkflowSession.objects.select_for_update().filter(job=job).first()
        status = dag_status(job, session)
        if status == RUNNING and not force:
            raise Conflict(
                f"Workflow {workflow_id!r} is running; delete it with force=true to stop it "
                "(its agents' reports will then be refused)"
            )
        if session is not None:
            # Its runs and events go with it; the deletion event below keeps the record.
            session.delete()
        job.delete()
        workflow_tool_name_release(project=project, key=workflow_key(DAG_SOURCE_KEY, workflow_id))
        events.event_record(
            kind=Event.Kind.DAG_DELETED,
            project=project,
            payload=events.DagDeleted(
                workflow_id=workflow_id,
                name=job.name,
                requesting_agent_id=requesting_agent_id,
                status=status,
            ),
        )
    _shape.cache_clear()
    return status


# --- Execute and the scheduler ------------------------------------------------------------------


def dag_execute(
    *, project: Project, workflow_id: str, triggering_agent_id: str, by: User | None = None
) -> Advance:
    """Start the workflow's one execution and hand out the steps that can start. Only its
    creator or the creator's sub-agents may, or a person (``by``; holding the permission is
    the caller's check): anyone else would run another's plan, steps and tool calls."""
    triggering_agent_id = agent_id_clean(triggering_agent_id)
    with transaction.atomic():
        job = dag_job(project=project, workflow_id=workflow_id)
        if by is None and not same_identity(job.creator_id, triggering_agent_id):
            raise Forbidden(
                f"Only the workflow's creator ({job.creator_id!r}), its sub-agents "
                f"({job.creator_id}/<name>) or a person with the permission may execute "
                f"workflow {workflow_id!r}; {triggering_agent_id!r} may not"
            )
        # Two executes of one workflow: the second waits here, then finds the session.
        job = Job.objects.select_for_update().get(pk=job.pk)
        existing = WorkflowSession.objects.filter(job=job).values_list("status", flat=True).first()
        if existing is not None:
            raise Conflict(
                f"Workflow {workflow_id!r} is already {existing}; a workflow runs once "
                "(define it again to run it again)"
            )
        agent = agent_ensure(project=project, agent_id=triggering_agent_id)
        # It runs once: its workflow tool is gone for good, and its name free for another.
        workflow_tool_name_release(project=project, key=workflow_key(DAG_SOURCE_KEY, workflow_id))
        workflow = Workflow.objects.get(job=job)
        shape = _shape(job.pk, job.dir_name)
        session = WorkflowSession.objects.create(
            session_id=workflow_id,
            project=project,
            agent=agent,
            job=job,
            workflow=workflow,
            job_name=job.name,
            workflow_name=workflow.name,
            goal=job.common_info or job.name,
            status=RUNNING,
            current_step_id="",
        )
        step_pks = dict(Step.objects.filter(job=job).values_list("step_id", "pk"))
        StepRun.objects.bulk_create(
            [
                StepRun(
                    session=session,
                    step_def_id=step_pks[step_id],
                    step_id=step_id,
                    entry_index=shape.steps[step_id].level,
                    status=StepRun.Status.PENDING,
                )
                for step_id in shape.order
            ]
        )
        events.event_record(
            kind=Event.Kind.SESSION_STARTED,
            project=project,
            session=session,
            agent=agent,
            payload=events.SessionStarted(
                job=job.name, workflow=workflow.name, goal=session.goal, parent=None
            ),
        )
        return _advance(session)


def _agents_for(project_id: int, now: datetime) -> list[dict[str, Any]]:
    """Responsive agents with their load (steps held) and when they last finished one."""
    assigned = Q(
        dag_runs__status=StepRun.Status.ASSIGNED,
        dag_runs__session__status=WorkflowSession.Status.RUNNING,
    )
    rows = (
        Agent.objects.filter(responsive_q(now), project_id=project_id, takes_dag_steps=True)
        .annotate(load=Count("dag_runs", filter=assigned), last_done=Max("dag_runs__completed_at"))
        .values("pk", "agent_id", "roles", "load", "last_done", "created_at")
    )
    return list(rows)


def is_human(step: DagStep) -> bool:
    """A step people do: role ``human``, or assigned to ``user:<username>``."""
    return step.assigned_role == HUMAN_ROLE or step.assigned_agent_id.startswith(USER_PREFIX)


def is_human_step(step: dict[str, Any]) -> bool:
    """``is_human`` for a step as the selectors show it (a dict of its wire fields)."""
    return step.get("assigned_role") == HUMAN_ROLE or (
        step.get("assigned_agent_id") or ""
    ).startswith(USER_PREFIX)


def _choose(step: DagStep, agents: list[dict[str, Any]], registered: set[str]) -> Any:
    """The agent for ``step``, or the reason there is none."""
    if is_human(step):
        who = step.assigned_agent_id.removeprefix(USER_PREFIX) or "a person"
        return f"waiting for {who} to complete it (dashboard or REST API)"
    if step.assigned_agent_id:
        for agent in agents:
            if agent["agent_id"] == step.assigned_agent_id:
                return agent
        if step.assigned_agent_id in registered:
            return f"agent {step.assigned_agent_id!r} is not responsive (no recent heartbeat)"
        return f"agent {step.assigned_agent_id!r} is not registered"
    fit = [a for a in agents if not step.assigned_role or step.assigned_role in (a["roles"] or [])]
    if not fit:
        if step.assigned_role:
            return f"no responsive agent has the role {step.assigned_role!r}"
        return "no responsive agent"

    # Fewest steps held, then idle longest (never worked counts as idle since registering),
    # then the agent id: the same state always picks the same agent.
    def key(agent: dict[str, Any]) -> tuple[int, datetime, str]:
        return (agent["load"], agent["last_done"] or agent["created_at"], agent["agent_id"])

    return min(fit, key=key)


def _advance(
    session: WorkflowSession, *, sweep_lost: bool = False, released: str | None = None
) -> Advance:
    """One pass of the scheduler over a locked, running execution (inside its transaction).

    After a completion (``released``, the step just completed) only that step's dependents,
    their dependencies and the steps already waiting for an agent are read, not every run.
    """
    result = Advance(status=session.status)
    if session.status != RUNNING:
        return result
    now = timezone.now()
    shape = _shape(session.job_id, session.session_id)
    partial = released is not None and not sweep_lost
    runs_query = StepRun.objects.filter(session=session)
    if partial:
        assert released is not None
        # The last step to complete is always one nothing depends on.
        last = not shape.dependents[released]
        if last and not runs_query.exclude(status=StepRun.Status.COMPLETED).exists():
            _finish(session, now)
            result.status = session.status
            return result
        candidates = set(shape.dependents[released])
        wanted = candidates | {dep for c in candidates for dep in shape.steps[c].depends_on}
        runs_query = runs_query.filter(Q(step_id__in=wanted) | Q(status=StepRun.Status.READY))
    runs: dict[str, tuple[int, str, int | None]] = {
        step_id: (pk, status, agent_pk)
        for pk, step_id, status, agent_pk in runs_query.values_list(
            "pk", "step_id", "status", "assigned_agent_id"
        )
    }
    agents: list[dict[str, Any]] | None = None
    if sweep_lost:
        held = {pk for pk, status, _ in runs.values() if status == StepRun.Status.ASSIGNED}
        lost = list(
            StepRun.objects.filter(pk__in=held)
            .filter(Q(assigned_agent__isnull=True) | unresponsive_q(now, "assigned_agent__"))
            .order_by("pk")
            .values_list(
                "pk", "step_id", "assigned_agent__agent_id", "assigned_agent__heartbeat_at"
            )
        )
        for pk, step_id, agent_id, heartbeat in lost:
            if StepRun.objects.filter(pk=pk, status=StepRun.Status.ASSIGNED).update(
                status=StepRun.Status.READY, assigned_agent=None, assigned_at=None, ready_at=now
            ):
                StepRun.objects.filter(pk=pk).update(handoffs=F("handoffs") + 1)
                runs[step_id] = (pk, StepRun.Status.READY, None)
                result.handed_on.append(step_id)
                events.event_record(
                    kind=Event.Kind.DAG_STEP_HANDED_ON,
                    project=session.project,
                    session=session,
                    payload=events.DagStepHandedOn(
                        workflow_id=session.session_id,
                        step_id=step_id,
                        from_agent_id=agent_id or "",
                        last_heartbeat=heartbeat.isoformat() if heartbeat else None,
                    ),
                )
    done = {step_id for step_id, (_, status, _) in runs.items() if status == "completed"}
    if not partial and len(done) == len(runs):
        _finish(session, now)
        result.status = session.status
        return result
    became_ready = [
        step_id
        for step_id in shape.order
        if step_id in runs
        and runs[step_id][1] == StepRun.Status.PENDING
        and all(dep in done for dep in shape.steps[step_id].depends_on)
    ]
    if became_ready:
        StepRun.objects.filter(
            pk__in=[runs[s][0] for s in became_ready], status=StepRun.Status.PENDING
        ).update(status=StepRun.Status.READY, ready_at=now)
        for step_id in became_ready:
            runs[step_id] = (runs[step_id][0], StepRun.Status.READY, None)
    ready = [s for s in shape.order if s in runs and runs[s][1] == StepRun.Status.READY]
    if not ready:
        return result
    agents = _agents_for(session.project_id, now)
    registered = {agent["agent_id"] for agent in agents} | (
        set(
            Agent.objects.filter(
                project_id=session.project_id,
                takes_dag_steps=True,
                agent_id__in={shape.steps[s].assigned_agent_id for s in ready} - {""},
            ).values_list("agent_id", flat=True)
        )
    )
    assigned: list[events.DagStepAssigned] = []
    for step_id in ready:
        choice = _choose(shape.steps[step_id], agents, registered)
        if isinstance(choice, str):
            result.issues.append(Issue(step_id, choice))
            continue
        if StepRun.objects.filter(pk=runs[step_id][0], status=StepRun.Status.READY).update(
            status=StepRun.Status.ASSIGNED, assigned_agent_id=choice["pk"], assigned_at=now
        ):
            choice["load"] += 1
            result.delegated.append(Delegation(step_id, choice["agent_id"]))
            assigned.append(
                events.DagStepAssigned(
                    workflow_id=session.session_id, step_id=step_id, agent_id=choice["agent_id"]
                )
            )
    events.event_record_many(
        kind=Event.Kind.DAG_STEP_ASSIGNED,
        project=session.project,
        session=session,
        payloads=assigned,
    )
    return result


def _finish(session: WorkflowSession, now: datetime) -> None:
    if WorkflowSession.objects.filter(pk=session.pk, status=RUNNING).update(
        status=WorkflowSession.Status.COMPLETED, completed_at=now, updated_at=now
    ):
        session.status = WorkflowSession.Status.COMPLETED
        session.completed_at = now
        events.event_record(
            kind=Event.Kind.SESSION_COMPLETED,
            project=session.project,
            session=session,
            payload=events.SessionCompleted(workflow=session.workflow_name),
        )


def _locked_session(*, project: Project, workflow_id: str) -> WorkflowSession:
    job = dag_job(project=project, workflow_id=workflow_id)
    session = (
        WorkflowSession.objects.select_for_update()
        .select_related("project")
        .filter(job=job)
        .first()
    )
    if session is None:
        raise Conflict(f"Workflow {workflow_id!r} has not been executed yet; nothing to report on")
    return session


def _reported_run(session: WorkflowSession, step_id: str) -> StepRun:
    run = (
        StepRun.objects.select_related("assigned_agent")
        .filter(session=session, step_id=step_id)
        .first()
    )
    if run is None:
        raise NotFound(f"Workflow {session.session_id!r} has no step {step_id!r}")
    return run


def _no_change(session: WorkflowSession, run: StepRun, agent_id: str) -> Report | None:
    """The answer to a report that must change nothing, or None if it may go ahead.

    A repeated report on a finished step is a no-op that says so; a report from anyone but the
    step's agent is refused, naming the rule; a report on a workflow that already failed (or
    was stopped) is a no-op too, since fail-fast means nothing moves after a failure.
    """
    workflow_id = session.session_id
    holder = run.assigned_agent.agent_id if run.assigned_agent else None
    if run.status in (StepRun.Status.COMPLETED, StepRun.Status.FAILED) and holder == agent_id:
        return Report(
            workflow_id,
            run.step_id,
            session.status,
            Advance(status=session.status),
            already=True,
            note=f"Step {run.step_id!r} was already reported {run.status}; nothing changed",
        )
    if run.status in OPEN:
        raise Conflict(
            f"Step {run.step_id!r} of workflow {workflow_id!r} is not assigned to any agent "
            f"(it is {run.status}); only its assigned agent may report on it"
        )
    if holder != agent_id:
        raise InvalidInput(
            f"Only the agent assigned to step {run.step_id!r} ({holder!r}) may report on it; "
            f"{agent_id!r} is not that agent"
        )
    if session.status != RUNNING:
        return Report(
            workflow_id,
            run.step_id,
            session.status,
            Advance(status=session.status),
            already=True,
            note=f"Workflow {workflow_id!r} is {session.status}; this report changed nothing",
        )
    return None


def dag_report_completion(
    *, project: Project, workflow_id: str, step_id: str, agent_id: str, result: Any = None
) -> Report:
    """The assigned agent finished its step: store the result, then hand out what follows."""
    agent_id = agent_id_clean(agent_id)
    _check_json(result)
    with transaction.atomic():
        session = _locked_session(project=project, workflow_id=workflow_id)
        run = _reported_run(session, step_id)
        refused = _no_change(session, run, agent_id)
        if refused is not None:
            return refused
        updated = StepRun.objects.filter(pk=run.pk, status=StepRun.Status.ASSIGNED).update(
            status=StepRun.Status.COMPLETED, result=result, completed_at=timezone.now()
        )
        # The session lock serialises every change to this execution.
        assert updated
        events.event_record(
            kind=Event.Kind.DAG_STEP_COMPLETED,
            project=project,
            session=session,
            agent=run.assigned_agent,
            payload=events.DagStepCompleted(
                workflow_id=workflow_id, step_id=step_id, agent_id=agent_id
            ),
        )
        advance = _advance(session, released=step_id)
    return Report(workflow_id, step_id, advance.status, advance)


def dag_report_failure(
    *, project: Project, workflow_id: str, step_id: str, agent_id: str, error_message: str
) -> Report:
    """The assigned agent could not do its step: the step and the workflow fail (fail-fast)."""
    agent_id = agent_id_clean(agent_id)
    error_message = _error_message(error_message)
    with transaction.atomic():
        session = _locked_session(project=project, workflow_id=workflow_id)
        run = _reported_run(session, step_id)
        refused = _no_change(session, run, agent_id)
        if refused is not None:
            return refused
        now = timezone.now()
        updated = StepRun.objects.filter(pk=run.pk, status=StepRun.Status.ASSIGNED).update(
            status=StepRun.Status.FAILED, error_message=error_message, completed_at=now
        )
        assert updated
        WorkflowSession.objects.filter(pk=session.pk, status=RUNNING).update(
            status=WorkflowSession.Status.FAILED,
            completed_at=now,
            updated_at=now,
            abort_reason=f"Step {step_id!r} failed: {error_message}",
        )
        _record_step_failure(
            project=project,
            session=session,
            workflow_id=workflow_id,
            step_id=step_id,
            failed_by=agent_id,
            error_message=error_message,
            agent=run.assigned_agent,
        )
    return Report(workflow_id, step_id, WorkflowSession.Status.FAILED, Advance(status="failed"))


def _record_step_failure(
    *,
    project: Project,
    session: WorkflowSession,
    workflow_id: str,
    step_id: str,
    failed_by: str,
    error_message: str,
    agent: Agent | None = None,
    by: User | None = None,
) -> None:
    """A failed step fails its workflow: both events, in the caller's transaction."""
    events.event_record(
        kind=Event.Kind.DAG_STEP_FAILED,
        project=project,
        session=session,
        agent=agent,
        by=by,
        payload=events.DagStepFailed(
            workflow_id=workflow_id,
            step_id=step_id,
            agent_id=failed_by,
            error_message=error_message,
        ),
    )
    events.event_record(
        kind=Event.Kind.SESSION_FAILED,
        project=project,
        session=session,
        by=by,
        payload=events.SessionFailed(
            workflow=session.workflow_name, step_id=step_id, error_message=error_message
        ),
    )


def dag_cancel(
    *,
    project: Project,
    workflow_id: str,
    reason: str,
    agent_id: str | None = None,
    by: User | None = None,
) -> str:
    """Stop a running execution for good: it fails with ``reason`` (a DAG workflow runs once,
    so it cannot be resumed). Its creator, the creator's sub-agents or the agent that
    executed it may, or a person (``by``; holding a permission is the caller's check).
    Returns the reason stored.

    No step fails: a failed execution without a failed step is how a cancelled one is told
    apart. Steps still held are left as they are; their agents' reports change nothing.
    """
    reason = (reason or "").strip()
    if not reason:
        raise InvalidInput("A reason is required to cancel a run")
    json_clean(reason, "reason")
    if by is None:
        if agent_id is None:
            raise InvalidInput("An agent or a person must cancel the run")
        agent_id = agent_id_clean(agent_id)
    who = f"{USER_PREFIX}{by.get_username()}" if by is not None else agent_id
    with transaction.atomic():
        job = dag_job(project=project, workflow_id=workflow_id)
        # The session row alone is locked: its agent's row is its heartbeat's.
        session = WorkflowSession.objects.select_for_update().filter(job=job).first()
        if session is None:
            raise Conflict(f"Workflow {workflow_id!r} has not been executed yet; no run to cancel")
        trigger = Agent.objects.filter(pk=session.agent_id).values_list("agent_id", flat=True).get()
        allowed = agent_id is not None and (
            same_identity(job.creator_id, agent_id) or agent_id == trigger
        )
        if by is None and not allowed:
            raise Forbidden(
                f"Only the workflow's creator ({job.creator_id!r}), its sub-agents "
                f"({job.creator_id}/<name>), the agent that executed it ({trigger!r}) or a "
                f"person with the permission may cancel its run; {agent_id!r} may not"
            )
        if session.status != RUNNING:
            raise Conflict(
                f"Workflow {workflow_id!r} is already {session.status}; nothing to cancel"
            )
        stored = f"Cancelled by {who}: {reason}"[:20_000]
        now = timezone.now()
        WorkflowSession.objects.filter(pk=session.pk, status=RUNNING).update(
            status=WorkflowSession.Status.FAILED,
            completed_at=now,
            updated_at=now,
            abort_reason=stored,
        )
        events.event_record(
            kind=Event.Kind.SESSION_FAILED,
            project=project,
            session=session,
            agent=(
                Agent.objects.filter(project=project, agent_id=agent_id).first()
                if by is None
                else None
            ),
            by=by,
            payload=events.SessionFailed(
                workflow=session.workflow_name, step_id="", error_message=stored
            ),
        )
    return stored


def _check_json(value: Any) -> None:
    """A step's reported result: JSON the database can store, within the payload limit."""
    limits.check_json_size("result", value, limits.DAG_MAX_PAYLOAD_BYTES)
    json_clean(value, "result")


def _error_message(error_message: str | None) -> str:
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


# --- Dispatch: retry waiting steps, hand on steps of lost agents --------------------------------


def dag_dispatch(*, project: Project) -> list[Advance]:
    """Retry every waiting step of the project's running executions, and hand on the steps
    held by agents that are no longer responsive (left, or their lease ran out). Each execution
    in its own transaction.

    Called when an agent registers, heartbeats, leaves, finishes a step or waits for work.
    """
    now = timezone.now()
    open_runs = StepRun.objects.filter(session__project=project, session__status=RUNNING).filter(
        Q(status=StepRun.Status.READY)
        | Q(status=StepRun.Status.ASSIGNED)
        & (Q(assigned_agent__isnull=True) | unresponsive_q(now, "assigned_agent__"))
    )
    session_pks = sorted(set(open_runs.values_list("session_id", flat=True)))
    outcomes = []
    for pk in session_pks:
        with transaction.atomic():
            session = (
                WorkflowSession.objects.select_for_update()
                .select_related("project")
                .filter(pk=pk)
                .first()
            )
            if session is None:
                continue
            outcomes.append(_advance(session, sweep_lost=True))
    return outcomes


# --- Agents: register, heartbeat ----------------------------------------------------------------


def _roles(roles: Iterable[Any]) -> list[str]:
    clean: list[str] = []
    json_clean(list(roles), "roles")
    for role in roles:
        if not isinstance(role, str) or not role.strip() or len(role.strip()) > 128:
            raise InvalidInput("roles must be a list of role names of 1 to 128 characters")
        limits.ROLE.check("role", role.strip())
        if role.strip() not in clean:
            clean.append(role.strip())
    if len(clean) > MAX_ROLES:
        raise InvalidInput(f"roles holds {len(clean)} roles; at most {MAX_ROLES} are allowed")
    return clean


def dag_agent_renew(
    *, agent: Agent, lease_seconds: float, holder: ProcessHolder | None = None
) -> Agent | None:
    """``agent_heartbeat``, then, for an agent that takes DAG steps, hand out the steps that
    may fit it now and hand on those of agents whose lease ran out."""
    renewed = agent_heartbeat(agent=agent, lease_seconds=lease_seconds, holder=holder)
    if renewed is not None and renewed.takes_dag_steps:
        dag_dispatch(project=renewed.project)
    return renewed


def dag_agent_leave(*, agent: Agent, holder: ProcessHolder) -> bool:
    """``agent_release`` on a clean exit, then hand the DAG steps it held on at once."""
    released = agent_release(agent=agent, holder=holder)
    if released:
        dag_dispatch(project=Project.objects.get(pk=agent.project_id))
    return released


def dag_agent_register(
    *,
    project: Project,
    agent_id: str,
    roles: Sequence[Any] | None,
    lease_seconds: float | None = None,
    dispatch: bool = False,
) -> Agent:
    """Register ``agent_id`` (new or known) for DAG steps, renewing its lease for
    ``lease_seconds`` (by default ``responsive_seconds``, the lease of an agent renewed only by
    its calls): with exactly ``roles``, or keeping the roles it has when ``roles`` is None.
    With ``dispatch``, the steps waiting for it are handed out right after.

    Only registered agents get steps: an agent that only runs DeepWork workflows never
    waits for any, so nothing is handed to it.
    """
    agent_id = agent_id_clean(agent_id)
    with transaction.atomic():
        agent = agent_ensure(project=project, agent_id=agent_id)
        clean = _roles(roles) if roles is not None else list(agent.roles or [])
        Agent.objects.filter(pk=agent.pk).update(roles=clean, takes_dag_steps=True)
        renewed = agent_heartbeat(
            agent=agent,
            lease_seconds=responsive_seconds() if lease_seconds is None else lease_seconds,
        )
        assert renewed is not None  # no holder to lose it to
        events.event_record(
            kind=Event.Kind.AGENT_REGISTERED,
            project=project,
            agent=renewed,
            payload=events.AgentRegistered(agent_id=agent_id, roles=clean),
        )
    if dispatch:
        dag_dispatch(project=project)
    return renewed


def dag_agent(*, project: Project, agent_id: str) -> Agent:
    agent_id = agent_id_clean(agent_id)
    agent = Agent.objects.filter(project=project, agent_id=agent_id).first()
    if agent is None:
        raise NotFound(f"Unknown agent {agent_id!r}: register it first with register_agent")
    return agent


# --- People as agents ---------------------------------------------------------------------------


def dag_person_report(
    *,
    workflow_id: str,
    step_id: str,
    by: User,
    result: Any = None,
    error_message: str | None = None,
) -> Report:
    """A person completes (or, with ``error_message``, fails) a human step that is ready.

    A step assigned to ``user:<name>`` is that person's only. Holding ``reviews.decide_review``
    is the caller's check (the interfaces make it).
    """
    _check_json(result)
    failing = error_message is not None
    if failing:
        error_message = _error_message(error_message)
    job = Job.objects.filter(source=Job.Source.DEFINED, dir_name=workflow_id).first()
    if job is None:
        raise NotFound(f"Unknown workflow_id {workflow_id!r}: no such workflow")
    project = job.project
    with transaction.atomic():
        session = _locked_session(project=project, workflow_id=workflow_id)
        run = _reported_run(session, step_id)
        step = _shape(job.pk, workflow_id).steps[step_id]
        if not is_human(step):
            raise InvalidInput(
                f"Step {step_id!r} is an agent's step; only steps with role {HUMAN_ROLE!r} or "
                f"assigned to '{USER_PREFIX}<username>' are done by people"
            )
        owner = step.assigned_agent_id.removeprefix(USER_PREFIX)
        if step.assigned_agent_id.startswith(USER_PREFIX) and owner != by.get_username():
            raise InvalidInput(
                f"Step {step_id!r} is assigned to {owner!r}; only that person may report on it"
            )
        if run.status in (StepRun.Status.COMPLETED, StepRun.Status.FAILED):
            return Report(
                workflow_id,
                step_id,
                session.status,
                Advance(status=session.status),
                already=True,
                note=f"Step {step_id!r} was already reported {run.status}; nothing changed",
            )
        if session.status != RUNNING:
            return Report(
                workflow_id,
                step_id,
                session.status,
                Advance(status=session.status),
                already=True,
                note=f"Workflow {workflow_id!r} is {session.status}; this report changed nothing",
            )
        if run.status != StepRun.Status.READY:
            raise Conflict(f"Step {step_id!r} is still waiting for the steps it depends on")
        now = timezone.now()
        person = f"{USER_PREFIX}{by.get_username()}"
        if failing:
            assert error_message is not None
            StepRun.objects.filter(pk=run.pk, status=StepRun.Status.READY).update(
                status=StepRun.Status.FAILED,
                error_message=error_message,
                assigned_at=now,
                completed_at=now,
            )
            WorkflowSession.objects.filter(pk=session.pk, status=RUNNING).update(
                status=WorkflowSession.Status.FAILED,
                completed_at=now,
                updated_at=now,
                abort_reason=f"Step {step_id!r} failed: {error_message}",
            )
            _record_step_failure(
                project=project,
                session=session,
                workflow_id=workflow_id,
                step_id=step_id,
                failed_by=person,
                error_message=error_message,
                by=by,
            )
            return Report(
                workflow_id, step_id, WorkflowSession.Status.FAILED, Advance(status="failed")
            )
        StepRun.objects.filter(pk=run.pk, status=StepRun.Status.READY).update(
            status=StepRun.Status.COMPLETED, result=result, assigned_at=now, completed_at=now
        )
        events.event_record(
            kind=Event.Kind.DAG_STEP_COMPLETED,
            project=project,
            session=session,
            by=by,
            payload=events.DagStepCompleted(
                workflow_id=workflow_id, step_id=step_id, agent_id=person
            ),
        )
        advance = _advance(session, released=step_id)
    return Report(workflow_id, step_id, advance.status, advance)
