"""Reads for the workflow tools (seed 003): persisted tool names, the filters people set, the
DeepWork workflows a project publishes and the status of a run of one. Each costs a fixed
number of queries, whatever the number of workflows."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any

from workflows.errors import NotFound
from workflows.models import (
    Job,
    Project,
    StepRun,
    WorkflowSession,
    WorkflowStep,
    WorkflowToolFilter,
    WorkflowToolName,
)
from workflows.services.catalog import CatalogView
from workflows.workflow_sources import (
    GENERIC_SCHEMA,
    PublishedWorkflow,
    RunState,
    RunStatus,
)

DEEPWORK_SOURCE_KEY = "deepwork"


def workflow_tool_names(*, project: Project) -> dict[str, str]:
    """Every persisted workflow key -> tool name of the project (one query)."""
    return dict(
        WorkflowToolName.objects.filter(project=project).values_list("workflow_key", "tool_name")
    )


@dataclass(frozen=True)
class FilterRule:
    action: str
    field: str
    pattern: str


def workflow_tool_filters() -> tuple[FilterRule, ...]:
    """The enabled include/exclude rules (one query)."""
    return tuple(
        FilterRule(action, field, pattern.lower())
        for action, field, pattern in WorkflowToolFilter.objects.filter(enabled=True)
        .order_by("id")
        .values_list("action", "field", "pattern")
    )


def filters_pass(
    rules: Sequence[FilterRule], *, tool_name: str, workflow: PublishedWorkflow
) -> bool:
    """Whether ``workflow`` (served as ``tool_name``) passes ``rules``: it matches an include
    rule (when there are any) and no exclude rule."""
    if not rules:
        return True
    names = (tool_name.lower(), workflow.name.lower(), workflow.id.lower())
    category = workflow.category.lower()

    def matches(rule: FilterRule) -> bool:
        if rule.field == WorkflowToolFilter.Field.CATEGORY:
            return fnmatchcase(category, rule.pattern)
        return any(fnmatchcase(name, rule.pattern) for name in names)

    includes = [rule for rule in rules if rule.action == WorkflowToolFilter.Action.INCLUDE]
    if includes and not any(matches(rule) for rule in includes):
        return False
    return not any(
        matches(rule) for rule in rules if rule.action == WorkflowToolFilter.Action.EXCLUDE
    )


# --- DeepWork job workflows as published workflows --------------------------------------------

GOAL_PROPERTY = {
    "type": "string",
    "minLength": 1,
    "description": "What the user wants to accomplish.",
}
INSTANCE_PROPERTY = {
    "type": "string",
    "description": "Optional label for this run, e.g. 'acme' or 'q1-2026'.",
}


def deepwork_input_schema(definition: Mapping[str, Any], workflow_name: str) -> dict[str, Any]:
    """The tool schema of one workflow of a stored job definition: ``goal`` and
    ``instance_id`` (as ``start_workflow`` takes them), then each user-parameter input of the
    workflow's steps as a string; those of the first entry are required."""
    steps = {step["id"]: step for step in reversed(definition.get("steps", []))}
    workflow = next(
        (w for w in definition.get("workflows", []) if w.get("name") == workflow_name), None
    )
    if workflow is None:
        return dict(GENERIC_SCHEMA)
    properties: dict[str, Any] = {"goal": GOAL_PROPERTY, "instance_id": INSTANCE_PROPERTY}
    required = ["goal"]
    for index, entry in enumerate(workflow.get("entries", [])):
        for step_id in entry:
            for item in steps.get(step_id, {}).get("inputs", []):
                name = item.get("name")
                if name is None or name in properties:
                    continue  # a file input, or a parameter already declared
                properties[name] = {"type": "string", "description": item["description"]}
                if index == 0:
                    required.append(name)
    return {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }


def deepwork_published(*, view: CatalogView) -> tuple[PublishedWorkflow, ...]:
    """Every workflow of the catalog's current jobs, in catalog order (one query)."""
    rows = {
        pk: (source, version, definition)
        for pk, source, version, definition in Job.objects.filter(
            pk__in=[job.pk for job in view.jobs]
        ).values_list("pk", "source", "version", "definition")
    }
    found: list[PublishedWorkflow] = []
    for job in view.jobs:
        source, version, definition = rows[job.pk]
        for workflow_name, summary in job.workflows:
            found.append(
                PublishedWorkflow(
                    id=f"{job.dir_name}/{workflow_name}",
                    name=job.name if workflow_name == job.name else f"{job.name}_{workflow_name}",
                    description=f"{summary} (job {job.name}: {job.summary})",
                    category=f"deepwork/{source}",
                    version=version,
                    input_schema=deepwork_input_schema(definition, workflow_name),
                    execution_type="async",
                    metadata={
                        "kind": "deepwork",
                        "job": job.dir_name,
                        "job_name": job.name,
                        "workflow": workflow_name,
                    },
                )
            )
    return tuple(found)


_STATES: dict[str, RunState] = {
    WorkflowSession.Status.ACTIVE: "RUNNING",
    WorkflowSession.Status.COMPLETED: "COMPLETED",
    WorkflowSession.Status.ABORTED: "CANCELLED",
}


def session_run_status(*, project: Project, session_id: str) -> RunStatus:
    """A DeepWork session as a run: RUNNING while active, COMPLETED, or CANCELLED when aborted;
    progress counts finished steps of the workflow's steps (three queries)."""
    session = (
        WorkflowSession.objects.filter(project=project, session_id=session_id)
        .select_related("job")
        .only(
            "session_id",
            "status",
            "workflow_id",
            "workflow_name",
            "current_step_id",
            "abort_reason",
            "started_at",
            "completed_at",
            "job__dir_name",
        )
        .first()
    )
    if session is None or session.status not in _STATES:
        # A multi-agent run's session (running/failed) is served by the DAG source instead.
        hint = f"; a multi-agent workflow's run id is dag:{session_id}" if session else ""
        raise NotFound(
            f"Unknown run id '{session_id}': no workflow run of this project has it{hint}"
        )
    done = (
        StepRun.objects.filter(session=session, status=StepRun.Status.COMPLETED)
        .values("step_id")
        .distinct()
        .count()
    )
    total = WorkflowStep.objects.filter(workflow_id=session.workflow_id).count()
    state = _STATES[session.status]
    return RunStatus(
        run_id=session.session_id,
        workflow_id=f"{session.job.dir_name}/{session.workflow_name}",
        status=state,
        progress={
            "completed_steps": done,
            "total_steps": total,
            "current_step": session.current_step_id if state == "RUNNING" else None,
        },
        result=(
            {"summary": f"Workflow '{session.workflow_name}' completed successfully!"}
            if state == "COMPLETED"
            else None
        ),
        error=session.abort_reason if state == "CANCELLED" else None,
        started_at=session.started_at.isoformat(),
        ended_at=session.completed_at.isoformat() if session.completed_at else None,
    )
