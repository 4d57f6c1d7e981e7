"""Execute a DAG workflow and hand its steps to agents: the scheduler's pass over a locked
execution, the dispatch that retries waiting steps and hands on those of agents that went
quiet, and the agents' registration and lease renewal that trigger it."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from django.db import transaction
from django.db.models import Count, F, Max, Q
from django.utils import timezone

from dag.plan import DagStep, json_clean, same_identity
from dag.services.base import (
    MAX_ROLES,
    RUNNING,
    USER_PREFIX,
    Advance,
    Delegation,
    StepNotPlaced,
    agent_id_clean,
    dag_job,
    dag_shape,
    is_human,
)
from workflows import events, limits
from workflows.errors import Conflict, Forbidden, InvalidInput, NotFound
from workflows.liveness import ProcessHolder, responsive_q, responsive_seconds, unresponsive_q
from workflows.models import Agent, Event, Job, Project, Step, StepRun, Workflow, WorkflowSession
from workflows.services.agents import agent_ensure, agent_heartbeat, agent_release

if TYPE_CHECKING:
    from django.contrib.auth.models import User


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
        workflow = Workflow.objects.get(job=job)
        shape = dag_shape(job.pk, job.dir_name)
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
        return dag_advance(session)


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


def dag_advance(
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
    shape = dag_shape(session.job_id, session.session_id)
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
            result.issues.append(StepNotPlaced(step_id, choice))
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
            outcomes.append(dag_advance(session, sweep_lost=True))
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
