"""The tracker as people read it, across projects (the REST API and the dashboard): keyset
pages on the id, newest first, each page one query however many rows it holds; the task tree
with a bounded number of sub-tasks per task."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.db.models import (
    Count,
    F,
    OuterRef,
    Prefetch,
    Q,
    QuerySet,
    Subquery,
    Window,
)
from django.db.models.functions import RowNumber

from tracker.models import Decision, Issue, Milestone, Phase, Task, TrackedWorkflow
from workflows.errors import NotFound

BLOCKER = Q(requires_human_review=True)
# The list filters' wire values (lower case, as agents send them) to stored ones.
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


def _count(
    model: type[Task] | type[Decision] | type[Issue] | type[Milestone] | type[Phase], q: Q
) -> Any:
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
# The workflow's current phase is the furthest one started; "done" counts the finished ones.
PHASE_DONE = Q(status=Phase.Status.COMPLETED)


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
    and the number of its finished phases, tasks, running tasks and open blockers: one query."""
    workflows = _filtered_workflows(filters).annotate(
        n_phases_done=_count(Phase, PHASE_DONE),
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
            n_phases_done=count(Phase, PHASE_DONE),
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
