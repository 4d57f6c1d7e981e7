"""Reads of projects and their job catalogs, as the last catalog sync by any process left
them. Each costs a fixed number of queries whatever the catalog's size."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from django.db.models import Prefetch, QuerySet

from workflows import rows
from workflows.errors import NotFound
from workflows.models import Job, JobLoadError, Project, Step, Workflow, WorkflowStep


def project_page(*, limit: int, offset: int) -> tuple[list[Project], int]:
    """A page of projects by name, and how many there are (a small table: counting is cheap)."""
    rows = list(Project.objects.order_by("name", "id")[offset : offset + limit])
    return rows, Project.objects.count()


def project_list() -> list[Project]:
    """Every project by name, with whether it is served (for a filter's choices, a listing)."""
    return list(
        Project.objects.only("id", "name", "root_path", "hosted", "removed_at").order_by(
            "name", "id"
        )
    )


def project_get(*, project_id: int) -> Project:
    project = Project.objects.filter(pk=project_id).first()
    if project is None:
        raise NotFound(project_not_found(project_id))
    return project


def project_not_found(project_id: int) -> str:
    return f"Project {project_id} not found"


# The largest id a database row has (a signed 64-bit integer), 19 digits.
MAX_PROJECT_ID = 2**63 - 1


def project_ref_id(ref: str) -> int | None:
    """The id a project reference (as a header, URL or command line gives it: an id or a root
    path) names, or None when it is not an id. Only ASCII digits count, and no more than an
    id can have: ``str.isdigit`` also takes '²' and other scripts' digits, which ``int``
    refuses, and a number of thousands of digits would cost time to convert."""
    if not (ref.isascii() and ref.isdigit() and len(ref) <= len(str(MAX_PROJECT_ID))):
        return None
    value = int(ref)
    return value if 1 <= value <= MAX_PROJECT_ID else None


def project_find(*, ref: str) -> Project:
    """The project a reference names: its id (``project_ref_id``), else its root path exactly
    as stored; ``NotFound`` otherwise."""
    project_id = project_ref_id(ref)
    project = (
        Project.objects.filter(pk=project_id).first()
        if project_id is not None
        else Project.objects.filter(root_path=ref).first()
    )
    if project is None:
        raise NotFound(project_ref_not_found(ref))
    return project


def project_ref_not_found(ref: str) -> str:
    return f"No project {ref[:200]!r} (give its id or root path)"


class _Placed(Protocol):
    entry_index: int


P = TypeVar("P", bound=_Placed)


def entries_of(nodes: Iterable[P]) -> list[list[P]]:
    """A workflow's nodes (or steps read with their node's ``entry_index``), in entry order,
    grouped into its entries: a concurrent entry holds several nodes. Every reader that lays
    out a workflow groups through this."""
    entries: list[list[P]] = []
    for node in nodes:
        while len(entries) <= node.entry_index:
            entries.append([])
        entries[node.entry_index].append(node)
    return entries


def _ordered_nodes() -> QuerySet[WorkflowStep]:
    return WorkflowStep.objects.select_related("step").order_by("entry_index", "position_in_entry")


# What laying a workflow out reads of its nodes (the catalog, a session's progress).
_NODE_FIELDS = (
    "workflow_id",
    "entry_index",
    "position_in_entry",
    "is_concurrent",
    "step__step_id",
    "step__name",
    "step__outputs",
)


_NODES = WorkflowStep._meta.db_table
# Workflow layouts kept per process (``workflow_entries``), least recently used first out.
LAYOUTS_KEPT = 512
_layouts: OrderedDict[tuple[Any, ...], tuple[tuple[Step, ...], ...]] = OrderedDict()
_layouts_lock = threading.Lock()


def workflow_entries(*, workflow: Workflow, job: Job | None = None) -> list[list[Step]]:
    """The workflow's ordered entries of whole steps (what a transition needs of them).

    Read on every transition, so written out (``workflows.rows``): one query. Given the
    workflow's ``job`` (its ``created_at`` loaded), the layout is kept in this process: a job
    revision's steps and their places are written once and never change, and the key holds
    the revision's creation time, so a primary key used again after a rollback is never
    mistaken for the revision it once named. The lists are fresh; the steps are shared and
    must not be changed.
    """
    key = None
    if job is not None and "created_at" in job.__dict__:
        key = (workflow.pk, workflow.job_id, job.pk, job.created_at)
        with _layouts_lock:
            cached = _layouts.get(key)
            if cached is not None:
                _layouts.move_to_end(key)
                return [list(entry) for entry in cached]
    steps = rows.select_models(
        Step,
        join=f"JOIN {_NODES} node ON node.step_id = {Step._meta.db_table}.id",
        where="node.workflow_id = %s",
        params=[workflow.pk],
        order_by="node.entry_index, node.position_in_entry",
        annotate={"entry_index": "node.entry_index"},
    )
    entries = entries_of(steps)  # type: ignore[type-var]  # each step carries its entry_index
    if key is not None and entries:
        with _layouts_lock:
            _layouts[key] = tuple(tuple(entry) for entry in entries)
            while len(_layouts) > LAYOUTS_KEPT:
                _layouts.popitem(last=False)
    return entries


def workflow_nodes(*, workflow_id: int) -> list[WorkflowStep]:
    """The workflow's nodes in entry order, each with its step's id, name and outputs."""
    return list(_ordered_nodes().filter(workflow_id=workflow_id).only(*_NODE_FIELDS))


@dataclass
class ProjectCatalog:
    project: Project
    jobs: list[Job]
    errors: list[JobLoadError]


def project_catalogs(
    *, projects: Sequence[Project], with_steps: bool = False
) -> list[ProjectCatalog]:
    """Each project's current jobs in catalog order, each with its workflows (and each
    workflow's nodes, for ``entries_of``), its steps if ``with_steps``, and the job folders
    that fail to load. Four queries, five with the steps."""
    catalogs = {project.pk: ProjectCatalog(project, [], []) for project in projects}
    prefetches = [
        Prefetch("workflows", queryset=Workflow.objects.order_by("position", "id")),
        Prefetch("workflows__nodes", queryset=_ordered_nodes().only(*_NODE_FIELDS)),
    ]
    if with_steps:
        prefetches.append(Prefetch("steps", queryset=Step.objects.order_by("position", "id")))
    jobs = (
        Job.objects.filter(project_id__in=catalogs, is_current=True)
        # The parsed definition and shared text are large and no list shows them.
        .defer("definition", "common_info")
        .prefetch_related(*prefetches)
        .order_by("project_id", "position", "id")
    )
    for job in jobs:
        catalogs[job.project_id].jobs.append(job)
    errors = JobLoadError.objects.filter(project_id__in=catalogs).order_by(
        "project_id", "position", "id"
    )
    for error in errors:
        catalogs[error.project_id].errors.append(error)
    return list(catalogs.values())


def job_names() -> list[str]:
    """Names of current jobs, for a sessions filter's suggestions (the catalog is small;
    a DISTINCT over every session would not be)."""
    return sorted(set(Job.objects.filter(is_current=True).values_list("name", flat=True)))
