"""The files each DeepWork step run changed: a snapshot when it starts, a comparison when it ends.

The rules are the tracker's (``workflows.changes``): commits, staged, unstaged and untracked
files, renames as a delete plus an add, files already dirty at the start and left alone not
reported, a content comparison outside git, warnings instead of errors.

Looking at the project costs a millisecond to tens of milliseconds (a ``git status`` of the
whole work tree), and git in trouble can take far longer, so the look runs outside the
transaction, on a thread of its own, and an answer waits for it only briefly:

* a transition commits first; its ``on_commit`` hands the session to one worker thread per
  process (``session_moved``), which, for that session, compares each step run that just
  finished with its start snapshot and, from the same look at the project
  (``changes_and_snapshot``), stores the start snapshot of the step runs that just began. What
  one step's comparison ends on is where the next step starts, so every change lands in exactly
  one step;
* the transition's answer waits for that look up to ``ANSWER_WAITS_SECONDS``: a look done by
  then leaves no gap between the answer and the look (a change the agent makes after reading
  the answer counts for the step that began), and its work stays out of the next call's way. A
  slower look goes on alone: a change made between the answer and the look counts for the step
  that finished, and the project's next answers do not wait while its looks stay that slow;
* when a step's hand-in is reviewed anyway (reviews take seconds, and the reviewer is given the
  list), the comparison runs inline before the reviews (``changes_for_review``); if they pass,
  it is the step's record and its end snapshot starts the next step (``record_reviewed``);
* nothing here ever fails a transition: git trouble becomes a warning on the step run, a lost
  or broken snapshot makes the run's files "unknown" with a warning saying why.

A process that exits with a look still queued waits a few seconds for it, then goes: the state
is in the database, so a run whose start snapshot was never stored reads "unknown" when it
finishes, and a finished run whose comparison never ran reads "unknown" after
``STALE_AFTER``.

Why one module of some 700 lines: what a run shows, the worker that looks after a transition
(and how long an answer waits for it) and the inline look before a review must agree on one
order of snapshots and records (each change lands in exactly one step), and that order is
easiest to check read in one place. The file comparison itself is ``workflows.changes``; the
first part to move out would be the worker, its queue and the answer's wait.
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import queue
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from contextlib import suppress
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any, TypeVar

from django.conf import settings
from django.db import close_old_connections, connection, connections, transaction
from django.utils import timezone

from workflows import changes, events, rows
from workflows.db import retrying_when_busy
from workflows.models import Agent, Event, Project, StepRun, WorkflowSession

logger = logging.getLogger(__name__)

T = TypeVar("T")

# How long an exiting process waits for the looks still queued.
EXIT_WAIT_SECONDS = 5.0
# How long a review waits for its step's start snapshot, still being taken, before going on.
REVIEW_WAIT_SECONDS = changes.GIT_TIMEOUT_SECONDS + 5
# A finished run whose comparison has not been stored after this long never will be: the
# process that should have stored it stopped.
STALE_AFTER = timedelta(seconds=2 * changes.GIT_TIMEOUT_SECONDS + 30)

NO_START_SNAPSHOT = (
    "no snapshot of the project was stored when this step started (the server stopped before "
    "taking it, or file tracking was off), so its file changes are unknown"
)
STOPPED_BEFORE_COMPARING = (
    "the server stopped before this step's file changes were computed, so they are unknown"
)
NOT_FINISHED = "the step did not finish ({status}), so its file changes were not computed"


def mode() -> str:
    """``DEEPWORK_STEP_FILES`` (a setting, else the environment): "on" (the default: looks run
    on the worker thread), "inline" (each look runs in the committing thread right after the
    commit, before the call returns: the test suite's mode, so event counts are deterministic)
    or "off" (no snapshots, no comparisons)."""
    value = getattr(settings, "DEEPWORK_STEP_FILES", None)
    if value is None:
        value = os.environ.get("DEEPWORK_STEP_FILES", "on")
    value = str(value).strip().lower()
    if value in ("off", "0", "false", "no"):
        return "off"
    return "inline" if value == "inline" else "on"


def enabled() -> bool:
    return mode() != "off"


# --- What a run shows ---------------------------------------------------------------------------


@dataclass(frozen=True)
class RunFiles:
    """A step run's files changed as readers see them (dashboard, REST API, reviewer).

    ``status``: "recorded" (the lists are complete, up to their warnings), "pending" (the step
    is running or its comparison is under way) or "unknown" (``warnings`` say why)."""

    status: str
    added: tuple[str, ...] = ()
    modified: tuple[str, ...] = ()
    deleted: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()

    @property
    def count(self) -> int:
        return len(self.added) + len(self.modified) + len(self.deleted)

    def as_dict(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "added": list(self.added),
            "modified": list(self.modified),
            "deleted": list(self.deleted),
            "warnings": list(self.warnings),
        }


def run_files(run: StepRun) -> RunFiles:
    """What is known of ``run``'s files changed, from its row alone (no query)."""
    warnings = tuple(run.files_warnings or ())
    if run.files_status == StepRun.FilesStatus.RECORDED:
        found = run.files_changed or {}
        return RunFiles(
            status="recorded",
            added=tuple(found.get("added", ())),
            modified=tuple(found.get("modified", ())),
            deleted=tuple(found.get("deleted", ())),
            warnings=warnings,
        )
    if run.files_status == StepRun.FilesStatus.UNKNOWN:
        return RunFiles(status="unknown", warnings=warnings)
    if run.status == StepRun.Status.ACTIVE:
        return RunFiles(status="pending")
    if run.status != StepRun.Status.COMPLETED:
        return RunFiles(status="unknown", warnings=(NOT_FINISHED.format(status=run.status),))
    if run.completed_at is not None and timezone.now() - run.completed_at > STALE_AFTER:
        return RunFiles(status="unknown", warnings=(STOPPED_BEFORE_COMPARING,))
    return RunFiles(status="pending")


# --- The worker ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Job:
    session_pk: int
    root: Path
    finished_entry: int | None = None  # the entry whose runs the transition completed
    began_entry: int | None = None  # the entry whose runs it started
    carry: changes.Snapshot | None = None  # the end snapshot of a reviewed hand-in
    done: threading.Event = field(default_factory=threading.Event)
    marker: bool = False  # no look: ``done`` tells that every job queued before it ran
    pending: list[Any] | None = None  # the session's pending runs, read by the transition
    queued: bool = False  # on the worker's queue (counted in ``_unfinished``), not inline


_jobs: queue.SimpleQueue[_Job] = queue.SimpleQueue()
_worker: threading.Thread | None = None
_worker_lock = threading.Lock()
# The latest job queued per session, to wait for before reading its start snapshots.
_latest: dict[int, _Job] = {}
# End snapshots of reviewed hand-ins, handed from their commit to the session's next job.
_carried: dict[int, changes.Snapshot] = {}


def _ensure_worker() -> None:
    global _worker
    if _worker is not None and _worker.is_alive():
        return
    with _worker_lock:
        if _worker is None or not _worker.is_alive():
            _worker = threading.Thread(target=_work_forever, name="step-files", daemon=True)
            _worker.start()
            atexit.register(drain, EXIT_WAIT_SECONDS)


# A worker idle this long gives its database connection back; during a burst of transitions
# it keeps it (opening one costs more than a look's queries).
IDLE_CLOSE_SECONDS = 2.0


# The worker's niceness (Linux, this thread and the git processes it starts): a look is
# background work, and on a machine with few cores it should wait for the calls being answered
# rather than take a core from them. An idle core still runs it at once.
WORKER_NICENESS = 10


def _lower_priority() -> None:
    with suppress(AttributeError, OSError):  # no per-thread priorities here: run as it is
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), WORKER_NICENESS)


def _work_forever() -> None:
    _lower_priority()
    while True:
        try:
            job = _jobs.get(timeout=IDLE_CLOSE_SECONDS)
        except queue.Empty:
            connections.close_all()  # this thread's connection only
            job = _jobs.get()
        if job.marker:
            # Whoever waits for the queue to drain (a test's end, the process's exit) also
            # gets the worker's connection back, so no database is kept busy by it.
            connections.close_all()
            job.done.set()
            continue
        try:
            close_old_connections()
            _run(job)
        finally:
            if _latest.get(job.session_pk) is job:
                _latest.pop(job.session_pk, None)


def _run(job: _Job) -> None:
    began = time.monotonic()
    try:
        _look(job)
    except Exception:  # neither the worker nor a committed transition may fail because of it
        logger.exception("Recording the files changed in session %s failed", job.session_pk)
    finally:
        _look_seconds[job.root] = time.monotonic() - began
        if job.queued:
            _finished_one()
        job.done.set()
        if _database_thread is not None:
            _database_thread.wake()


def session_moved(
    *,
    session: WorkflowSession,
    root: Path,
    finished_entry: int | None = None,
    began_entry: int | None = None,
) -> None:
    """After a transition of ``session`` commits: queue the look at the project that records
    the runs of ``finished_entry`` it completed and snapshots the runs of ``began_entry`` it
    started. Returns at once; call it inside the transition's transaction."""
    if not enabled():
        return
    session_pk = session.pk
    # When no earlier look at this session is still to run, nothing but this session's own
    # later transitions touches its runs' file columns before this look does: the runs it
    # needs are read now, with the transition's own statements, rather than on another trip
    # to the database thread. (The look's writes re-check the runs' status, so a later
    # transition that sent a run back or aborted it wins as it did.)
    previous = _latest.get(session_pk)
    pending = _pending_rows(session_pk) if previous is None or previous.done.is_set() else None
    transaction.on_commit(lambda: _queue(session_pk, root, finished_entry, began_entry, pending))


def _queue(
    session_pk: int,
    root: Path,
    finished_entry: int | None,
    began_entry: int | None,
    pending: list[Any] | None = None,
) -> None:
    inline = mode() == "inline"
    job = _Job(
        pending=pending,
        session_pk=session_pk,
        root=root,
        finished_entry=finished_entry,
        began_entry=began_entry,
        carry=_carried.pop(session_pk, None),
        queued=not inline,
    )
    if inline:
        _run(job)
        return
    _latest[session_pk] = job
    _ensure_worker()
    alone = _queued_one()
    _jobs.put(job)
    if alone:
        _settle(job)


# How long a transition's answer waits for the look it queued. A look that is done by then
# leaves no gap between the answer and the look, so a change the agent makes after reading the
# answer always counts for the step that began; a slower look (a big repository, git in
# trouble) goes on alone and the answer leaves at this deadline. An answer waits only when its
# look is the worker's only one: behind other sessions' looks (many agents at once, a hosted
# server) it would wait for theirs, so it goes at once, as it always did.
ANSWER_WAITS_SECONDS = 0.1
# Looks queued or running on the worker.
_unfinished = 0
_unfinished_lock = threading.Lock()


def _queued_one() -> bool:
    """Count a look handed to the worker; True when it is the only one there."""
    global _unfinished
    with _unfinished_lock:
        _unfinished += 1
        return _unfinished == 1


def _finished_one() -> None:
    global _unfinished
    with _unfinished_lock:
        _unfinished -= 1


# How long the latest look at each project root took: where it took longer than an answer
# waits, the next answers do not wait at all, so a project whose looks are slow costs each
# transition nothing rather than the whole wait.
_look_seconds: dict[Path, float] = {}


def _settle(job: _Job) -> None:
    """Wait (briefly, see ``ANSWER_WAITS_SECONDS``) for ``job``'s look before the transition
    answers: it then also stays out of the next call's way."""
    if _look_seconds.get(job.root, 0.0) > ANSWER_WAITS_SECONDS:
        return
    if _database_thread is None:
        job.done.wait(ANSWER_WAITS_SECONDS)
    else:
        # The database thread waiting here serves the look's queries meanwhile.
        _database_thread.wait(job.done, ANSWER_WAITS_SECONDS)


def drain(timeout: float | None = None) -> bool:
    """Wait until every look queued so far is done; False if ``timeout`` passed first."""
    if _worker is None or not _worker.is_alive():
        return True
    marker = _Job(session_pk=0, root=Path("/"), marker=True)
    _jobs.put(marker)
    return marker.done.wait(timeout)


def _wait_for(session_pk: int, timeout: float) -> None:
    job = _latest.get(session_pk)
    if job is None:
        return
    # The database thread waiting here runs the look's queries meanwhile.
    if _database_thread is None:
        done = job.done.wait(timeout)
    else:
        done = _database_thread.wait(job.done, timeout)
    if not done:
        logger.warning("The start snapshot of session %s is still being taken", session_pk)


@dataclass(frozen=True)
class _Run:
    pk: int
    step_id: str
    snapshot: Any
    # As the database gives them (text on SQLite, datetime on PostgreSQL): only compared with
    # each other and handed back to the database.
    started_at: Any
    completed_at: Any


# The session's runs still waiting for a snapshot or a record, and who owns the session: read
# after every transition, so written out (as the overlap query below).
_PENDING_SQL = (
    "SELECT r.id, r.status, r.entry_index, r.step_id, r.files_snapshot, r.started_at, "
    "r.completed_at, s.project_id, s.agent_id "
    f"FROM {StepRun._meta.db_table} r "
    f"JOIN {WorkflowSession._meta.db_table} s ON r.session_id = s.id "
    "WHERE r.session_id = %s AND r.files_status = %s"
)


def _json(value: Any) -> Any:
    # A JSON column comes back as text from a plain cursor (SQLite; PostgreSQL as Django
    # configures psycopg), or already decoded.
    return json.loads(value) if isinstance(value, str | bytes) else value


# A process that does all its database work on one thread (a stdio ``mcpserve``: one
# connection per agent) sets this (``mcp_bridge.dbthread.DatabaseThread``): the worker then
# hands its queries to that thread instead of opening a connection of its own.
_database_thread: Any = None


def use_database_thread(thread: Any) -> None:
    global _database_thread
    _database_thread = thread


def _db(fn: Callable[[], T]) -> T:
    return fn() if _database_thread is None else _database_thread.call(fn)


def _pending_rows(session_pk: int) -> list[Any]:
    with connection.cursor() as cursor:
        cursor.execute(_PENDING_SQL, [session_pk, StepRun.FilesStatus.PENDING.value])
        return cursor.fetchall()


def _look(job: _Job) -> None:
    pending = job.pending
    if pending is None:
        pending = _db(lambda: _pending_rows(job.session_pk))
    if not pending:
        return
    project_id, agent_id = pending[0][7], pending[0][8]
    # Only the runs this transition completed: one left pending by a process that stopped
    # would be compared with a project that has moved on since (it reads "unknown" instead).
    ended = sorted(
        (
            _Run(pk, step_id, _json(snapshot), started, completed)
            for pk, status, entry, step_id, snapshot, started, completed, _, _ in pending
            if status == StepRun.Status.COMPLETED and entry == job.finished_entry
        ),
        key=lambda run: run.pk,
    )
    # The runs it started, even if one has finished since (an agent quicker than this look):
    # its start is then this look, which comes before the look that compares it.
    began = [
        pk
        for pk, status, entry, _, snapshot, _, _, _, _ in pending
        if entry == job.began_entry
        and status in (StepRun.Status.ACTIVE, StepRun.Status.COMPLETED)
        and snapshot is None
    ]
    if not ended and not began:
        return
    after = job.carry
    found: dict[int, RunFiles] = {}
    # The members of a concurrent entry share one start snapshot: one comparison for them all.
    by_snapshot: dict[str, list[_Run]] = {}
    for run in ended:
        by_snapshot.setdefault(repr(run.snapshot), []).append(run)
    for runs in by_snapshot.values():
        outcome, look = _compare(job.root, runs[0].snapshot, want_snapshot=after is None)
        after = after or look
        for run in runs:
            found[run.pk] = outcome
    if began and after is None:
        after = changes.snapshot_take(root=job.root, watched=True)
    owners = (Project(pk=project_id), WorkflowSession(pk=job.session_pk), Agent(pk=agent_id))
    _db(retrying_when_busy(lambda: _store(owners, ended, found, began, after)))


def _compare(
    root: Path, stored: Any, *, want_snapshot: bool
) -> tuple[RunFiles, changes.Snapshot | None]:
    """The files changed since the stored start snapshot and, if wanted, a snapshot of now."""
    if stored is None:
        return RunFiles(status="unknown", warnings=(NO_START_SNAPSHOT,)), None
    try:
        snapshot = changes.Snapshot.from_json(stored)
    except ValueError as exc:
        warning = f"the step's start snapshot could not be read ({exc}), so its changes are unknown"
        return RunFiles(status="unknown", warnings=(warning,)), None
    if want_snapshot:
        result, look = changes.changes_and_snapshot(root=root, snapshot=snapshot, watched=True)
    else:
        result, look = changes.changes_since(root=root, snapshot=snapshot), None
    return _recorded(result), look


def _recorded(result: changes.FilesChanged) -> RunFiles:
    return RunFiles(
        status="recorded",
        added=tuple(result.added),
        modified=tuple(result.modified),
        deleted=tuple(result.deleted),
        warnings=tuple(result.warnings),
    )


# Other agents' step runs in the project that overlap a time window, written out: it runs after
# every finished step, and the ORM spends longer building it than the database answering it.
# A run is held by its DAG assignee, else by its session's agent, from when that agent got it
# (assignment, else its start) until it ended. A run with no end counts only while it is really
# live: active or assigned in a session still going. Runs sent back by go_to_step, DAG steps
# that never reached an agent, and runs of sessions that ended long ago are no one's work now.
#
# Two branches, each read through an index bounded by the window rather than by the project's
# history: runs that ended after the window opened (wf_steprun_ended_at_idx), and live runs of
# sessions still going (no end: wf_session_done_at_idx, as a session's end and its status go
# together by constraint). The unary plus keeps the planner off the project's session index,
# which would read every session the project ever had.
_ENDED = ", ".join(
    f"'{status}'"
    for status in (
        StepRun.Status.COMPLETED,
        StepRun.Status.ABORTED,
        StepRun.Status.FAILED,
        StepRun.Status.INVALIDATED,
    )
)
_HELD = f"'{StepRun.Status.ACTIVE}', '{StepRun.Status.ASSIGNED}'"
_GOING = f"'{WorkflowSession.Status.ACTIVE}', '{WorkflowSession.Status.RUNNING}'"
_RUNS, _SESSIONS = StepRun._meta.db_table, WorkflowSession._meta.db_table
_OTHERS_IN_WINDOW = (
    "+s.project_id = %s AND COALESCE(r.assigned_agent_id, s.agent_id) <> %s "
    "AND COALESCE(r.assigned_at, r.started_at) < %s"
)
_OVERLAP_SQL = (
    "SELECT a.agent_id, u.session_id, u.step_id FROM ("
    "SELECT r.id, r.step_id, s.session_id, COALESCE(r.assigned_agent_id, s.agent_id) AS holder "
    f"FROM {_RUNS} r JOIN {_SESSIONS} s ON s.id = r.session_id "
    f"WHERE r.completed_at > %s AND r.status IN ({_ENDED}) AND {_OTHERS_IN_WINDOW} "
    "UNION ALL "
    "SELECT r.id, r.step_id, s.session_id, COALESCE(r.assigned_agent_id, s.agent_id) "
    f"FROM {_SESSIONS} s JOIN {_RUNS} r ON r.session_id = s.id "
    f"WHERE s.completed_at IS NULL AND s.status IN ({_GOING}) AND r.completed_at IS NULL "
    f"AND r.status IN ({_HELD}) AND {_OTHERS_IN_WINDOW}"
    f") u JOIN {Agent._meta.db_table} a ON a.id = u.holder ORDER BY u.id LIMIT 10"
)


def _overlap_warnings(project_id: int, agent_id: int, ended: list[_Run]) -> dict[int, str]:
    """A warning for the finished runs (one entry: one time window) naming other agents'
    steps that ran in the same project meanwhile (an agent's own nested sessions are its
    work)."""
    now: Any = connection.ops.adapt_datetimefield_value(timezone.now())
    first = min(run.started_at for run in ended)
    last = max(now if run.completed_at is None else run.completed_at for run in ended)
    with connection.cursor() as cursor:
        window = [project_id, agent_id, last]
        cursor.execute(_OVERLAP_SQL, [first, *window, *window])
        names = [f"{agent}: {session}/{step}" for agent, session, step in cursor.fetchall()]
    if not names:
        return {}
    warning = (
        "other agents worked in this project at the same time, so some of these changes may "
        f"be theirs: {', '.join(names)}"
    )
    return {run.pk: warning for run in ended}


def _update(where: str, where_params: list[Any], **values: Any) -> int:
    """``UPDATE`` step runs ``WHERE <where>`` (written out: it runs after every transition)."""
    return rows.update_where(StepRun, values=values, where=where, params=where_params)


def _store(
    owners: tuple[Project, WorkflowSession, Agent],
    ended: list[_Run],
    found: Mapping[int, RunFiles],
    began: list[int],
    after: changes.Snapshot | None,
) -> None:
    """Write the look's findings: the finished runs' records (with a warning naming other
    agents' work in the same window) and the begun runs' start snapshot, in one trip to the
    database. Writes always go in a transaction: on SQLite that takes the write lock up front
    (IMMEDIATE) and waits for it, where a lone statement could fail at once on contention."""
    project, _, agent = owners
    with transaction.atomic():
        overlaps = _overlap_warnings(project.pk, agent.pk, ended) if ended else {}
        recorded = []
        for run in ended:
            outcome = found[run.pk]
            warnings = [*outcome.warnings, *([overlaps[run.pk]] if run.pk in overlaps else [])]
            # Only a run still waiting for its record gets it: a second look never overwrites.
            if _write_record(run.pk, outcome, warnings, finished=True):
                recorded.append((run.step_id, outcome, warnings))
        if began and after is not None:
            _write_start(began, after)
        if recorded:
            _announce(*owners, recorded)


_STARTED = (StepRun.Status.ACTIVE.value, StepRun.Status.COMPLETED.value)


def _write_start(began: list[int], after: changes.Snapshot) -> None:
    """The snapshot the runs that began start from; never replaces one already stored, and
    skips a run sent back or aborted before the look."""
    marks = ", ".join(["%s"] * len(began))
    _update(
        f"id IN ({marks}) AND files_snapshot IS NULL AND status IN (%s, %s)",
        [*began, *_STARTED],
        files_snapshot=after.to_json(),
    )


def _write_record(
    run_pk: int, outcome: RunFiles, warnings: list[str], *, finished: bool = False
) -> bool:
    """Store a run's files changed, unless it already has them; with ``finished``, only while
    the run is still the completed run the look compared (not sent back since)."""
    where = "id = %s AND files_status = %s"
    params: list[Any] = [run_pk, StepRun.FilesStatus.PENDING.value]
    if finished:
        where += " AND status = %s"
        params.append(StepRun.Status.COMPLETED.value)
    return bool(
        _update(
            where,
            params,
            files_status=outcome.status,
            files_changed=(
                {
                    "added": list(outcome.added),
                    "modified": list(outcome.modified),
                    "deleted": list(outcome.deleted),
                }
                if outcome.status == "recorded"
                else None
            ),
            files_warnings=warnings,
        )
    )


def _announce(
    project: Project,
    session: WorkflowSession,
    agent: Agent | None,
    recorded: Iterable[tuple[str, RunFiles, list[str]]],
) -> None:
    events.event_record_many(
        kind=Event.Kind.STEP_FILES_RECORDED,
        project=project,
        session=session,
        agent=agent,
        payloads=(
            events.StepFilesRecorded(
                step_id=step_id,
                status=outcome.status,
                added=len(outcome.added),
                modified=len(outcome.modified),
                deleted=len(outcome.deleted),
                warnings=len(warnings),
            )
            for step_id, outcome, warnings in recorded
        ),
    )


# --- Reviewed hand-ins --------------------------------------------------------------------------


@dataclass(frozen=True)
class ReviewedFiles:
    """The files changed by each step of a reviewed hand-in, looked at before the reviews."""

    by_step: dict[str, RunFiles]
    run_pks: dict[str, int]
    after: changes.Snapshot | None


def changes_for_review(
    *, session: WorkflowSession, run_pks: Mapping[str, int], root: Path
) -> ReviewedFiles | None:
    """Compare the hand-in's step runs with their start snapshots now, for the reviewer.

    Runs in the caller's thread, outside any transaction: the reviews that follow take far
    longer. Waits (at most ``REVIEW_WAIT_SECONDS``) for a start snapshot still being taken."""
    if not enabled() or not run_pks:
        return None
    _wait_for(session.pk, REVIEW_WAIT_SECONDS)
    stored = dict(
        StepRun.objects.filter(pk__in=run_pks.values()).values_list("pk", "files_snapshot")
    )
    by_step: dict[str, RunFiles] = {}
    after: changes.Snapshot | None = None
    seen: dict[str, RunFiles] = {}
    for step_id, pk in run_pks.items():
        key = repr(stored.get(pk))
        if key not in seen:
            seen[key], look = _compare(root, stored.get(pk), want_snapshot=after is None)
            after = after or look
        by_step[step_id] = seen[key]
    return ReviewedFiles(by_step=by_step, run_pks=dict(run_pks), after=after)


def record_reviewed(*, session: WorkflowSession, files: ReviewedFiles) -> None:
    """Inside the transaction that advances a reviewed hand-in: its look before the reviews is
    the record of its steps, and its end snapshot the start of the next ones."""
    recorded = []
    for step_id, outcome in files.by_step.items():
        if _write_record(files.run_pks[step_id], outcome, list(outcome.warnings)):
            recorded.append((step_id, outcome, list(outcome.warnings)))
    if recorded:
        _announce(session.project, session, session.agent, recorded)
    if files.after is not None:
        after, session_pk = files.after, session.pk
        # Registered before the advance's own on_commit (``session_moved``), so its job takes it.
        transaction.on_commit(lambda: _carried.__setitem__(session_pk, after))
