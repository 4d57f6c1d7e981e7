"""Reads behind the dashboard pages.

Every page costs a constant number of queries whatever the number of rows: related rows come
with ``select_related``, ``prefetch_related`` or one query per kind of row joined up in
Python, and per-session progress comes from correlated subqueries in the same SELECT.
"""

from __future__ import annotations

import datetime as dt
import errno
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import BinaryIO

from django.db.models import Count, IntegerField, OuterRef, Prefetch, Q, QuerySet, Subquery
from django.db.models.functions import Coalesce

from reviews.models import HumanDecision, ReviewResult
from workflows.errors import Conflict, InvalidInput, NotFound
from workflows.files import (
    NotRegularFile,
    OutsideProject,
    ProjectRootChanged,
    open_below,
    open_project_file,
)
from workflows.models import (
    Agent,
    Event,
    Job,
    JobLoadError,
    Project,
    StepRun,
    Workflow,
    WorkflowSession,
    WorkflowStep,
)

RECENT_EVENTS = 30
SESSION_EVENTS = 500
OVERVIEW_SESSIONS = 500
SESSIONS_PER_PAGE = 50
FILE_VIEW_BYTES = 256 * 1024
# Enough of a file to tell text from binary: a NUL byte in it means binary.
BINARY_SNIFF_BYTES = 8 * 1024

# What a step's box in the workflow picture shows, from its latest run's status.
NODE_STATUS = {
    StepRun.Status.ACTIVE: "current",
    StepRun.Status.COMPLETED: "done",
    StepRun.Status.INVALIDATED: "invalidated",
    StepRun.Status.ABORTED: "aborted",
}


def live_event_id() -> int:
    """The newest Event id, read *before* a page's other queries: an event committed while the
    page renders is then newer than the id the page hands the live socket, never lost."""
    newest = Event.objects.order_by("-id").values_list("id", flat=True).first()
    return newest or 0


def _with_progress(sessions: QuerySet[WorkflowSession]) -> QuerySet[WorkflowSession]:
    """Annotate ``steps_done`` (distinct steps with a completed run; invalidated and aborted
    runs do not count) and ``steps_total`` (the workflow's step nodes)."""
    total = (
        WorkflowStep.objects.filter(workflow=OuterRef("workflow_id"))
        .order_by()
        .values("workflow")
        .annotate(n=Count("pk"))
        .values("n")
    )
    done = (
        StepRun.objects.filter(session=OuterRef("pk"), status=StepRun.Status.COMPLETED)
        .order_by()
        .values("session")
        .annotate(n=Count("step_id", distinct=True))
        .values("n")
    )
    return sessions.annotate(
        steps_total=Coalesce(Subquery(total, output_field=IntegerField()), 0),
        steps_done=Coalesce(Subquery(done, output_field=IntegerField()), 0),
    )


# --- Overview -------------------------------------------------------------------------------


@dataclass
class StackNode:
    session: WorkflowSession
    children: list[StackNode] = field(default_factory=list)

    @property
    def current_steps(self) -> list[str]:
        """Every member of the current entry, not just the first one the session names."""
        return [run.step_id for run in self.session.active_runs] or [self.session.current_step_id]


@dataclass
class AgentStack:
    project: Project
    agent: Agent
    roots: list[StackNode]
    size: int


@dataclass
class Overview:
    stacks: list[AgentStack]
    events: list[Event]
    truncated: bool
    limit: int


def _recent_events(events: QuerySet[Event], limit: int) -> list[Event]:
    return list(
        events.select_related("project", "session", "agent")
        .only(
            "id",
            "kind",
            "payload",
            "created_at",
            "project__name",
            "session__session_id",
            "agent__agent_id",
        )
        .order_by("-id")[:limit]
    )


def overview(*, event_limit: int = RECENT_EVENTS) -> Overview:
    """Every agent's active stack (sessions nested under their parents), and recent events."""
    active = (
        _with_progress(
            WorkflowSession.objects.filter(status=WorkflowSession.Status.ACTIVE)
            .select_related("project", "agent")
            .only(
                "id",
                "session_id",
                "parent_id",
                "job_name",
                "workflow_name",
                "instance_id",
                "goal",
                "current_step_id",
                "started_at",
                "project__name",
                "project__root_path",
                "agent__agent_id",
                "workflow_id",
            )
        )
        .prefetch_related(
            Prefetch(
                "runs",
                queryset=StepRun.objects.filter(status=StepRun.Status.ACTIVE)
                .only("id", "session", "step_id")
                .order_by("id"),
                to_attr="active_runs",
            )
        )
        .order_by("project_id", "agent_id", "id")
    )
    sessions = list(active[: OVERVIEW_SESSIONS + 1])
    truncated = len(sessions) > OVERVIEW_SESSIONS
    sessions = sessions[:OVERVIEW_SESSIONS]

    stacks: list[AgentStack] = []
    nodes: dict[int, StackNode] = {}
    for session in sessions:
        if not stacks or stacks[-1].agent.pk != session.agent_id:
            stacks.append(
                AgentStack(project=session.project, agent=session.agent, roots=[], size=0)
            )
        node = nodes[session.pk] = StackNode(session=session)
        parent = nodes.get(session.parent_id) if session.parent_id else None
        # A parent on another agent's stack or no longer active leaves this one a root.
        if parent is not None and parent.session.agent_id == session.agent_id:
            parent.children.append(node)
        else:
            stacks[-1].roots.append(node)
        stacks[-1].size += 1
    return Overview(
        stacks=stacks,
        events=_recent_events(Event.objects.all(), event_limit),
        truncated=truncated,
        limit=OVERVIEW_SESSIONS,
    )


# --- Session page ---------------------------------------------------------------------------


@dataclass(frozen=True)
class OutputLink:
    name: str
    given: str
    view_path: str | None  # root-relative path for the file viewer; None if not viewable


@dataclass
class RunView:
    run: StepRun
    outputs: list[OutputLink]
    reviews: list[ReviewResult] = field(default_factory=list)
    decisions: list[HumanDecision] = field(default_factory=list)


@dataclass(frozen=True)
class NodeView:
    step_id: str
    name: str
    status: str  # done, current, pending, invalidated, aborted


@dataclass(frozen=True)
class EntryView:
    index: int
    concurrent: bool
    nodes: list[NodeView]


@dataclass
class SessionDetail:
    session: WorkflowSession
    children: list[WorkflowSession]
    entries: list[EntryView]
    runs: list[RunView]
    active_runs: list[StepRun]
    reviews: list[ReviewResult]
    decisions: list[HumanDecision]
    events: list[Event]
    events_truncated: bool
    steps_done: int
    steps_total: int

    @property
    def is_active(self) -> bool:
        return self.session.status == WorkflowSession.Status.ACTIVE


def session_get(*, session_id: str) -> WorkflowSession:
    """The session with its project and agent, or ``NotFound``."""
    session = (
        WorkflowSession.objects.select_related("project", "agent")
        .filter(session_id=session_id)
        .first()
    )
    if session is None:
        raise NotFound(f"Session '{session_id}' not found")
    return session


def project_roots(project: Project) -> tuple[Path, ...]:
    """The project root as recorded (stored resolved), the only root files are served from.

    Never the root as it resolves now: the folder may have been swapped for a link (to ``/``,
    say), and the viewer would then serve whatever the link points at (issue 9, defect 1).
    """
    return (Path(project.root_path),)


def relative_output_path(roots: tuple[Path, ...], given: str) -> str | None:
    """The root-relative form of a recorded output path, or None if it points outside the
    root (outputs were checked on hand-in, but the project may have moved since)."""
    if not given or "\x00" in given:
        return None
    for root in roots:
        candidate = Path(os.path.normpath(root / given))  # an absolute ``given`` replaces root
        if candidate.is_relative_to(root):
            relative = candidate.relative_to(root).as_posix()
            return None if relative == "." else relative
    return None


def _output_links(
    roots: tuple[Path, ...], outputs: dict, declared: list[str] | None = None
) -> list[OutputLink]:
    """Links in the step's declared order (PostgreSQL's jsonb keeps no key order)."""
    rank = {name: i for i, name in enumerate(declared or [])}
    links = []
    for name in sorted(outputs, key=lambda name: (rank.get(name, len(rank)), name)):
        value = outputs[name]
        paths = value if isinstance(value, list) else [value]
        for given in paths:
            if isinstance(given, str):
                links.append(OutputLink(name, given, relative_output_path(roots, given)))
    return links


def session_detail(*, session_id: str) -> SessionDetail:
    """Everything the session page shows, in seven queries whatever the session's size."""
    session = (
        WorkflowSession.objects.select_related("project", "agent", "parent", "workflow", "job")
        .defer("job__definition", "job__common_info")
        .filter(session_id=session_id)
        .first()
    )
    if session is None:
        raise NotFound(f"Session '{session_id}' not found")
    roots = project_roots(session.project)
    children = list(
        session.children.only(
            "id", "parent", "session_id", "job_name", "workflow_name", "status"
        ).order_by("id")
    )
    nodes = list(
        WorkflowStep.objects.filter(workflow_id=session.workflow_id)
        .select_related("step")
        .only(
            "entry_index",
            "position_in_entry",
            "is_concurrent",
            "step__step_id",
            "step__name",
            "step__outputs",
        )
        .order_by("entry_index", "position_in_entry")
    )
    runs = list(StepRun.objects.filter(session=session).order_by("id"))
    reviews = list(ReviewResult.objects.filter(session=session).order_by("id"))
    decisions = list(
        HumanDecision.objects.filter(step_run__session=session)
        .select_related("step_run")
        .only(
            "id",
            "kind",
            "decided_by_name",
            "reason",
            "created_at",
            "consumed_at",
            "step_run",
            "step_run__step_id",
        )
        .order_by("id")
    )
    events = _recent_events(Event.objects.filter(session=session), SESSION_EVENTS + 1)
    events_truncated = len(events) > SESSION_EVENTS
    events = events[:SESSION_EVENTS][::-1]

    declared = {node.step.step_id: [o["name"] for o in node.step.outputs] for node in nodes}
    views = {
        run.pk: RunView(
            run=run, outputs=_output_links(roots, run.outputs, declared.get(run.step_id))
        )
        for run in runs
    }
    for review in reviews:
        views[review.step_run_id].reviews.append(review)
    for decision in decisions:
        views[decision.step_run_id].decisions.append(decision)

    latest: dict[str, StepRun] = {}
    for run in runs:
        latest[run.step_id] = run
    entries: list[EntryView] = []
    for node in nodes:
        if not entries or entries[-1].index != node.entry_index:
            entries.append(EntryView(node.entry_index, node.is_concurrent, []))
        run = latest.get(node.step.step_id)
        status = NODE_STATUS.get(run.status, "pending") if run is not None else "pending"
        entries[-1].nodes.append(NodeView(node.step.step_id, node.step.name, status))

    done = {run.step_id for run in runs if run.status == StepRun.Status.COMPLETED}
    return SessionDetail(
        session=session,
        children=children,
        entries=entries,
        runs=list(views.values()),
        active_runs=[run for run in runs if run.status == StepRun.Status.ACTIVE],
        reviews=reviews,
        decisions=decisions,
        events=events,
        events_truncated=events_truncated,
        steps_done=len(done),
        steps_total=len(nodes),
    )


def session_current_run(*, session: WorkflowSession, step_id: str) -> StepRun:
    """The session's live run of ``step_id``: the one a person's ruling applies to."""
    run = (
        StepRun.objects.filter(session=session, step_id=step_id, status=StepRun.Status.ACTIVE)
        .order_by("-id")
        .first()
    )
    if run is not None:
        return run
    if session.status != WorkflowSession.Status.ACTIVE:
        raise Conflict(f"Session '{session.session_id}' is {session.status}; it cannot change")
    raise Conflict(
        f"Step '{step_id}' is not the current step of session '{session.session_id}' (it is "
        f"now '{session.current_step_id}'); nothing was changed"
    )


# --- File viewer ----------------------------------------------------------------------------


@dataclass(frozen=True)
class OutputFile:
    path: str
    size: int
    text: str | None  # None for a binary file
    truncated: bool


def _recorded_paths(session: WorkflowSession, roots: tuple[Path, ...]) -> set[str]:
    recorded: set[str] = set()
    for outputs in StepRun.objects.filter(session=session).values_list("outputs", flat=True):
        for link in _output_links(roots, outputs or {}):
            if link.view_path is not None:
                recorded.add(link.view_path)
    return recorded


def _decode(data: bytes, truncated: bool) -> str | None:
    if b"\x00" in data[:BINARY_SNIFF_BYTES]:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        # The size cap may cut a multi-byte character in two; anything else is not UTF-8 text.
        if truncated and exc.start >= len(data) - 3:
            return data[: exc.start].decode("utf-8")
        return None


def session_output_file(
    *, session: WorkflowSession, path: str, limit: int | None = None
) -> OutputFile:
    """An output file of ``session``, at most ``limit`` bytes of it.

    Only a path the session recorded as an output, inside the project root after resolving
    symbolic links, is read, and only if it is a regular file: a pipe is refused without waiting
    for a writer (a blocked read would hold the thread every synchronous view shares under
    ASGI). ``InvalidInput`` for a malformed path, ``NotFound`` for anything else, including any
    ``OSError`` while opening or reading.
    """
    limit = limit or FILE_VIEW_BYTES
    if not path or not path.strip():
        raise InvalidInput("Give the file's path relative to the project root: ?path=notes.md")
    if "\x00" in path:
        raise InvalidInput("The path contains a NUL byte")
    requested = PurePosixPath(path)
    if requested.is_absolute() or path.startswith("\\"):
        raise InvalidInput(
            f"'{path}' is an absolute path; give the path relative to the project root"
        )
    if ".." in requested.parts:
        raise InvalidInput(f"'{path}' contains '..'; give the path relative to the project root")
    wanted = requested.as_posix()
    roots = project_roots(session.project)
    root = roots[0]
    if wanted not in _recorded_paths(session, roots):
        raise NotFound(f"'{path}' is not an output of session '{session.session_id}'")
    try:
        with open_project_file(root=root, relative=wanted) as handle:
            size = os.fstat(handle.fileno()).st_size
            data = handle.read(limit + 1)
    except ProjectRootChanged:
        raise NotFound(
            f"The project folder {root} is no longer the directory recorded for this project "
            "(a symbolic link or another file took its place); its files are not shown"
        ) from None
    except OutsideProject:
        raise NotFound(
            f"'{path}' is a symbolic link to a file outside the project root; it is not shown"
        ) from None
    except FileNotFoundError:
        raise NotFound(f"'{path}' no longer exists in the project") from None
    except NotRegularFile as exc:
        raise NotFound(
            f"'{path}' is not a regular file (it is {exc.kind}); it is not shown"
        ) from None
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise NotFound(
                f"'{path}' changed while it was being opened (a symbolic link or a file took the "
                "place of part of its path); it is not shown"
            ) from None
        raise NotFound(f"'{path}' cannot be read: {exc.strerror or exc}") from None
    truncated = len(data) > limit
    data = data[:limit]
    return OutputFile(path=wanted, size=size, text=_decode(data, truncated), truncated=truncated)


def open_inside(root: Path, relative: PurePosixPath) -> BinaryIO:
    """The regular file ``root/relative``, no link followed anywhere, the root included.

    ``relative`` must come from a resolved path (see ``workflows.files.open_below``).
    """
    return open_below(root, relative)


# --- Jobs -----------------------------------------------------------------------------------


@dataclass
class ProjectCatalog:
    project: Project
    jobs: list[Job]
    errors: list[JobLoadError]


def workflow_entries_of(nodes: Iterable[WorkflowStep]) -> list[EntryView]:
    """Group a workflow's ordered nodes into entries (for the catalog, all pending)."""
    entries: list[EntryView] = []
    for node in nodes:
        if not entries or entries[-1].index != node.entry_index:
            entries.append(EntryView(node.entry_index, node.is_concurrent, []))
        entries[-1].nodes.append(NodeView(node.step.step_id, node.step.name, "pending"))
    return entries


def projects() -> list[Project]:
    return list(Project.objects.only("id", "name", "root_path").order_by("name", "id"))


def jobs_catalog(*, project_id: int | None = None) -> list[ProjectCatalog]:
    """Each project's current jobs in catalog order with workflows and steps, and the job
    folders that fail to load. Five queries whatever the catalog's size."""
    project_rows = Project.objects.order_by("name", "id")
    if project_id is not None:
        project_rows = project_rows.filter(pk=project_id)
    catalogs = {project.pk: ProjectCatalog(project, [], []) for project in project_rows}
    nodes = WorkflowStep.objects.select_related("step").only(
        "workflow_id",
        "entry_index",
        "position_in_entry",
        "is_concurrent",
        "step__step_id",
        "step__name",
    )
    jobs = (
        Job.objects.filter(project_id__in=catalogs, is_current=True)
        .defer("definition", "common_info")
        .prefetch_related(
            Prefetch(
                "workflows",
                queryset=Workflow.objects.order_by("position").prefetch_related(
                    Prefetch(
                        "nodes",
                        queryset=nodes.order_by("entry_index", "position_in_entry"),
                        to_attr="ordered_nodes",
                    )
                ),
                to_attr="ordered_workflows",
            )
        )
        .order_by("project_id", "position")
    )
    for job in jobs:
        for workflow in job.ordered_workflows:
            workflow.entries = workflow_entries_of(workflow.ordered_nodes)
        catalogs[job.project_id].jobs.append(job)
    for error in JobLoadError.objects.filter(project_id__in=catalogs).order_by(
        "project_id", "position"
    ):
        catalogs[error.project_id].errors.append(error)
    return list(catalogs.values())


# --- Sessions list --------------------------------------------------------------------------


@dataclass(frozen=True)
class SessionFilters:
    project_id: int | None = None
    job_name: str = ""
    status: str = ""
    agent_id: str = ""
    started_from: dt.date | None = None
    started_to: dt.date | None = None


@dataclass
class SessionPage:
    sessions: list[WorkflowSession]
    newer: int | None  # pass as ?after= to page towards newer sessions
    older: int | None  # pass as ?before= to page towards older sessions


def _start_of_day(day: dt.date) -> dt.datetime:
    return dt.datetime.combine(day, dt.time.min, tzinfo=dt.UTC)


def session_page(
    *,
    filters: SessionFilters,
    before: int | None = None,
    after: int | None = None,
    per_page: int | None = None,
) -> SessionPage:
    """One page of sessions, newest first, by keyset: no OFFSET and no COUNT(*), so the cost
    of a page does not grow with the table. ``before``/``after`` name the session (pk) the
    page continues from; the cursor is (started_at, pk)."""
    sessions = WorkflowSession.objects.all()
    if filters.project_id is not None:
        sessions = sessions.filter(project_id=filters.project_id)
    if filters.job_name:
        sessions = sessions.filter(job_name=filters.job_name)
    if filters.status:
        sessions = sessions.filter(status=filters.status)
    if filters.agent_id:
        sessions = sessions.filter(agent__agent_id=filters.agent_id)
    if filters.started_from is not None:
        sessions = sessions.filter(started_at__gte=_start_of_day(filters.started_from))
    if filters.started_to is not None:
        end = _start_of_day(filters.started_to + dt.timedelta(days=1))
        sessions = sessions.filter(started_at__lt=end)

    per_page = per_page or SESSIONS_PER_PAGE
    cursor = before if before is not None else after
    if cursor is not None:
        # The cursor row's start time, inside the same query (no extra round trip).
        started = Subquery(WorkflowSession.objects.filter(pk=cursor).values("started_at")[:1])
        # The redundant bound lets the database start its index scan at the cursor instead of
        # filtering its way there (Django has no row-value comparison to say it directly).
        if before is not None:
            sessions = sessions.filter(
                Q(started_at__lte=started), Q(started_at__lt=started) | Q(pk__lt=cursor)
            )
        else:
            sessions = sessions.filter(
                Q(started_at__gte=started), Q(started_at__gt=started) | Q(pk__gt=cursor)
            )
    towards_newer = before is None and after is not None
    ordering = ("started_at", "id") if towards_newer else ("-started_at", "-id")
    rows = list(
        _with_progress(sessions)
        .select_related("project", "agent")
        .only(
            "id",
            "session_id",
            "job_name",
            "workflow_name",
            "instance_id",
            "goal",
            "status",
            "current_step_id",
            "started_at",
            "completed_at",
            "aborted_by",
            "project__name",
            "agent__agent_id",
            "workflow_id",
        )
        .order_by(*ordering)[: per_page + 1]
    )
    more = len(rows) > per_page
    rows = rows[:per_page]
    if towards_newer:
        rows.reverse()
        newer = rows[0].pk if more and rows else None
        older = rows[-1].pk if rows else None
    else:
        newer = rows[0].pk if cursor is not None and rows else None
        older = rows[-1].pk if more else None
    return SessionPage(sessions=rows, newer=newer, older=older)


def job_names() -> list[str]:
    """Names of current jobs, for the sessions filter's suggestions (the catalog is small;
    a DISTINCT over every session would not be)."""
    return sorted(set(Job.objects.filter(is_current=True).values_list("name", flat=True)))
