"""The tracker: every write to tracked workflows, phases, tasks and their logs.

Rules the original left loose, decided here:
- A task goes from IN_PROGRESS to SUCCESS, PARTIAL_SUCCESS or FAILED exactly once: the
  completion is a compare-and-set on the status, so of two agents completing one task at once
  exactly one wins and the other is told the task is no longer running.
- A task whose sub-tasks still run cannot complete (their names are listed); a sub-task can only
  start under a running parent task of the same workflow.
- ``complete_workflow(status=completed)`` is refused while tasks still run (their names are
  listed): "completed" must be true. ``failed`` and ``partial`` are accepted with a warning
  naming them, since an agent giving up must be able to say so. ``partial`` is stored as
  PARTIAL, not turned into FAILED.
- Tasks start only in a workflow in progress and in a phase that is not finished (the original
  silently reopened a completed workflow).
- File snapshots and diffs run git, which may be slow: they run outside any transaction, and
  the state they depend on is checked again inside it.

Wire ids are the primary keys as text; an id that is not a number is simply not found.

Why one long module: every write of the tracker (workflows, phases, tasks, the three logs and
a person's answer to a blocker) shares the same claim-then-recheck pattern around the slow git
look, and the same status rules; split by entity when one of them gains rules of its own.
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from django.db import connections, models, router, transaction
from django.utils import timezone

from tracker import scope
from tracker.ids import not_found, wire_pk
from tracker.models import Decision, Issue, Milestone, Phase, Task, TrackedWorkflow
from workflows import changes, events, limits, rows
from workflows.errors import Conflict, InvalidInput, NotFound
from workflows.models import Agent, Event, Project

if TYPE_CHECKING:
    from django.contrib.auth.models import User as User
else:
    User = Any

logger = logging.getLogger(__name__)

M = TypeVar("M", bound=models.Model)

# Wire values (lower case, as agents send them) to stored values. Two are renamed as in the
# original.
PROFILES = {p.value.lower(): p.value for p in TrackedWorkflow.Profile}
WORKFLOW_OUTCOMES = {
    "completed": TrackedWorkflow.Status.COMPLETED,
    "failed": TrackedWorkflow.Status.FAILED,
    "partial": TrackedWorkflow.Status.PARTIAL,
}
PHASE_OUTCOMES = {"completed": Phase.Status.COMPLETED, "failed": Phase.Status.FAILED}
TASK_OUTCOMES = {
    "success": Task.Status.SUCCESS,
    "partial_success": Task.Status.PARTIAL_SUCCESS,
    "failed": Task.Status.FAILED,
}
CALLER_TYPES = {c.value.lower(): c.value for c in Task.CallerType}
TESTS_STATUSES = {t.value.lower(): t.value for t in Task.TestsStatus}
DECISION_CATEGORIES = {c.value.lower(): c.value for c in Decision.Category}
ISSUE_TYPES = {
    "documentation_gap": Issue.Type.DOC_GAP,
    "bug_encountered": Issue.Type.BUG,
    "dependency_conflict": Issue.Type.DEPENDENCY_CONFLICT,
    "unclear_requirement": Issue.Type.UNCLEAR_REQUIREMENT,
    "other": Issue.Type.OTHER,
}
# Tokens per task: far above any real run, far below BigIntegerField's end.
MAX_TOKENS = 10**12
# Keys and size of a milestone's free-form metadata once stored as JSON.
MAX_METADATA_CHARS = 100_000


def enum_value(field_name: str, value: str, choices: Mapping[str, str]) -> str:
    """The stored value of the wire value ``value``, or an error listing the valid ones."""
    try:
        return choices[value]
    except KeyError:
        raise InvalidInput(f"{field_name} {value!r} is not one of: {', '.join(choices)}") from None


def _get(queryset: models.QuerySet[M], field_name: str, wire_id: str, what: str) -> M:
    pk = wire_pk(wire_id)
    found = queryset.filter(pk=pk).first() if pk is not None else None
    if found is None:
        raise not_found(field_name, wire_id, what)
    return found


def workflow_get(*, project: Project, workflow_id: str, lock: bool = False) -> TrackedWorkflow:
    queryset = TrackedWorkflow.objects.filter(project=project)
    if lock:
        queryset = queryset.select_for_update()
    return _get(queryset, "workflow_id", workflow_id, "workflow")


def task_get(*, project: Project, task_id: str, field_name: str = "task_id") -> Task:
    return _get(
        Task.objects.filter(project=project).select_related("workflow", "phase"),
        field_name,
        task_id,
        "task",
    )


def phase_get(*, project: Project, phase_id: str) -> Phase:
    return _get(Phase.objects.filter(project=project), "phase_id", phase_id, "phase")


def _now() -> datetime:
    return timezone.now()


def _workflow_updated(workflow: TrackedWorkflow, agent: Agent | None, reason: str) -> None:
    events.event_record(
        kind=Event.Kind.WORKFLOW_UPDATED,
        project=workflow.project,
        agent=agent,
        payload=events.TrackedWorkflowUpdated(
            workflow_id=str(workflow.pk),
            status=workflow.status,
            current_phase=workflow.current_phase,
            reason=reason,
        ),
    )


# --- Workflows --------------------------------------------------------------------------------


# The original's default phase count per profile, used when an objective is given.
DEFAULT_PHASES = {"SIMPLE": 2, "STANDARD": 3, "COMPLEX": 4}


def tracked_workflow_start(
    *,
    project: Project,
    agent: Agent,
    name: str,
    objective: str | None = None,
    profile: str | None = None,
    total_phases: int | None = None,
    scope: str | None = None,
    constraints: str | None = None,
) -> TrackedWorkflow:
    limits.TRACKER_NAME.check("name", name)
    if not name.strip():
        raise InvalidInput("name is empty; give the workflow a short name")
    for field_name, value in (
        ("objective", objective),
        ("scope", scope),
        ("constraints", constraints),
    ):
        limits.TRACKER_TEXT.check(field_name, value)
    stored_profile = enum_value("profile", profile or "standard", PROFILES)
    if total_phases is not None:
        limits.check_range("total_phases", total_phases, limits.TOTAL_PHASES_RANGE)
    elif objective:
        total_phases = DEFAULT_PHASES[stored_profile]
    with transaction.atomic():
        workflow = TrackedWorkflow.objects.create(
            project=project,
            agent=agent,
            name=name,
            objective=objective or "",
            scope=scope or "",
            constraints=constraints or "",
            profile=stored_profile,
            total_phases=total_phases or 1,
            status=TrackedWorkflow.Status.IN_PROGRESS,
        )
        events.event_record(
            kind=Event.Kind.WORKFLOW_CREATED,
            project=project,
            agent=agent,
            payload=events.TrackedWorkflowCreated(
                workflow_id=str(workflow.pk),
                name=workflow.name,
                profile=workflow.profile,
                status=workflow.status,
                total_phases=workflow.total_phases,
            ),
        )
    return workflow


@dataclass(frozen=True)
class WorkflowCompleted:
    workflow: TrackedWorkflow
    warnings: list[str]


def _names(tasks: Sequence[Task]) -> str:
    return ", ".join(f"'{task.name}' ({task.pk})" for task in tasks)


def _phase_names(phases: Sequence[Phase]) -> str:
    listed = ", ".join(f"{phase.number} ('{phase.name}')" for phase in phases)
    return f"phase {listed} was" if len(phases) == 1 else f"phases {listed} were"


def tracked_workflow_complete(
    *,
    project: Project,
    agent: Agent,
    workflow_id: str,
    status: str,
    summary: str,
    achievements: list[str] | None = None,
    limitations: list[str] | None = None,
) -> WorkflowCompleted:
    stored = enum_value("status", status, WORKFLOW_OUTCOMES)
    limits.TRACKER_TEXT.check("summary", summary)
    limits.check_items("achievements", achievements)
    limits.check_items("limitations", limitations)
    warnings: list[str] = []
    with transaction.atomic():
        workflow = workflow_get(project=project, workflow_id=workflow_id, lock=True)
        if workflow.status != TrackedWorkflow.Status.IN_PROGRESS:
            raise Conflict(
                f"workflow {workflow.pk} is already {workflow.status}; a workflow is completed once"
            )
        running = list(
            Task.objects.filter(workflow=workflow, status=Task.Status.IN_PROGRESS).order_by("id")
        )
        if running and stored == TrackedWorkflow.Status.COMPLETED:
            raise Conflict(
                f"status 'completed' refused: {len(running)} task(s) still in progress: "
                f"{_names(running)}; complete them first, or complete the workflow as "
                "'failed' or 'partial'"
            )
        if running:
            warnings.append(
                f"{len(running)} task(s) still in progress and left so: {_names(running)}"
            )
        open_phases = list(
            Phase.objects.filter(workflow=workflow, status=Phase.Status.IN_PROGRESS).order_by(
                "number"
            )
        )
        if open_phases and stored == TrackedWorkflow.Status.COMPLETED:
            # Nothing runs in them any more (running tasks refuse 'completed'): they are done.
            for phase in open_phases:
                _phase_close(phase=phase, agent=agent, status=Phase.Status.COMPLETED)
            warnings.append(
                f"{_phase_names(open_phases)} still in progress; completed with the workflow"
            )
            workflow.refresh_from_db()
        elif open_phases:
            warnings.append(
                f"{_phase_names(open_phases)} still in progress and left so; complete "
                "or fail each with complete_phase"
            )
        now = _now()
        totals = Task.objects.filter(workflow=workflow).aggregate(
            duration=models.Sum("duration_ms"),
            tokens=models.Sum(models.F("tokens_input") + models.F("tokens_output")),
        )
        workflow.status = stored
        workflow.summary = summary
        workflow.achievements = achievements or []
        workflow.limitations = limitations or []
        workflow.total_duration_ms = totals["duration"] or 0
        workflow.total_tokens = totals["tokens"] or 0
        workflow.completed_at = now
        workflow.updated_at = now
        workflow.save()
        _workflow_updated(workflow, agent, "complete_workflow")
    return WorkflowCompleted(workflow=workflow, warnings=warnings)


# --- Phases -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class PhaseStarted:
    phase: Phase
    created: bool


def _phase_open(
    *, workflow: TrackedWorkflow, agent: Agent, number: int, name: str | None
) -> PhaseStarted:
    """Find or create phase ``number`` (the workflow row is locked by the caller)."""
    phase = Phase.objects.filter(workflow=workflow, number=number).first()
    now = _now()
    if phase is None:
        phase = Phase.objects.create(
            project=workflow.project,
            agent=agent,
            workflow=workflow,
            number=number,
            name=name or f"Phase {number}",
            status=Phase.Status.IN_PROGRESS,
            started_at=now,
        )
        events.event_record(
            kind=Event.Kind.PHASE_CREATED,
            project=workflow.project,
            agent=agent,
            payload=events.PhaseCreated(
                workflow_id=str(workflow.pk),
                phase_id=str(phase.pk),
                number=phase.number,
                name=phase.name,
                status=phase.status,
            ),
        )
        _phase_current(workflow, agent, number, now)
        return PhaseStarted(phase=phase, created=True)
    if phase.status in (Phase.Status.COMPLETED, Phase.Status.FAILED):
        raise Conflict(
            f"phase {number} ('{phase.name}') is already {phase.status}; start work in a phase "
            "that is not finished"
        )
    if phase.status == Phase.Status.PENDING:
        phase.status = Phase.Status.IN_PROGRESS
        phase.started_at = now
        phase.save(update_fields=["status", "started_at"])
        _phase_current(workflow, agent, number, now)
    return PhaseStarted(phase=phase, created=False)


def _phase_current(workflow: TrackedWorkflow, agent: Agent, number: int, now: datetime) -> None:
    """A workflow's current phase is the furthest one started: the one in progress, or the
    last finished while the next has not begun."""
    if number > workflow.current_phase:
        workflow.current_phase = number
        workflow.updated_at = now
        workflow.save(update_fields=["current_phase", "updated_at"])
        _workflow_updated(workflow, agent, "phase_started")


def _check_phase_args(number: int, name: str | None) -> None:
    limits.check_range("phase", number, limits.PHASE_NUMBER_RANGE)
    limits.TRACKER_NAME.check("phase_name", name)


def _running_workflow(project: Project, workflow_id: str, lock: bool = True) -> TrackedWorkflow:
    workflow = workflow_get(project=project, workflow_id=workflow_id, lock=lock)
    if workflow.status != TrackedWorkflow.Status.IN_PROGRESS:
        raise Conflict(
            f"workflow {workflow.pk} is {workflow.status}; work can be added only to a workflow "
            "in progress"
        )
    return workflow


def phase_start(
    *, project: Project, agent: Agent, workflow_id: str, number: int, name: str | None = None
) -> PhaseStarted:
    _check_phase_args(number, name)
    with transaction.atomic():
        workflow = _running_workflow(project, workflow_id)
        return _phase_open(workflow=workflow, agent=agent, number=number, name=name)


@dataclass(frozen=True)
class PhaseCompleted:
    phase: Phase
    warnings: list[str]


_OPEN_PHASE = (Phase.Status.PENDING, Phase.Status.IN_PROGRESS)


def _phase_close(*, phase: Phase, agent: Agent, status: str) -> PhaseCompleted:
    """Close ``phase`` (compare-and-set from a running status); warn about running tasks."""
    # The workflow row first, as every tracker write that changes a workflow's children takes
    # it: one lock order, so two writers never wait on each other.
    workflow = TrackedWorkflow.objects.select_for_update().get(pk=phase.workflow_id)
    now = _now()
    closed = Phase.objects.filter(pk=phase.pk, status__in=_OPEN_PHASE).update(
        status=status, completed_at=now
    )
    if not closed:
        phase.refresh_from_db()
        raise Conflict(f"phase {phase.number} ('{phase.name}') is already {phase.status}")
    phase.refresh_from_db()
    running = list(Task.objects.filter(phase=phase, status=Task.Status.IN_PROGRESS).order_by("id"))
    warnings = (
        [f"{len(running)} task(s) still in progress in this phase: {_names(running)}"]
        if running
        else []
    )
    events.event_record(
        kind=Event.Kind.PHASE_UPDATED,
        project=phase.project,
        agent=agent,
        payload=events.PhaseUpdated(
            workflow_id=str(phase.workflow_id),
            phase_id=str(phase.pk),
            number=phase.number,
            status=phase.status,
        ),
    )
    if phase.number > workflow.current_phase:
        workflow.current_phase = phase.number
        workflow.updated_at = now
        workflow.save(update_fields=["current_phase", "updated_at"])
        _workflow_updated(workflow, agent, "phase_completed")
    return PhaseCompleted(phase=phase, warnings=warnings)


def phase_complete(
    *, project: Project, agent: Agent, phase_id: str, status: str = "completed"
) -> PhaseCompleted:
    stored = enum_value("status", status, PHASE_OUTCOMES)
    with transaction.atomic():
        phase = phase_get(project=project, phase_id=phase_id)
        return _phase_close(phase=phase, agent=agent, status=stored)


# --- File changes (workflows.changes): slow, so always outside a transaction. -----------------


# The look at the project (git, the files) runs on its own thread while the calling one reads
# the database: git waits on the disk, and a Python thread reading rows has the core meanwhile.
# It touches no database, so no connection crosses threads.
_LOOKS = ThreadPoolExecutor(max_workers=16, thread_name_prefix="tracker-files")


def _snapshot(root: Path | None) -> tuple[dict[str, Any] | None, list[str]]:
    if root is None:
        return None, []
    try:
        snapshot = changes.snapshot_take(root=root)
        return snapshot.to_json(), list(snapshot.warnings)
    except Exception as exc:  # never fail the call because of the project's files
        logger.warning("Snapshot of %s failed: %s", root, exc)
        return None, [f"file changes cannot be tracked for this task: {exc}"]


@dataclass
class FileChanges:
    added: list[str] = field(default_factory=list)
    modified: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, list[str]]:
        return {"added": self.added, "modified": self.modified, "deleted": self.deleted}

    def paths(self) -> list[str]:
        return sorted({*self.added, *self.modified, *self.deleted})


def _changes(root: Path | None, snapshot: dict[str, Any] | None) -> FileChanges:
    if root is None:
        return FileChanges()
    if snapshot is None:
        return FileChanges(warnings=["no snapshot was taken at start_task; files not compared"])
    try:
        found = changes.changes_since(root=root, snapshot=changes.Snapshot.from_json(snapshot))
    except Exception as exc:
        logger.warning("Comparing %s with its snapshot failed: %s", root, exc)
        return FileChanges(warnings=[f"file changes could not be computed: {exc}"])
    return FileChanges(
        added=sorted(found.added),
        modified=sorted(found.modified),
        deleted=sorted(found.deleted),
        warnings=list(found.warnings),
    )


# --- Tasks ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TaskStarted:
    task: Task
    phase: Phase | None
    phase_created: bool
    warnings: list[str]


def task_start(
    *,
    project: Project,
    agent: Agent,
    workflow_id: str,
    name: str,
    goal: str,
    phase: int | None = None,
    phase_name: str | None = None,
    caller_type: str | None = None,
    agent_name: str | None = None,
    areas: list[str] | None = None,
    parent_task_id: str | None = None,
    root: Path | None = None,
) -> TaskStarted:
    """Start a task, after a snapshot of ``root`` (when given) taken outside the transaction."""
    limits.TRACKER_NAME.check("name", name)
    if not name.strip():
        raise InvalidInput("name is empty; give the task a short name")
    limits.TRACKER_TEXT.check("goal", goal)
    limits.TRACKER_NAME.check("agent_name", agent_name)
    stored_caller = enum_value("caller_type", caller_type, CALLER_TYPES) if caller_type else ""
    if stored_caller == Task.CallerType.SUBAGENT and not agent_name:
        raise InvalidInput("agent_name is required when caller_type is 'subagent'")
    if phase is not None:
        _check_phase_args(phase, phase_name)
    elif phase_name is not None:
        raise InvalidInput("phase_name is given without phase; give the phase number too")
    scope.areas_check(areas or [])
    # The snapshot is taken while the ids are checked (all again under the lock); a bad id
    # changes nothing, its snapshot is dropped.
    looking: Future[tuple[dict[str, Any] | None, list[str]]] = _LOOKS.submit(_snapshot, root)
    _running_workflow(project, workflow_id, lock=False)
    if parent_task_id is not None:
        task_get(project=project, task_id=parent_task_id, field_name="parent_task_id")
    snapshot, warnings = looking.result()
    with transaction.atomic():
        workflow = _running_workflow(project, workflow_id)
        parent = None
        if parent_task_id is not None:
            parent = _get(
                Task.objects.filter(project=project).select_for_update(),
                "parent_task_id",
                parent_task_id,
                "task",
            )
            if parent.workflow_id != workflow.pk:
                raise InvalidInput(
                    f"parent_task_id {parent_task_id!r} belongs to workflow "
                    f"{parent.workflow_id}, not to workflow {workflow.pk}; a sub-task starts "
                    "in its parent's workflow"
                )
            if parent.status != Task.Status.IN_PROGRESS:
                raise Conflict(
                    f"parent_task_id {parent_task_id!r}: task '{parent.name}' is "
                    f"{parent.status}; sub-tasks start only under a running task"
                )
        opened = (
            _phase_open(workflow=workflow, agent=agent, number=phase, name=phase_name)
            if phase is not None
            else None
        )
        task = Task.objects.create(
            project=project,
            agent=agent,
            workflow=workflow,
            phase=opened.phase if opened else None,
            parent=parent,
            name=name,
            goal=goal,
            caller_type=stored_caller,
            agent_name=agent_name or "",
            areas=list(areas or []),
            snapshot=snapshot,
        )
        events.event_record(
            kind=Event.Kind.TASK_CREATED,
            project=project,
            agent=agent,
            payload=events.TaskCreated(
                workflow_id=str(workflow.pk),
                task_id=str(task.pk),
                name=task.name,
                phase_id=str(task.phase_id) if task.phase_id else None,
                parent_task_id=str(task.parent_id) if task.parent_id else None,
                caller_type=task.caller_type,
                agent_name=task.agent_name,
            ),
        )
    return TaskStarted(
        task=task,
        phase=opened.phase if opened else None,
        phase_created=bool(opened and opened.created),
        warnings=warnings,
    )


@dataclass(frozen=True)
class TaskCompleted:
    task: Task
    files: FileChanges
    verification: scope.Verification
    phase: PhaseCompleted | None


def _check_running(task: Task) -> None:
    if task.status != Task.Status.IN_PROGRESS:
        raise Conflict(f"Task is not in progress: '{task.name}' ({task.pk}) is {task.status}")
    _check_subtasks(task)


def _check_subtasks(task: Task) -> None:
    running = list(
        Task.objects.filter(parent=task.pk, status=Task.Status.IN_PROGRESS).order_by("id")
    )
    if running:
        raise Conflict(
            f"task '{task.name}' ({task.pk}) has {len(running)} sub-task(s) still in progress: "
            f"{_names(running)}; complete them first"
        )


def _overlapping(task: Task, now: datetime) -> list[Task]:
    """Other tasks of the project that ran while ``task`` did (its own sub-tasks and its
    ancestors excepted: their changes are its changes)."""
    ancestors = set()
    parent_id = task.parent_id
    while parent_id is not None and parent_id not in ancestors:
        ancestors.add(parent_id)
        parent_id = Task.objects.filter(pk=parent_id).values_list("parent_id", flat=True).first()
    return list(
        Task.objects.filter(project=task.project_id, started_at__lt=now)
        .filter(models.Q(completed_at__isnull=True) | models.Q(completed_at__gt=task.started_at))
        .exclude(pk=task.pk)
        .exclude(pk__in=ancestors)
        .exclude(parent=task)
        .order_by("id")[:10]
    )


def task_complete(
    *,
    project: Project,
    agent: Agent,
    task_id: str,
    status: str,
    summary: str,
    achievements: list[str] | None = None,
    limitations: list[str] | None = None,
    next_steps: list[str] | None = None,
    manual_review_needed: bool = False,
    manual_review_reason: str | None = None,
    phase_complete: bool = False,
    packages_added: list[str] | None = None,
    packages_removed: list[str] | None = None,
    commands_executed: list[str] | None = None,
    tests_status: str | None = None,
    tokens_input: int | None = None,
    tokens_output: int | None = None,
    root: Path | None = None,
) -> TaskCompleted:
    """Complete a running task once; its file changes are computed outside the transaction and
    the task's state is checked again, by compare-and-set, inside it."""
    stored = enum_value("status", status, TASK_OUTCOMES)
    limits.TRACKER_TEXT.check("outcome.summary", summary)
    limits.check_items("outcome.achievements", achievements)
    limits.check_items("outcome.limitations", limitations)
    limits.check_items("outcome.next_steps", next_steps)
    limits.TRACKER_ITEM.check("outcome.manual_review_reason", manual_review_reason)
    limits.check_items("metadata.packages_added", packages_added, limits.TRACKER_NAME)
    limits.check_items("metadata.packages_removed", packages_removed, limits.TRACKER_NAME)
    limits.check_items("metadata.commands_executed", commands_executed)
    stored_tests = (
        enum_value("metadata.tests_status", tests_status, TESTS_STATUSES) if tests_status else ""
    )
    for field_name, tokens in (
        ("metadata.tokens_input", tokens_input),
        ("metadata.tokens_output", tokens_output),
    ):
        if tokens is not None and not 0 <= tokens <= MAX_TOKENS:
            raise InvalidInput(f"{field_name} is {tokens}; it must be from 0 to {MAX_TOKENS:,}")
    task = task_get(project=project, task_id=task_id)
    _check_running(task)
    if phase_complete and task.phase is None:
        raise InvalidInput(
            "phase_complete is true but the task has no phase; start it with a phase number"
        )
    if phase_complete and task.phase is not None and task.phase.status not in _OPEN_PHASE:
        raise Conflict(
            f"phase_complete: phase {task.phase.number} ('{task.phase.name}') is already "
            f"{task.phase.status}; nothing was changed"
        )
    looking: Future[FileChanges] = _LOOKS.submit(_changes, root, task.snapshot)
    overlapping = _overlapping(task, _now()) if root is not None else []
    files = looking.result()
    now = _now()
    if overlapping:
        files.warnings.append(
            "other tasks ran in this project at the same time, so some of these changes may "
            f"belong to them: {_names(overlapping)}"
        )
    verification = scope.scope_verify(areas=task.areas, paths=files.paths())
    warnings = files.warnings + verification.warnings
    duration_ms = max(0, int((now - task.started_at).total_seconds() * 1000))
    with transaction.atomic():
        # Completions in one workflow queue on its row, so each sums every committed task.
        TrackedWorkflow.objects.select_for_update().filter(pk=task.workflow_id).first()
        won = Task.objects.filter(pk=task.pk, status=Task.Status.IN_PROGRESS).update(
            status=stored,
            completed_at=now,
            duration_ms=duration_ms,
            summary=summary,
            achievements=achievements or [],
            limitations=limitations or [],
            next_steps=next_steps or [],
            manual_review_needed=manual_review_needed,
            manual_review_reason=manual_review_reason or "",
            packages_added=packages_added or [],
            packages_removed=packages_removed or [],
            commands_executed=commands_executed or [],
            tests_status=stored_tests,
            tokens_input=tokens_input or 0,
            tokens_output=tokens_output or 0,
            files_changed=files.as_dict(),
            scope_match=verification.scope_match,
            unexpected_files=verification.unexpected_files,
            warnings=warnings,
        )
        if not won:
            task.refresh_from_db()
            raise Conflict(
                f"Task is not in progress: '{task.name}' ({task.pk}) was completed as "
                f"{task.status} by another call while this one ran; nothing was changed"
            )
        # A sub-task may have started since the check above; the row lock now holds it off.
        _check_subtasks(task)
        task.refresh_from_db()
        events.event_record(
            kind=Event.Kind.TASK_UPDATED,
            project=project,
            agent=agent,
            payload=events.TaskUpdated(
                workflow_id=str(task.workflow_id),
                task_id=str(task.pk),
                status=task.status,
                duration_ms=duration_ms,
                files_changed=files.as_dict(),
                unexpected_files=verification.unexpected_files,
            ),
        )
        totals = Task.objects.filter(workflow=task.workflow_id).aggregate(
            duration=models.Sum("duration_ms"),
            tokens=models.Sum(models.F("tokens_input") + models.F("tokens_output")),
        )
        TrackedWorkflow.objects.filter(pk=task.workflow_id).update(
            total_duration_ms=totals["duration"] or 0,
            total_tokens=totals["tokens"] or 0,
            updated_at=now,
        )
        closed = None
        if phase_complete:
            assert task.phase is not None
            closed = _phase_close(phase=task.phase, agent=agent, status=Phase.Status.COMPLETED)
    return TaskCompleted(task=task, files=files, verification=verification, phase=closed)


# --- Logs: decisions, issues, milestones (against a task of any status, as the original). ----


# Of a log row, the columns the INSERT ... SELECT takes from the task's row.
FROM_TASK = ("workflow", "task")


@functools.cache
def _log_insert_sql(model: type[models.Model]) -> tuple[str, tuple[models.Field[Any, Any], ...]]:
    """``INSERT ... SELECT`` of a log row whose workflow and task come from the task's own row,
    for the project's task only (no row without it), returning the new row's id and workflow;
    and the fields whose values are its parameters, in order."""
    meta = model._meta
    fields = tuple(f for f in meta.concrete_fields if not f.primary_key and f.name not in FROM_TASK)
    columns = ", ".join(f.column for f in fields)
    return (
        f"INSERT INTO {meta.db_table} (workflow_id, task_id, {columns}) "
        f"SELECT t.workflow_id, t.id, {', '.join(['%s'] * len(fields))} "
        f"FROM {Task._meta.db_table} t WHERE t.id = %s AND t.project_id = %s "
        "RETURNING id, workflow_id"
    ), fields


def _log_insert(
    model: type[M], *, project: Project, agent: Agent, task_id: str, values: dict[str, Any]
) -> M:
    """Insert one log row against the project's task ``task_id``, or NotFound.

    The task's workflow is read by the INSERT itself (``INSERT ... SELECT`` from the task's
    row): one statement, so one round trip to PostgreSQL instead of a read and a write, and no
    moment between them. Returns the row as ``objects.create`` would."""
    pk = wire_pk(task_id)
    if pk is None:
        raise not_found("task_id", task_id, "task")
    using = router.db_for_write(model)
    connection = connections[using]
    given = {"project": project, "agent": agent, **values, "created_at": timezone.now()}
    sql, fields = _log_insert_sql(model)
    params = []
    for column in fields:
        value = given[column.name] if column.name in given else column.get_default()
        if isinstance(value, models.Model):
            value = value.pk
        params.append(rows.prepared_value(column, value, connection))
    with connection.cursor() as cursor:
        cursor.execute(sql, [*params, pk, project.pk])
        inserted = cursor.fetchone()
    if inserted is None:
        raise not_found("task_id", task_id, "task")
    row = model(pk=inserted[0], workflow_id=inserted[1], task_id=pk, **given)
    row._state.adding = False
    row._state.db = using
    return row


def _logged(
    model: type[M],
    *,
    project: Project,
    agent: Agent,
    task_id: str,
    values: dict[str, Any],
    kind: str,
    payload: Callable[[M], events.Payload],
) -> M:
    with transaction.atomic():
        row = _log_insert(model, project=project, agent=agent, task_id=task_id, values=values)
        events.event_record(kind=kind, project=project, agent=agent, payload=payload(row))
    return row


def decision_log(
    *,
    project: Project,
    agent: Agent,
    task_id: str,
    category: str,
    question: str,
    chosen: str,
    reasoning: str,
    options_considered: list[str] | None = None,
    trade_offs: str | None = None,
) -> Decision:
    stored = enum_value("category", category, DECISION_CATEGORIES)
    for field_name, value in (
        ("question", question),
        ("chosen", chosen),
        ("reasoning", reasoning),
        ("trade_offs", trade_offs),
    ):
        limits.TRACKER_TEXT.check(field_name, value)
    limits.check_items("options_considered", options_considered)
    return _logged(
        Decision,
        project=project,
        agent=agent,
        task_id=task_id,
        values={
            "category": stored,
            "question": question,
            "options_considered": list(options_considered or []),
            "chosen": chosen,
            "reasoning": reasoning,
            "trade_offs": trade_offs or "",
        },
        kind=Event.Kind.DECISION_CREATED,
        payload=lambda row: events.DecisionCreated(
            workflow_id=str(row.workflow_id),
            task_id=str(row.task_id),
            decision_id=str(row.pk),
            category=row.category,
        ),
    )


def issue_log(
    *,
    project: Project,
    agent: Agent,
    task_id: str,
    type: str,
    description: str,
    resolution: str,
    requires_human_review: bool = False,
) -> Issue:
    stored = enum_value("type", type, ISSUE_TYPES)
    limits.TRACKER_TEXT.check("description", description)
    limits.TRACKER_TEXT.check("resolution", resolution)
    return _logged(
        Issue,
        project=project,
        agent=agent,
        task_id=task_id,
        values={
            "type": stored,
            "description": description,
            "resolution": resolution,
            "requires_human_review": requires_human_review,
        },
        kind=Event.Kind.ISSUE_CREATED,
        payload=lambda row: events.IssueCreated(
            workflow_id=str(row.workflow_id),
            task_id=str(row.task_id),
            issue_id=str(row.pk),
            type=row.type,
            requires_human_review=row.requires_human_review,
        ),
    )


def blocker_resolve(*, issue_id: int, by: User, via: str, resolution: str) -> Issue:
    """A person answers a blocker in writing, once; the agent's next ``get_context`` lists it
    among ``resolved_blockers`` with who and when. ``via`` is the credential they answered
    through (the dashboard, an API token), recorded with the answer."""
    limits.TRACKER_TEXT.check("resolution", resolution)
    if not resolution.strip():
        raise InvalidInput("resolution is empty; write how the blocker is resolved")
    with transaction.atomic():
        issue = Issue.objects.select_related("project").filter(pk=issue_id).first()
        if issue is None:
            raise NotFound(f"issue {issue_id}: no such issue")
        if not issue.requires_human_review:
            raise InvalidInput(
                f"issue {issue_id} does not require human review, so it is not a blocker"
            )
        now = _now()
        won = Issue.objects.filter(pk=issue.pk, resolved_at__isnull=True).update(
            human_resolution=resolution, resolved_by=by, resolved_at=now, resolved_via=via[:160]
        )
        if not won:
            issue.refresh_from_db()
            who = issue.resolved_by.get_username() if issue.resolved_by else "someone"
            when = issue.resolved_at.isoformat() if issue.resolved_at else "?"
            raise Conflict(
                f"issue {issue_id} was already resolved by {who} at {when}; nothing was changed"
            )
        issue.refresh_from_db()
        events.event_record(
            kind=Event.Kind.ISSUE_UPDATED,
            project=issue.project,
            by=by,
            via=via,
            payload=events.IssueResolved(
                workflow_id=str(issue.workflow_id),
                task_id=str(issue.task_id),
                issue_id=str(issue.pk),
                human_resolution=resolution,
            ),
        )
    return issue


def milestone_log(
    *,
    project: Project,
    agent: Agent,
    task_id: str,
    message: str,
    progress: float | None = None,
    metadata: dict[str, Any] | None = None,
) -> Milestone:
    limits.MILESTONE_MESSAGE.check("message", message)
    limits.check_range("progress", progress, limits.PROGRESS_RANGE)
    if metadata is not None:
        size = len(json.dumps(metadata, ensure_ascii=False))
        if size > MAX_METADATA_CHARS:
            raise InvalidInput(
                f"metadata is {size:,} characters as JSON; the limit is {MAX_METADATA_CHARS:,}"
            )
    return _logged(
        Milestone,
        project=project,
        agent=agent,
        task_id=task_id,
        values={"message": message, "progress": progress, "metadata": metadata or {}},
        kind=Event.Kind.MILESTONE_CREATED,
        payload=lambda row: events.MilestoneCreated(
            workflow_id=str(row.workflow_id),
            task_id=str(row.task_id),
            milestone_id=str(row.pk),
            message=row.message,
            progress=row.progress,
        ),
    )
