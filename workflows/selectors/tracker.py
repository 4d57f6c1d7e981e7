"""Reads of the tracker (seed 002): ``get_context`` and the metrics of a finished workflow.

Every list is one keyset page (newest first, ``limit`` rows after a cursor), so the query
count of a context does not grow with the workflow; each list comes with its total count and
the cursor of its next page (``None`` on the last). Filters select tasks first (phase number,
agent, start time), then the logs of those tasks; ``since`` applies to the logs' own time too.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from django.contrib.auth import get_user_model
from django.db.models import (
    Count,
    Exists,
    F,
    Func,
    IntegerField,
    OuterRef,
    Prefetch,
    Q,
    QuerySet,
    Subquery,
    Sum,
    Value,
    Window,
)
from django.db.models.functions import RowNumber
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from workflows import limits
from workflows.errors import InvalidInput, NotFound
from workflows.models import Decision, Issue, Milestone, Phase, Project, Task, TrackedWorkflow
from workflows.services.tracker import not_found, wire_pk

INCLUDES = ("decisions", "milestones", "blockers", "tasks", "phase_summary")
PAGED = ("decisions", "milestones", "blockers", "resolved_blockers", "tasks")
DEFAULT_LIMIT = 50
MAX_LIMIT = 200


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def _seconds(ms: int | None) -> int | None:
    return None if ms is None else round(ms / 1000)


def _since(value: str | None) -> datetime | None:
    if value is None:
        return None
    try:
        parsed = parse_datetime(value)
    except ValueError:
        parsed = None
    if parsed is None:
        raise InvalidInput(
            f"filter.since {value!r} is not an ISO 8601 date and time (e.g. 2026-01-31T12:00:00Z)"
        )
    if timezone.is_naive(parsed):
        parsed = timezone.make_aware(parsed, UTC)
    return parsed


def _cursor(name: str, cursors: Mapping[str, str]) -> int | None:
    value = cursors.get(name)
    if value is None:
        return None
    if not (isinstance(value, str) and value.isdigit() and len(value) < 19):
        raise InvalidInput(
            f"cursor.{name} {value!r} is not a cursor; pass the {name}_next_cursor of the "
            "previous answer"
        )
    return int(value)


def _after(
    queryset: QuerySet[Any], name: str, cursors: Mapping[str, str], limit: int
) -> QuerySet[Any]:
    """The rows of one page and the one after it (which says whether a next page exists)."""
    after = _cursor(name, cursors)
    if after is not None:
        queryset = queryset.filter(pk__lt=after)
    return queryset.order_by("-id")[: limit + 1]


def _cut(rows: list[dict[str, Any]], limit: int) -> tuple[list[dict[str, Any]], str | None]:
    """A page's rows (from ``_after``) and the cursor of the next page, ``None`` on the last."""
    more = len(rows) > limit
    rows = rows[:limit]
    return rows, (str(rows[-1]["id"]) if more else None)


def _page(
    queryset: QuerySet[Any], name: str, cursors: Mapping[str, str], limit: int, *fields: str
) -> tuple[list[dict[str, Any]], str | None]:
    """One page of ``fields`` (and ``id``) as dicts. Only the columns shown are read: a row
    with its task as a model would decode every JSON column of the task (its snapshot among
    them) for each of the page's rows."""
    return _cut(list(_after(queryset, name, cursors, limit).values("id", *fields)), limit)


COUNT_ALL = Func(Value(1), function="COUNT", output_field=IntegerField())

# The workflow's own columns in the answer's header.
HEADER = ("name", "status", "current_phase", "total_phases")


def _header(
    *,
    project: Project,
    workflow_id: str,
    lists: Mapping[str, QuerySet[Any]],
    phase: int | None,
) -> tuple[dict[str, Any], dict[str, int], bool]:
    """The workflow's header, the size of every list (a scalar subquery each) and whether
    the filter's phase exists: one query, however many lists. An unknown id is NotFound."""
    pk = wire_pk(workflow_id)
    if pk is None:
        raise not_found("workflow_id", workflow_id, "workflow")
    # A plain COUNT (no GROUP BY: the database answers it from the workflow's index), which
    # is 0 on no rows.
    extra: dict[str, Any] = {
        f"n_{name}": Subquery(rows.annotate(n=COUNT_ALL).values("n"))
        for name, rows in lists.items()
    }
    if phase is not None:
        extra["phase_found"] = Exists(Phase.objects.filter(workflow=pk, number=phase))
    found = (
        TrackedWorkflow.objects.filter(project=project, pk=pk)
        .annotate(**extra)
        .values("id", *HEADER, *extra)
    )
    for row in found:
        totals = {name: row[f"n_{name}"] for name in lists}
        return row, totals, bool(row.get("phase_found", True))
    raise not_found("workflow_id", workflow_id, "workflow")


# The columns of a log's task that say who did it (``_who``).
TASK_WHO = ("task_id", "task__name", "task__agent_name", "task__agent__agent_id")


def _who(row: Mapping[str, Any], prefix: str = "task__") -> str:
    return str(row[f"{prefix}agent_name"] or row[f"{prefix}agent__agent_id"])


def context_get(
    *,
    project: Project,
    workflow_id: str,
    include: Sequence[str],
    phase: int | None = None,
    agent: str | None = None,
    since: str | None = None,
    limit: int = DEFAULT_LIMIT,
    cursor: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The seed's ``get_context`` answer: the workflow's header, then each list asked for."""
    if not include:
        raise InvalidInput(f"include is empty; give one or more of: {', '.join(INCLUDES)}")
    unknown = [name for name in include if name not in INCLUDES]
    if unknown:
        raise InvalidInput(f"include {unknown[0]!r} is not one of: {', '.join(INCLUDES)}")
    if not 1 <= limit <= MAX_LIMIT:
        raise InvalidInput(f"limit is {limit}; it must be from 1 to {MAX_LIMIT}")
    cursors = dict(cursor or {})
    stray = [name for name in cursors if name not in PAGED]
    if stray:
        raise InvalidInput(f"cursor.{stray[0]}: no such list; lists are: {', '.join(PAGED)}")
    since_at = _since(since)
    limits.TRACKER_NAME.check("filter.agent", agent)
    if phase is not None:
        limits.check_range("filter.phase", phase, limits.PHASE_NUMBER_RANGE)
    # The lists select by the workflow's id before it is known to exist: the header's query
    # (which counts them) finds out, and on an unknown id nothing else runs.
    workflow = wire_pk(workflow_id) or 0
    tasks = Task.objects.filter(workflow=workflow)
    if phase is not None:
        tasks = tasks.filter(phase__number=phase)
    if agent is not None:
        tasks = tasks.filter(Q(agent_name=agent) | Q(agent_name="", agent__agent_id=agent))
    if since_at is not None:
        tasks = tasks.filter(started_at__gte=since_at)

    # Each list's conditions in one filter() call: every call copies the query, and building
    # querysets is most of this function's CPU time.
    selected: dict[str, Any] = {"workflow": workflow}
    if phase is not None or agent is not None:
        selected["task__in"] = tasks.values("pk")
    if since_at is not None:
        selected["created_at__gte"] = since_at

    def logs(model: type[Decision] | type[Issue] | type[Milestone], **more: Any) -> QuerySet[Any]:
        return model.objects.filter(**selected, **more)

    lists: dict[str, QuerySet[Any]] = {}
    if "decisions" in include:
        lists["decisions"] = logs(Decision)
    if "milestones" in include:
        lists["milestones"] = logs(Milestone)
    if "blockers" in include:
        lists["blockers"] = logs(Issue, requires_human_review=True, resolved_at__isnull=True)
        # Blockers a person has answered since: what they wrote, who and when.
        lists["resolved_blockers"] = logs(
            Issue, requires_human_review=True, resolved_at__isnull=False
        )
    if "tasks" in include:
        lists["tasks"] = tasks
    header, totals, phase_found = _header(
        project=project, workflow_id=workflow_id, lists=lists, phase=phase
    )
    answer: dict[str, Any] = {
        "workflow_id": str(header["id"]),
        "workflow_name": header["name"],
        "workflow_status": header["status"],
        "current_phase": header["current_phase"],
        "total_phases": header["total_phases"],
    }
    filtered = phase is not None or agent is not None or since is not None
    if filtered:
        answer["filters_applied"] = {"phase": phase, "agent": agent, "since": since}
    if not phase_found:
        answer["warning"] = f"Phase {phase} not found in workflow"
        return answer

    if "phase_summary" in include:
        phases = Phase.objects.filter(workflow=workflow)
        if phase is not None:
            phases = phases.filter(number=phase)
        done = [Task.Status.SUCCESS, Task.Status.PARTIAL_SUCCESS]
        summary = (
            phases.values("id", "number", "name", "status", "started_at", "completed_at")
            .annotate(
                n_total=Count("tasks"),
                n_completed=Count("tasks", filter=Q(tasks__status__in=done)),
                n_failed=Count("tasks", filter=Q(tasks__status=Task.Status.FAILED)),
                n_running=Count("tasks", filter=Q(tasks__status=Task.Status.IN_PROGRESS)),
                task_ms=Sum("tasks__duration_ms"),
            )
            .order_by("number")
        )
        # Phases are few (numbers 1-100), so this list is not paged.
        answer["phase_summary"] = [
            {
                "phase_number": p["number"],
                "phase_name": p["name"],
                "phase_id": str(p["id"]),
                "status": p["status"],
                "tasks": {
                    "total": p["n_total"],
                    "completed": p["n_completed"],
                    "failed": p["n_failed"],
                    "in_progress": p["n_running"],
                },
                "duration_seconds": _seconds(p["task_ms"]) or 0,
                "started_at": _iso(p["started_at"]),
                "completed_at": _iso(p["completed_at"]),
            }
            for p in summary
        ]
    if "decisions" in include:
        rows, following = _page(
            lists["decisions"],
            "decisions",
            cursors,
            limit,
            *TASK_WHO,
            "category",
            "question",
            "options_considered",
            "chosen",
            "reasoning",
            "trade_offs",
            "created_at",
        )
        answer["decisions"] = [
            {
                "id": str(d["id"]),
                "task_id": str(d["task_id"]),
                "task_name": d["task__name"],
                "agent_name": _who(d),
                "category": d["category"],
                "question": d["question"],
                "options_considered": d["options_considered"],
                "chosen": d["chosen"],
                "reasoning": d["reasoning"],
                "trade_offs": d["trade_offs"] or None,
                "created_at": _iso(d["created_at"]),
            }
            for d in rows
        ]
        answer["decisions_count"] = totals["decisions"]
        answer["decisions_next_cursor"] = following
    if "milestones" in include:
        rows, following = _page(
            lists["milestones"],
            "milestones",
            cursors,
            limit,
            *TASK_WHO,
            "message",
            "progress",
            "metadata",
            "created_at",
        )
        answer["milestones"] = [
            {
                "id": str(m["id"]),
                "task_id": str(m["task_id"]),
                "task_name": m["task__name"],
                "agent_name": _who(m),
                "message": m["message"],
                "progress": m["progress"],
                "metadata": m["metadata"],
                "created_at": _iso(m["created_at"]),
            }
            for m in rows
        ]
        answer["milestones_count"] = totals["milestones"]
        answer["milestones_next_cursor"] = following
    if "blockers" in include:
        # Both pages of issues in one query: each page's ids (with the row after it) as a
        # subquery, the rows read once and told apart by whether they are resolved.
        username = f"resolved_by__{get_user_model().USERNAME_FIELD}"
        issue_rows = list(
            Issue.objects.filter(
                Q(pk__in=_after(lists["blockers"], "blockers", cursors, limit).values("id"))
                | Q(
                    pk__in=_after(
                        lists["resolved_blockers"], "resolved_blockers", cursors, limit
                    ).values("id")
                )
            )
            .order_by("-id")
            .values(
                "id",
                *TASK_WHO,
                "type",
                "description",
                "resolution",
                "created_at",
                "human_resolution",
                username,
                "resolved_at",
            )
        )
        rows, following = _cut([i for i in issue_rows if i["resolved_at"] is None], limit)
        answer["blockers"] = [
            {
                "id": str(i["id"]),
                "task_id": str(i["task_id"]),
                "task_name": i["task__name"],
                "agent_name": _who(i),
                "type": i["type"],
                "description": i["description"],
                "resolution": i["resolution"],
                "created_at": _iso(i["created_at"]),
            }
            for i in rows
        ]
        answer["blockers_count"] = totals["blockers"]
        answer["has_blockers"] = totals["blockers"] > 0
        answer["blockers_next_cursor"] = following
        rows, following = _cut([i for i in issue_rows if i["resolved_at"] is not None], limit)
        answer["resolved_blockers"] = [
            {
                "id": str(i["id"]),
                "task_id": str(i["task_id"]),
                "task_name": i["task__name"],
                "type": i["type"],
                "description": i["description"],
                "human_resolution": i["human_resolution"],
                "resolved_by": i[username],
                "resolved_at": _iso(i["resolved_at"]),
            }
            for i in rows
        ]
        answer["resolved_blockers_count"] = totals["resolved_blockers"]
        answer["resolved_blockers_next_cursor"] = following
    if "tasks" in include:
        rows, following = _page(
            lists["tasks"],
            "tasks",
            cursors,
            limit,
            "phase_id",
            "parent_id",
            "name",
            "goal",
            "status",
            "caller_type",
            "agent_name",
            "agent__agent_id",
            "summary",
            "duration_ms",
            "started_at",
            "completed_at",
            "manual_review_needed",
            "files_changed",
        )
        answer["tasks"] = [
            {
                "id": str(t["id"]),
                "phase_id": str(t["phase_id"]) if t["phase_id"] else None,
                "parent_task_id": str(t["parent_id"]) if t["parent_id"] else None,
                "name": t["name"],
                "goal": t["goal"],
                "status": t["status"],
                "caller_type": t["caller_type"] or None,
                "agent_name": _who(t, prefix=""),
                "summary": t["summary"] or None,
                "duration_seconds": _seconds(t["duration_ms"]),
                "started_at": _iso(t["started_at"]),
                "completed_at": _iso(t["completed_at"]),
                "manual_review_needed": t["manual_review_needed"],
                "files_changed": t["files_changed"] or None,
            }
            for t in rows
        ]
        answer["tasks_count"] = totals["tasks"]
        answer["tasks_next_cursor"] = following
    return answer


def workflow_metrics(*, workflow: TrackedWorkflow) -> dict[str, Any]:
    """What a workflow took: wall-clock time from its start to its completion, beside the
    summed task time (which counts parallel tasks twice), tokens and distinct files changed."""
    tasks = Task.objects.filter(workflow=workflow)
    totals = tasks.aggregate(
        n=Count("id"),
        task_ms=Sum("duration_ms"),
        tin=Sum("tokens_input"),
        tout=Sum("tokens_output"),
    )
    paths: set[str] = set()
    for changed in tasks.exclude(files_changed={}).values_list("files_changed", flat=True):
        for key in ("added", "modified", "deleted"):
            paths.update(changed.get(key, []))
    end = workflow.completed_at or timezone.now()
    wall_seconds = max(0, round((end - workflow.created_at).total_seconds()))
    return {
        "total_phases": Phase.objects.filter(workflow=workflow).count(),
        "total_tasks": totals["n"],
        "duration": wall_seconds,
        "total_duration_seconds": wall_seconds,
        "total_duration_minutes": round(wall_seconds / 60, 1),
        "task_duration_seconds": _seconds(totals["task_ms"]) or 0,
        "total_tokens": (totals["tin"] or 0) + (totals["tout"] or 0),
        "files_changed": len(paths),
    }


# --- The REST API's reads (seen by people, across projects): keyset pages on the id, newest
# first, each page one query however many rows it holds.

BLOCKER = Q(requires_human_review=True)
# The list filters' wire values (the seed's lower case, as agents send them) to stored ones.
WORKFLOW_STATUSES = {s.value.lower(): s.value for s in TrackedWorkflow.Status}
WORKFLOW_PROFILES = {p.value.lower(): p.value for p in TrackedWorkflow.Profile}


@dataclass(frozen=True)
class TrackedWorkflowFilter:
    project_id: int | None = None
    status: str | None = None
    profile: str | None = None
    agent_id: str | None = None


def _keyset(
    queryset: QuerySet[Any], limit: int, before: int | None
) -> tuple[list[Any], int | None]:
    """Up to ``limit`` rows with an id below ``before``, newest first, and the cursor of the
    next page (``None`` on the last)."""
    if before is not None:
        queryset = queryset.filter(pk__lt=before)
    rows = list(queryset.order_by("-id")[: limit + 1])
    more = len(rows) > limit
    rows = rows[:limit]
    return rows, (rows[-1].pk if more else None)


def tracked_workflow_page(
    *, filters: TrackedWorkflowFilter, limit: int, before: int | None = None
) -> tuple[list[TrackedWorkflow], int | None]:
    """One page of tracked workflows with their project and agent: one query."""
    return _keyset(_filtered_workflows(filters), limit, before)


def _filtered_workflows(filters: TrackedWorkflowFilter) -> QuerySet[TrackedWorkflow]:
    workflows = TrackedWorkflow.objects.select_related("project", "agent")
    if filters.project_id is not None:
        workflows = workflows.filter(project_id=filters.project_id)
    if filters.status is not None:
        workflows = workflows.filter(status=filters.status)
    if filters.profile is not None:
        workflows = workflows.filter(profile=filters.profile)
    if filters.agent_id is not None:
        workflows = workflows.filter(agent__agent_id=filters.agent_id)
    return workflows


def _count(model: type[Task] | type[Decision] | type[Issue] | type[Milestone], q: Q) -> Any:
    """How many of a workflow's rows of ``model`` match ``q``, as a subquery."""
    rows = model.objects.filter(q, workflow=OuterRef("pk")).order_by().values("workflow")
    return Subquery(rows.annotate(n=Count("pk")).values("n")[:1])


def _latest_progress() -> Subquery:
    return Subquery(
        Milestone.objects.filter(workflow=OuterRef("pk"), progress__isnull=False)
        .order_by("-id")
        .values("progress")[:1]
    )


OPEN_BLOCKER = BLOCKER & Q(resolved_at__isnull=True)


@dataclass(frozen=True)
class TrackedWorkflowWindow:
    workflows: Sequence[TrackedWorkflow]
    newer: int | None  # pass as ``after`` for the page of newer workflows
    older: int | None  # pass as ``before`` for the page of older ones; None on the last


def tracked_workflow_window(
    *,
    filters: TrackedWorkflowFilter,
    limit: int,
    before: int | None = None,
    after: int | None = None,
) -> TrackedWorkflowWindow:
    """One page of tracked workflows for the dashboard's list, newest first, towards older
    ones (``before``) or newer ones (``after``), each with its project, agent, latest progress
    and the number of its tasks, running tasks and open blockers: one query."""
    workflows = _filtered_workflows(filters).annotate(
        n_tasks=_count(Task, Q()),
        n_running=_count(Task, Q(status=Task.Status.IN_PROGRESS)),
        n_open_blockers=_count(Issue, OPEN_BLOCKER),
        latest_progress=_latest_progress(),
    )
    towards_newer = before is None and after is not None
    if before is not None:
        workflows = workflows.filter(pk__lt=before)
    elif after is not None:
        workflows = workflows.filter(pk__gt=after)
    rows = list(workflows.order_by("id" if towards_newer else "-id")[: limit + 1])
    more = len(rows) > limit
    rows = rows[:limit]
    if towards_newer:
        rows.reverse()
        newer = rows[0] if more and rows else None
        older = rows[-1] if rows else None
    else:
        newer = rows[0] if after is None and before is not None and rows else None
        older = rows[-1] if more else None
    return TrackedWorkflowWindow(
        workflows=rows,
        newer=None if newer is None else newer.pk,
        older=None if older is None else older.pk,
    )


def tracked_workflows_in_progress(*, limit: int) -> TrackedWorkflowWindow:
    """The newest ``limit`` tracked workflows still in progress (the dashboard's overview,
    beside the active session stacks): one query."""
    return tracked_workflow_window(
        filters=TrackedWorkflowFilter(status=TrackedWorkflow.Status.IN_PROGRESS), limit=limit
    )


def tracked_workflow_detail(*, workflow_id: int) -> TrackedWorkflow:
    """A workflow with the sizes of its lists, its latest reported progress and its phases
    (each with its task counts): two queries. The lists themselves are paged apart."""
    count = _count
    done = [Task.Status.SUCCESS, Task.Status.PARTIAL_SUCCESS]
    # Phases are few (numbers 1-100), so they come whole.
    phases = Phase.objects.annotate(
        n_total=Count("tasks"),
        n_completed=Count("tasks", filter=Q(tasks__status__in=done)),
        n_failed=Count("tasks", filter=Q(tasks__status=Task.Status.FAILED)),
        n_running=Count("tasks", filter=Q(tasks__status=Task.Status.IN_PROGRESS)),
    ).order_by("number")
    workflow = (
        TrackedWorkflow.objects.select_related("project", "agent")
        .prefetch_related(Prefetch("phases", queryset=phases))
        .annotate(
            n_tasks=count(Task, Q()),
            n_decisions=count(Decision, Q()),
            n_issues=count(Issue, Q()),
            n_open_blockers=count(Issue, OPEN_BLOCKER),
            n_milestones=count(Milestone, Q()),
            latest_progress=_latest_progress(),
        )
        .filter(pk=workflow_id)
        .first()
    )
    if workflow is None:
        raise NotFound(f"workflow {workflow_id}: no such tracked workflow")
    return workflow


def tracked_workflow_get(*, workflow_id: int) -> TrackedWorkflow:
    workflow = TrackedWorkflow.objects.filter(pk=workflow_id).first()
    if workflow is None:
        raise NotFound(f"workflow {workflow_id}: no such tracked workflow")
    return workflow


# Sub-tasks shown under each task of a tree page, unless asked otherwise.
SUBTASK_LIMIT = 20


@dataclass
class TaskNode:
    """A task with the first page of its sub-tasks (oldest first, each nested the same way);
    reads as the task itself (for the API's schemas). ``subtasks_next_cursor`` continues the
    sub-task list (``subtask_page``'s ``after``); ``None`` when every sub-task is shown."""

    task: Task
    subtasks: list[TaskNode]
    subtasks_count: int = 0
    subtasks_next_cursor: int | None = None

    def __getattr__(self, name: str) -> Any:
        if name == "task":  # not yet set (copying): no recursion
            raise AttributeError(name)
        return getattr(self.task, name)


def _tree_tasks() -> QuerySet[Task]:
    return Task.objects.select_related("phase", "agent")


def _nest(level: list[TaskNode], subtask_limit: int) -> None:
    """Hang below each node the first ``subtask_limit`` of its sub-tasks, level by level: one
    query per level of nesting, however many tasks each level holds. Each child row carries
    its rank among its siblings and their number (window functions), so a parent with 10,000
    sub-tasks costs no more than one with two."""
    while level:
        by_id = {node.task.pk: node for node in level}
        children = (
            _tree_tasks()
            .filter(parent_id__in=list(by_id))
            .annotate(
                rank=Window(RowNumber(), partition_by=F("parent_id"), order_by=F("id").asc()),
                n_siblings=Window(Count("id"), partition_by=F("parent_id")),
            )
            .filter(rank__lte=subtask_limit)
            .order_by("parent_id", "id")
        )
        level = []
        for child in children:
            node = TaskNode(child, [])
            # A child always has a parent on the level above (parents are created first).
            parent = by_id[child.parent_id or 0]
            parent.subtasks.append(node)
            parent.subtasks_count = child.n_siblings
            level.append(node)
        for parent in by_id.values():
            if parent.subtasks_count > len(parent.subtasks):
                parent.subtasks_next_cursor = parent.subtasks[-1].task.pk


def task_tree_page(
    *,
    workflow: TrackedWorkflow,
    limit: int,
    before: int | None = None,
    subtask_limit: int = SUBTASK_LIMIT,
) -> tuple[list[TaskNode], int | None]:
    """One page of the workflow's top-level tasks, newest first, each with the first
    ``subtask_limit`` of its sub-tasks nested (oldest first, each with theirs): one query for
    the page, then one per level of nesting."""
    roots, following = _keyset(
        _tree_tasks().filter(workflow=workflow, parent__isnull=True), limit, before
    )
    top = [TaskNode(task, []) for task in roots]
    _nest(top, subtask_limit)
    return top, following


def subtask_page(
    *, task: Task, limit: int, after: int | None = None, subtask_limit: int = SUBTASK_LIMIT
) -> tuple[list[TaskNode], int | None]:
    """One page of a task's sub-tasks, oldest first (ids above ``after``), each with the first
    ``subtask_limit`` of its own nested; the cursor of the next page or ``None``."""
    children = _tree_tasks().filter(parent=task)
    if after is not None:
        children = children.filter(pk__gt=after)
    rows = list(children.order_by("id")[: limit + 1])
    more = len(rows) > limit
    rows = rows[:limit]
    nodes = [TaskNode(child, []) for child in rows]
    _nest(nodes, subtask_limit)
    return nodes, (rows[-1].pk if more else None)


def task_subtree(
    *, workflow_id: int, task_id: int, limit: int, after: int | None = None
) -> TaskNode:
    """One task of a workflow with a page of its sub-tasks (``subtask_page``), their number
    and the cursor of the next page: three queries, then one per level of nesting."""
    task = (
        Task.objects.select_related("workflow", "phase", "agent")
        .filter(pk=task_id, workflow_id=workflow_id)
        .first()
    )
    if task is None:
        raise NotFound(f"task {task_id}: no such task in workflow {workflow_id}")
    children, following = subtask_page(task=task, limit=limit, after=after, subtask_limit=limit)
    return TaskNode(
        task,
        children,
        subtasks_count=Task.objects.filter(parent=task).count(),
        subtasks_next_cursor=following,
    )


def task_get_by_id(*, task_id: int) -> Task:
    task = Task.objects.filter(pk=task_id).first()
    if task is None:
        raise NotFound(f"task {task_id}: no such tracked task")
    return task


def log_page(
    *,
    workflow: TrackedWorkflow,
    model: type[Decision] | type[Milestone],
    limit: int,
    before: int | None = None,
) -> tuple[list[Any], int | None]:
    """One page of a workflow's decisions or milestones with their task: one query."""
    rows = model.objects.filter(workflow=workflow).select_related("task__agent")
    return _keyset(rows, limit, before)


def issue_page(
    *, workflow: TrackedWorkflow, limit: int, before: int | None = None, blockers: str | None = None
) -> tuple[list[Issue], int | None]:
    """One page of a workflow's issues with their task and who resolved them: one query.
    ``blockers`` narrows them to the blockers still ``open`` or already ``resolved``."""
    rows = Issue.objects.filter(workflow=workflow).select_related("task__agent", "resolved_by")
    if blockers == "open":
        rows = rows.filter(BLOCKER, resolved_at__isnull=True)
    elif blockers == "resolved":
        rows = rows.filter(BLOCKER, resolved_at__isnull=False)
    return _keyset(rows, limit, before)
