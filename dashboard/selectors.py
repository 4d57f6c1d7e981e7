"""What the dashboard pages show: view models built from the shared reads
(``workflows.selectors``, ``reviews.selectors``), and the file viewer's reads.

Every page costs a constant number of queries whatever the number of rows: the shared reads
each cost a fixed number, and the view models join their rows up in Python.
"""

from __future__ import annotations

import errno
import os
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import BinaryIO

from reviews.models import HumanDecision, ReviewResult
from reviews.selectors import session_with_reviews
from workflows.errors import Forbidden, InvalidInput, NotFound
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
    SessionJob,
    StepRun,
    Workflow,
    WorkflowSession,
    WorkflowStep,
)
from workflows.roots import project_root_check
from workflows.selectors.catalog import ProjectCatalog, entries_of, workflow_nodes
from workflows.selectors.events import recent_events
from workflows.selectors.sessions import active_sessions, session_children
from workflows.services.step_changes import RunFiles, run_files

RECENT_EVENTS = 30
SESSION_EVENTS = 500
OVERVIEW_SESSIONS = 500
SESSIONS_PER_PAGE = 50
FILE_VIEW_BYTES = 256 * 1024
# Enough of a file to tell text from binary: a NUL byte in it means binary.
BINARY_SNIFF_BYTES = 8 * 1024

# What a step's box in the workflow picture shows, from its latest run's status.
NODE_STATUS: dict[str, str] = {
    StepRun.Status.ACTIVE: "current",
    StepRun.Status.COMPLETED: "done",
    StepRun.Status.INVALIDATED: "invalidated",
    StepRun.Status.ABORTED: "aborted",
}


# --- Overview -------------------------------------------------------------------------------


@dataclass
class StackNode:
    session: WorkflowSession
    active_runs: list[StepRun]
    children: list[StackNode] = field(default_factory=list)

    @property
    def current_steps(self) -> list[str]:
        """Every member of the current entry, not just the first one the session names."""
        return [run.step_id for run in self.active_runs] or [self.session.current_step_id]


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


def overview(*, event_limit: int = RECENT_EVENTS) -> Overview:
    """Every agent's active stack (sessions nested under their parents), and recent events."""
    active, truncated = active_sessions(limit=OVERVIEW_SESSIONS)

    stacks: list[AgentStack] = []
    nodes: dict[int, StackNode] = {}
    for row in active:
        session = row.session
        if not stacks or stacks[-1].agent.pk != session.agent_id:
            stacks.append(
                AgentStack(project=session.project, agent=session.agent, roots=[], size=0)
            )
        node = nodes[session.pk] = StackNode(session=session, active_runs=row.active_runs)
        parent = nodes.get(session.parent_id) if session.parent_id else None
        # A parent on another agent's stack or no longer active leaves this one a root.
        if parent is not None and parent.session.agent_id == session.agent_id:
            parent.children.append(node)
        else:
            stacks[-1].roots.append(node)
        stacks[-1].size += 1
    return Overview(
        stacks=stacks,
        events=recent_events(limit=event_limit),
        truncated=truncated,
        limit=OVERVIEW_SESSIONS,
    )


# --- Session page ---------------------------------------------------------------------------


@dataclass(frozen=True)
class OutputLink:
    name: str
    given: str
    view_path: str | None  # root-relative path for the file viewer; None if not viewable
    # A DeepWork 0.14 `string` output: the value itself, never a file.
    is_value: bool = False


@dataclass
class RunView:
    run: StepRun
    outputs: list[OutputLink]
    reviews: list[ReviewResult] = field(default_factory=list)
    decisions: list[HumanDecision] = field(default_factory=list)
    files: RunFiles | None = None


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
    # DeepWork 0.14: the jobs the session's conversation registered (register_session_job).
    session_jobs: list[SessionJob] = field(default_factory=list)

    @property
    def is_active(self) -> bool:
        return self.session.status == WorkflowSession.Status.ACTIVE


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


def _string_outputs(declared: list[dict]) -> frozenset[str]:
    return frozenset(o["name"] for o in declared if o.get("type") == "string")


def _output_links(
    roots: tuple[Path, ...],
    outputs: dict,
    declared: list[str] | None = None,
    strings: frozenset[str] = frozenset(),
) -> list[OutputLink]:
    """Links in the step's declared order (PostgreSQL's jsonb keeps no key order)."""
    rank = {name: i for i, name in enumerate(declared or [])}
    links = []
    for name in sorted(outputs, key=lambda name: (rank.get(name, len(rank)), name)):
        value = outputs[name]
        if name in strings:
            links.append(OutputLink(name, str(value), None, is_value=True))
            continue
        paths = value if isinstance(value, list) else [value]
        for given in paths:
            if isinstance(given, str):
                links.append(OutputLink(name, given, relative_output_path(roots, given)))
    return links


def session_detail(*, session_id: str) -> SessionDetail:
    """Everything the session page shows, in seven queries whatever the session's size."""
    session = session_with_reviews(session_id=session_id)
    roots = project_roots(session.project)
    children = session_children(session=session)
    nodes = workflow_nodes(workflow_id=session.workflow_id)
    events = recent_events(session=session, limit=SESSION_EVENTS + 1)
    events_truncated = len(events) > SESSION_EVENTS
    events = events[:SESSION_EVENTS][::-1]

    runs = list(session.runs.all())
    declared = {node.step.step_id: [o["name"] for o in node.step.outputs] for node in nodes}
    strings = {node.step.step_id: _string_outputs(node.step.outputs) for node in nodes}
    views = [
        RunView(
            run=run,
            outputs=_output_links(
                roots,
                run.outputs,
                declared.get(run.step_id),
                strings.get(run.step_id, frozenset()),
            ),
            reviews=list(run.reviews.all()),
            decisions=list(run.decisions.all()),
            files=run_files(run),
        )
        for run in runs
    ]
    latest: dict[str, StepRun] = {}
    for run in runs:
        latest[run.step_id] = run
    done = {run.step_id for run in runs if run.status == StepRun.Status.COMPLETED}
    return SessionDetail(
        session=session,
        children=children,
        entries=_entry_views(nodes, latest),
        runs=views,
        active_runs=[run for run in runs if run.status == StepRun.Status.ACTIVE],
        reviews=sorted((r for view in views for r in view.reviews), key=lambda r: r.pk),
        decisions=sorted((d for view in views for d in view.decisions), key=lambda d: d.pk),
        events=events,
        events_truncated=events_truncated,
        steps_done=len(done),
        steps_total=len(nodes),
        # One more query, for 0.14 sessions only.
        session_jobs=list(
            SessionJob.objects.filter(
                project_id=session.project_id, conversation_id=session.conversation_id
            ).order_by("job_name")
        )
        if session.generation == WorkflowSession.Generation.DEEPWORK_014
        else [],
    )


def _entry_views(nodes: list[WorkflowStep], latest: dict[str, StepRun]) -> list[EntryView]:
    """The workflow picture: each entry's steps with the status of their latest run
    (``pending`` for a step that has not run, and for every step of a catalog)."""
    views = []
    for index, entry in enumerate(entries_of(nodes)):
        members = []
        for node in entry:
            run = latest.get(node.step.step_id)
            status = NODE_STATUS.get(run.status, "pending") if run is not None else "pending"
            members.append(NodeView(node.step.step_id, node.step.name, status))
        views.append(EntryView(index, any(node.is_concurrent for node in entry), members))
    return views


# --- File viewer ----------------------------------------------------------------------------


@dataclass(frozen=True)
class OutputFile:
    path: str
    size: int
    text: str | None  # None for a binary file
    truncated: bool


def _recorded_paths(session: WorkflowSession, roots: tuple[Path, ...]) -> set[str]:
    recorded: set[str] = set()
    for outputs, declared in StepRun.objects.filter(session=session).values_list(
        "outputs", "step_def__outputs"
    ):
        # A `string` output's value is never a file the viewer may open.
        for link in _output_links(roots, outputs or {}, strings=_string_outputs(declared or [])):
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
    *, session: WorkflowSession, path: str, limit: int | None = None, unhosted: bool = False
) -> OutputFile:
    """An output file of ``session``, at most ``limit`` bytes of it.

    Only from a served project: never a removed one or one whose folder no project may be
    (``project_root_check``: the root, the server's data or home folder), and one a local
    stdio server registered but no person hosted only with ``unhosted`` (for a viewer who
    may host it anyway). ``Forbidden`` otherwise.

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
    _files_shown_check(session.project, unhosted=unhosted)
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


def _files_shown_check(project: Project, *, unhosted: bool) -> None:
    refusal = project.served_refusal()
    if refusal is not None and (project.removed_at is not None or not unhosted):
        raise Forbidden(f"{refusal}. Its files are not shown")
    try:
        project_root_check(Path(project.root_path))
    except InvalidInput:
        raise Forbidden(
            f"The folder of project {project.pk} is not one a project may be (the file "
            "system's root, or the server's data or home folder); its files are not shown"
        ) from None


def open_inside(root: Path, relative: PurePosixPath) -> BinaryIO:
    """The regular file ``root/relative``, no link followed anywhere, the root included.

    ``relative`` must come from a resolved path (see ``workflows.files.open_below``).
    """
    return open_below(root, relative)


# --- Jobs -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class WorkflowView:
    workflow: Workflow
    entries: list[EntryView]


@dataclass(frozen=True)
class JobView:
    job: Job
    workflows: list[WorkflowView]


@dataclass(frozen=True)
class CatalogView:
    project: Project
    jobs: list[JobView]
    errors: list[JobLoadError]


def catalog_view(catalog: ProjectCatalog) -> CatalogView:
    """A project's catalog as the jobs page lays it out (no query: all is prefetched)."""
    jobs = [
        JobView(
            job=job,
            workflows=[
                WorkflowView(workflow, _entry_views(list(workflow.nodes.all()), {}))
                for workflow in job.workflows.all()
            ],
        )
        for job in catalog.jobs
    ]
    return CatalogView(project=catalog.project, jobs=jobs, errors=catalog.errors)
