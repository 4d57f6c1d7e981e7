"""Define a multi-agent DAG workflow (checked, then stored as a job with its steps and edges)
and delete one with its execution. Only its creator may delete it."""

from __future__ import annotations

import hashlib
import json
import secrets
from typing import Any

from django.db import IntegrityError, transaction

from dag.plan import (
    DagPlan,
    dag_check_size,
    dag_description,
    dag_execution_type,
    dag_name,
    dag_plan,
)
from dag.services.base import (
    RUNNING,
    Defined,
    agent_id_clean,
    dag_job,
    dag_shape,
    dag_status,
    is_human,
)
from workflows import events
from workflows.errors import Conflict, Forbidden, InvalidInput
from workflows.models import (
    Agent,
    Event,
    Job,
    Project,
    Step,
    Workflow,
    WorkflowSession,
    WorkflowStep,
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
    dag_shape.cache_clear()
    return status
