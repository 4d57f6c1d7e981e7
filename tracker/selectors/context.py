"""Reads of the tracker: ``get_context`` and the metrics of a finished workflow.

Every list is one keyset page (newest first, ``limit`` rows after a cursor), so the query
count of a context does not grow with the workflow; each list comes with its total count and
the cursor of its next page (``None`` on the last). Filters select tasks first (phase number,
agent, start time), then the logs of those tasks; ``since`` applies to the logs' own time too.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from django.contrib.auth import get_user_model
from django.db import connections, router
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import (
    Count,
    Field,
    Sum,
)
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from tracker.ids import not_found, wire_pk
from tracker.models import Decision, Issue, Milestone, Phase, Task, TrackedWorkflow
from workflows import limits
from workflows.errors import InvalidInput
from workflows.models import Agent, Project

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


# --- get_context in hand-written SQL ---------------------------------------------------------
# Building and compiling a queryset costs about half a millisecond of CPU per list, several
# times what the database takes to answer on a workflow of any size, and get_context reads up to
# six on every call; so its statements are written out here, portable between SQLite and
# PostgreSQL (no FILTER clause, booleans and LIMIT as both take them), and their rows decoded
# by hand into what the models would read (tests/tracker/test_context_sql.py holds
# every filter and value to the models' own).

WORKFLOW = TrackedWorkflow._meta.db_table
PHASE = Phase._meta.db_table
TASK = Task._meta.db_table
DECISION = Decision._meta.db_table
ISSUE = Issue._meta.db_table
MILESTONE = Milestone._meta.db_table
AGENT = Agent._meta.db_table
LOG_TABLES = {"decisions": DECISION, "milestones": MILESTONE}
# A log's task and who ran it (the task's agent_name, else its agent's id).
TASK_JOIN = f"JOIN {TASK} t ON t.id = {{a}}.task_id JOIN {AGENT} a ON a.id = t.agent_id"
WHO_COLUMNS = "{a}.task_id, t.name, t.agent_name, a.agent_id"


def _status_in(*statuses: str) -> str:
    """``t.status IN (...)`` for these (fixed) statuses, as literals."""
    return "t.status IN (" + ", ".join(f"'{s}'" for s in statuses) + ")"


PHASE_SUMMARY_SQL = (
    "SELECT p.id, p.number, p.name, p.status, p.started_at, p.completed_at, COUNT(t.id), "
    f"COUNT(CASE WHEN {_status_in(Task.Status.SUCCESS, Task.Status.PARTIAL_SUCCESS)} THEN 1 END), "
    f"COUNT(CASE WHEN {_status_in(Task.Status.FAILED)} THEN 1 END), "
    f"COUNT(CASE WHEN {_status_in(Task.Status.IN_PROGRESS)} THEN 1 END), "
    f"SUM(t.duration_ms) FROM {PHASE} p LEFT JOIN {TASK} t ON t.phase_id = p.id WHERE {{where}} "
    "GROUP BY p.id, p.number, p.name, p.status, p.started_at, p.completed_at ORDER BY p.number"
)
DECISIONS_SQL = (
    f"SELECT d.id, {WHO_COLUMNS.format(a='d')}, d.category, d.question, d.options_considered, "
    f"d.chosen, d.reasoning, d.trade_offs, d.created_at FROM {DECISION} d "
    f"{TASK_JOIN.format(a='d')}"
)
MILESTONES_SQL = (
    f"SELECT m.id, {WHO_COLUMNS.format(a='m')}, m.message, m.progress, m.metadata, m.created_at "
    f"FROM {MILESTONE} m {TASK_JOIN.format(a='m')}"
)
TASKS_SQL = (
    "SELECT t.id, t.phase_id, t.parent_id, t.name, t.goal, t.status, t.caller_type, "
    "t.agent_name, a.agent_id, t.summary, t.duration_ms, t.started_at, t.completed_at, "
    f"t.manual_review_needed, t.files_changed FROM {TASK} t JOIN {AGENT} a ON a.id = t.agent_id"
)


@functools.cache
def _issues_sql() -> str:
    """Both pages of issues in one query: each page's ids (with the row after it) as a
    subquery, the rows read once and told apart by whether they are resolved."""
    user = get_user_model()
    username = user._meta.get_field(user.USERNAME_FIELD)
    assert isinstance(username, Field)  # a concrete column, not a relation
    return (
        f"SELECT i.id, {WHO_COLUMNS.format(a='i')}, i.type, i.description, i.resolution, "
        f"i.created_at, i.human_resolution, u.{username.column}, i.resolved_at FROM {ISSUE} i "
        f"{TASK_JOIN.format(a='i')} LEFT JOIN {user._meta.db_table} u "
        f"ON u.{user._meta.pk.column} = i.resolved_by_id "
        f"WHERE i.id IN (SELECT x.id FROM {ISSUE} x WHERE {{open}} ORDER BY x.id DESC LIMIT %s) "
        f"OR i.id IN (SELECT y.id FROM {ISSUE} y WHERE {{resolved}} ORDER BY y.id DESC "
        "LIMIT %s) ORDER BY i.id DESC"
    )


@dataclass(frozen=True)
class _Select:
    """What a context selects, as SQL conditions on a table alias with their parameters."""

    workflow: int
    phase: int | None
    agent: str | None
    since: Any  # the ``since`` time as the database takes it, or None

    def tasks(self, alias: str) -> tuple[str, list[Any]]:
        """The filtered tasks of the workflow."""
        sql = [f"{alias}.workflow_id = %s"]
        params: list[Any] = [self.workflow]
        if self.phase is not None:
            sql.append(
                f"EXISTS (SELECT 1 FROM {PHASE} fp WHERE fp.id = {alias}.phase_id "
                "AND fp.number = %s)"
            )
            params.append(self.phase)
        if self.agent is not None:
            sql.append(
                f"({alias}.agent_name = %s OR ({alias}.agent_name = '' AND EXISTS (SELECT 1 "
                f"FROM {AGENT} fa WHERE fa.id = {alias}.agent_id AND fa.agent_id = %s)))"
            )
            params += [self.agent, self.agent]
        if self.since is not None:
            sql.append(f"{alias}.started_at >= %s")
            params.append(self.since)
        return " AND ".join(sql), params

    def logs(self, alias: str) -> tuple[str, list[Any]]:
        """The logs of the filtered tasks (any of the workflow's when neither a phase nor an
        agent is asked for) logged at or after ``since``."""
        sql = [f"{alias}.workflow_id = %s"]
        params: list[Any] = [self.workflow]
        if self.phase is not None or self.agent is not None:
            tasks, more = self.tasks("ft")
            sql.append(f"{alias}.task_id IN (SELECT ft.id FROM {TASK} ft WHERE {tasks})")
            params += more
        if self.since is not None:
            sql.append(f"{alias}.created_at >= %s")
            params.append(self.since)
        return " AND ".join(sql), params

    def rows(self, name: str, alias: str) -> tuple[str, str, list[Any]]:
        """The table of the list ``name`` and its conditions."""
        if name == "tasks":
            return (TASK, *self.tasks(alias))
        sql, params = self.logs(alias)
        if name == "blockers":
            sql += f" AND {alias}.requires_human_review AND {alias}.resolved_at IS NULL"
        elif name == "resolved_blockers":
            sql += f" AND {alias}.requires_human_review AND {alias}.resolved_at IS NOT NULL"
        return LOG_TABLES.get(name, ISSUE), sql, params

    def page(self, name: str, alias: str, cursors: Mapping[str, str]) -> tuple[str, list[Any]]:
        """The conditions of the list ``name`` below its cursor."""
        _table, sql, params = self.rows(name, alias)
        after = _cursor(name, cursors)
        if after is not None:
            sql += f" AND {alias}.id < %s"
            params.append(after)
        return sql, params


def _cut(rows: Sequence[Any], limit: int) -> tuple[Sequence[Any], str | None]:
    """A page's rows (read with the one after it, the id first) and the cursor of the next
    page, ``None`` on the last."""
    more = len(rows) > limit
    rows = rows[:limit]
    return rows, (str(rows[-1][0]) if more else None)


def _paged(
    db: Any,
    sql: str,
    select: _Select,
    name: str,
    alias: str,
    cursors: Mapping[str, str],
    limit: int,
) -> tuple[Sequence[Any], str | None]:
    where, params = select.page(name, alias, cursors)
    db.execute(f"{sql} WHERE {where} ORDER BY {alias}.id DESC LIMIT %s", [*params, limit + 1])
    return _cut(db.fetchall(), limit)


class _Decode:
    """Values as the ORM gives them: SQLite returns naive times (in the connection's zone),
    booleans as 0 and 1 and JSON as text; PostgreSQL (as Django sets psycopg up) aware times,
    booleans, and JSON as text too."""

    def __init__(self, connection: BaseDatabaseWrapper) -> None:
        self.zone = connection.timezone

    def iso(self, value: datetime | None) -> str | None:
        if value is None:
            return None
        if value.tzinfo is None:
            value = value.replace(tzinfo=self.zone)
        return value.isoformat()

    @staticmethod
    def json(value: Any) -> Any:
        if not isinstance(value, str):
            return value
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            return value  # as JSONField reads it


def _who(agent_name: str, agent_id: str) -> str:
    return str(agent_name or agent_id)


def _int(value: Any) -> int | None:
    # PostgreSQL sums bigints as numeric (Decimal); the ORM hands the sum out as an int.
    return None if value is None else int(value)


def _header(
    db: Any, project: Project, workflow_id: str, select: _Select, counted: Sequence[str]
) -> tuple[Sequence[Any], dict[str, int], bool]:
    """The workflow's header, the size of every list (a scalar subquery each) and whether
    the filter's phase exists: one query, however many lists. An unknown id is NotFound."""
    columns = ["w.id", "w.name", "w.status", "w.current_phase", "w.total_phases"]
    params: list[Any] = []
    for name in counted:
        table, where, more = select.rows(name, "c")
        columns.append(f"(SELECT COUNT(*) FROM {table} c WHERE {where})")
        params += more
    if select.phase is not None:
        columns.append(
            f"EXISTS (SELECT 1 FROM {PHASE} p WHERE p.workflow_id = %s AND p.number = %s)"
        )
        params += [select.workflow, select.phase]
    db.execute(
        f"SELECT {', '.join(columns)} FROM {WORKFLOW} w WHERE w.id = %s AND w.project_id = %s",
        [*params, select.workflow, project.pk],
    )
    row = db.fetchone()
    if row is None:
        raise not_found("workflow_id", workflow_id, "workflow")
    totals = dict(zip(counted, row[5 : 5 + len(counted)], strict=True))
    return row, totals, select.phase is None or bool(row[-1])


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
    """The ``get_context`` answer: the workflow's header, then each list asked for.
    One query for the header and the size of every list, then one per list (both pages of
    blockers in one): six at most, however long the lists."""
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
    pk = wire_pk(workflow_id)
    if pk is None:
        raise not_found("workflow_id", workflow_id, "workflow")
    connection = connections[router.db_for_read(Task)]
    select = _Select(
        workflow=pk,
        phase=phase,
        agent=agent,
        since=None if since_at is None else connection.ops.adapt_datetimefield_value(since_at),
    )
    decode = _Decode(connection)
    iso = decode.iso
    counted = [name for name in PAGED if name.removeprefix("resolved_") in include]
    with connection.cursor() as db:
        header, totals, phase_found = _header(db, project, workflow_id, select, counted)
        answer: dict[str, Any] = {
            "workflow_id": str(header[0]),
            "workflow_name": header[1],
            "workflow_status": header[2],
            "current_phase": header[3],
            "total_phases": header[4],
        }
        if phase is not None or agent is not None or since is not None:
            answer["filters_applied"] = {"phase": phase, "agent": agent, "since": since}
        if not phase_found:
            answer["warning"] = f"Phase {phase} not found in workflow"
            return answer

        if "phase_summary" in include:
            where, params = "p.workflow_id = %s", [pk]
            if phase is not None:
                where, params = f"{where} AND p.number = %s", [pk, phase]
            db.execute(PHASE_SUMMARY_SQL.format(where=where), params)
            # Phases are few (numbers 1-100), so this list is not paged.
            answer["phase_summary"] = [
                {
                    "phase_number": number,
                    "phase_name": name,
                    "phase_id": str(phase_pk),
                    "status": status,
                    "tasks": {
                        "total": total,
                        "completed": completed,
                        "failed": failed,
                        "in_progress": running,
                    },
                    "duration_seconds": _seconds(_int(task_ms)) or 0,
                    "started_at": iso(started_at),
                    "completed_at": iso(completed_at),
                }
                for (
                    phase_pk,
                    number,
                    name,
                    status,
                    started_at,
                    completed_at,
                    total,
                    completed,
                    failed,
                    running,
                    task_ms,
                ) in db.fetchall()
            ]
        if "decisions" in include:
            rows, following = _paged(db, DECISIONS_SQL, select, "decisions", "d", cursors, limit)
            answer["decisions"] = [
                {
                    "id": str(d[0]),
                    "task_id": str(d[1]),
                    "task_name": d[2],
                    "agent_name": _who(d[3], d[4]),
                    "category": d[5],
                    "question": d[6],
                    "options_considered": decode.json(d[7]),
                    "chosen": d[8],
                    "reasoning": d[9],
                    "trade_offs": d[10] or None,
                    "created_at": iso(d[11]),
                }
                for d in rows
            ]
            answer["decisions_count"] = totals["decisions"]
            answer["decisions_next_cursor"] = following
        if "milestones" in include:
            rows, following = _paged(db, MILESTONES_SQL, select, "milestones", "m", cursors, limit)
            answer["milestones"] = [
                {
                    "id": str(m[0]),
                    "task_id": str(m[1]),
                    "task_name": m[2],
                    "agent_name": _who(m[3], m[4]),
                    "message": m[5],
                    "progress": m[6],
                    "metadata": decode.json(m[7]),
                    "created_at": iso(m[8]),
                }
                for m in rows
            ]
            answer["milestones_count"] = totals["milestones"]
            answer["milestones_next_cursor"] = following
        if "blockers" in include:
            open_where, open_params = select.page("blockers", "x", cursors)
            resolved_where, resolved_params = select.page("resolved_blockers", "y", cursors)
            db.execute(
                _issues_sql().format(open=open_where, resolved=resolved_where),
                [*open_params, limit + 1, *resolved_params, limit + 1],
            )
            issue_rows = db.fetchall()
            rows, following = _cut([i for i in issue_rows if i[11] is None], limit)
            answer["blockers"] = [
                {
                    "id": str(i[0]),
                    "task_id": str(i[1]),
                    "task_name": i[2],
                    "agent_name": _who(i[3], i[4]),
                    "type": i[5],
                    "description": i[6],
                    "resolution": i[7],
                    "created_at": iso(i[8]),
                }
                for i in rows
            ]
            answer["blockers_count"] = totals["blockers"]
            answer["has_blockers"] = totals["blockers"] > 0
            answer["blockers_next_cursor"] = following
            rows, following = _cut([i for i in issue_rows if i[11] is not None], limit)
            answer["resolved_blockers"] = [
                {
                    "id": str(i[0]),
                    "task_id": str(i[1]),
                    "task_name": i[2],
                    "type": i[5],
                    "description": i[6],
                    "human_resolution": i[9],
                    "resolved_by": i[10],
                    "resolved_at": iso(i[11]),
                }
                for i in rows
            ]
            answer["resolved_blockers_count"] = totals["resolved_blockers"]
            answer["resolved_blockers_next_cursor"] = following
        if "tasks" in include:
            rows, following = _paged(db, TASKS_SQL, select, "tasks", "t", cursors, limit)
            answer["tasks"] = [
                {
                    "id": str(t[0]),
                    "phase_id": str(t[1]) if t[1] else None,
                    "parent_task_id": str(t[2]) if t[2] else None,
                    "name": t[3],
                    "goal": t[4],
                    "status": t[5],
                    "caller_type": t[6] or None,
                    "agent_name": _who(t[7], t[8]),
                    "summary": t[9] or None,
                    "duration_seconds": _seconds(t[10]),
                    "started_at": iso(t[11]),
                    "completed_at": iso(t[12]),
                    "manual_review_needed": bool(t[13]),
                    "files_changed": decode.json(t[14]) or None,
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
