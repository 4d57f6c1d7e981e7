"""Reads for the workflow tools: persisted tool names, the filters people set, the
DeepWork workflows a project publishes and the status of a run of one. Each costs a fixed
number of queries, whatever the number of workflows."""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path
from stat import S_ISREG
from typing import Any

from workflow_tools.models import WorkflowToolFilter, WorkflowToolName
from workflow_tools.sources import GENERIC_SCHEMA, PublishedWorkflow, RunState, RunStatus
from workflows import yaml_bounded
from workflows.errors import NotFound
from workflows.models import Job, Project, StepRun, WorkflowSession, WorkflowStep
from workflows.services.catalog import CatalogView

DEEPWORK_SOURCE_KEY = "deepwork"

logger = logging.getLogger("deepwork.workflow_tools")

_UNREADABLE: tuple[type[Exception], ...] = (OSError, *yaml_bounded.LOAD_ERRORS)


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


# --- Filters from settings: the environment and the project's settings file ------------------

FILTERS_FILE = ".deepwork/workflow_tools.yml"
_FIELDS = {"name": WorkflowToolFilter.Field.NAME, "category": WorkflowToolFilter.Field.CATEGORY}


class FilterSyntaxError(ValueError):
    pass


def parse_filter_globs(action: str, value: object, where: str) -> tuple[FilterRule, ...]:
    """Rules from a comma-separated string (or a list of strings) of globs, each on the tool's
    names (``release*`` or ``name:release*``) or on its category (``category:deepwork/*``)."""
    if value is None:
        return ()
    if isinstance(value, str):
        items: Sequence[object] = value.split(",")
    elif isinstance(value, list):
        items = value
    else:
        raise FilterSyntaxError(
            f"{where}: expected a comma-separated string or a list of globs, "
            f"got {type(value).__name__}"
        )
    rules = []
    for index, item in enumerate(items):
        if not isinstance(item, str):
            raise FilterSyntaxError(
                f"{where}[{index}]: a glob must be a string, got {type(item).__name__}"
            )
        text = item.strip()
        if not text:
            if isinstance(value, str):
                continue  # "a,,b" or a trailing comma: nothing meant
            raise FilterSyntaxError(f"{where}[{index}]: an empty glob")
        field_name, sep, pattern = text.partition(":")
        field = _FIELDS.get(field_name.strip().lower()) if sep else None
        if field is None:
            # No known field before a colon: the whole text is a glob on the names.
            field, pattern = WorkflowToolFilter.Field.NAME, text
        pattern = pattern.strip()
        if not pattern:
            raise FilterSyntaxError(f"{where}: {text!r} has no glob after its field")
        if len(pattern) > 255:
            raise FilterSyntaxError(f"{where}: the glob {pattern[:40]!r}... is over 255 characters")
        rules.append(FilterRule(action, field, pattern.lower()))
    return tuple(rules)


def env_filters(
    environ: Mapping[str, str], include_env: str, exclude_env: str
) -> tuple[FilterRule, ...]:
    """The rules the environment sets. A variable that cannot be read is logged and ignored
    whole: half of a list of globs could list tools an exclude was meant to hide."""
    rules: list[FilterRule] = []
    for action, name in (
        (WorkflowToolFilter.Action.INCLUDE, include_env),
        (WorkflowToolFilter.Action.EXCLUDE, exclude_env),
    ):
        try:
            rules += parse_filter_globs(action, environ.get(name), name)
        except FilterSyntaxError as exc:
            logger.warning("%s is ignored: %s", name, exc)
    return tuple(rules)


class FileFilters:
    """The include/exclude globs of a project's ``.deepwork/workflow_tools.yml``, read again
    whenever the file changes (its size and modification time are compared on each listing:
    one ``stat``), so an edit applies on the next listing with no restart::

        include: ["release*", "category:deepwork/*"]   # or one comma-separated string
        exclude: "*_draft"

    A file that cannot be read or breaks a rule is logged with the reason, and the rules it
    held before keep applying until it is fixed; a removed file sets no rules.
    """

    KEYS = ("include", "exclude")

    def __init__(self, path: Path) -> None:
        self.path = path
        self._stamp: tuple[int, int, int] | None = None
        self._rules: tuple[FilterRule, ...] = ()
        self._lock = threading.Lock()

    def rules(self) -> tuple[FilterRule, ...]:
        try:
            stat = os.stat(self.path)
        except FileNotFoundError:
            self._stamp, self._rules = None, ()
            return ()
        except OSError as exc:
            logger.warning("%s cannot be read (%s); its last rules still apply", self.path, exc)
            return self._rules
        stamp = (stat.st_mtime_ns, stat.st_size, stat.st_ino)
        if stamp == self._stamp:
            return self._rules
        if not S_ISREG(stat.st_mode):
            # A pipe would block the listing until someone wrote to it.
            self._stamp = stamp
            logger.warning("%s is not a regular file; its last rules still apply", self.path)
            return self._rules
        with self._lock:
            self._stamp = stamp  # a broken file is reported once, not on every listing
            try:
                self._rules = self._read()
            except _UNREADABLE as exc:
                logger.warning("%s is not applied (%s); its last rules still apply", self.path, exc)
        return self._rules

    def _read(self) -> tuple[FilterRule, ...]:
        if self.path.stat().st_size > 1024 * 1024:
            raise FilterSyntaxError("the file is over 1 MiB")
        data = yaml_bounded.load(self.path.read_text(encoding="utf-8"), name=str(self.path))
        if data is None:
            return ()
        if not isinstance(data, dict):
            raise FilterSyntaxError(f"expected a mapping with {' and/or '.join(self.KEYS)}")
        unknown = sorted(str(key) for key in data if key not in self.KEYS)
        if unknown:
            raise FilterSyntaxError(
                f"unknown key(s) {', '.join(unknown)}; use {' and/or '.join(self.KEYS)}"
            )
        return parse_filter_globs(
            WorkflowToolFilter.Action.INCLUDE, data.get("include"), "include"
        ) + parse_filter_globs(WorkflowToolFilter.Action.EXCLUDE, data.get("exclude"), "exclude")


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
