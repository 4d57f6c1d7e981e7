"""Every insight as a table: the one shape the dashboard's data tables, its CSV and JSON
exports and the REST API (``/api/insights/<name>``) all read, so they cannot disagree.

Each insight computes its figures (``compute``, the queries) and lays them out
(``table``, no query); the dashboard draws its charts from the same figures.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from insights import dag, reviews
from insights import selectors as work
from insights import tracker as tracked
from insights.filters import InsightFilter
from insights.percentiles import Percentiles


@dataclass(frozen=True)
class InsightTable:
    name: str
    title: str
    columns: list[str]
    rows: list[list[Any]]
    notes: list[str] = field(default_factory=list)

    def as_json(self, filters: InsightFilter) -> dict[str, Any]:
        data = asdict(self)
        data["notes"] = [*filters.notes, *self.notes]
        data["filters"] = filter_dict(filters)
        return data

    def as_csv(self) -> str:
        return csv_text(self.columns, self.rows)


# A spreadsheet program opening a CSV runs a cell that starts with one of these as a formula
# (``=HYPERLINK(...)``, ``@SUM(...)``, ``-2+3``, and after a tab or carriage return in some
# programs); the full-width forms are read as the same by some of them. Agent ids, criteria
# and blocker texts are chosen by whoever drives the server, so such a cell is written with
# a leading ``'``, which spreadsheets take as "text" and do not show.
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r", "\uff1d", "\uff0b", "\uff0d", "\uff20")


def spreadsheet_safe(cell: Any) -> Any:
    """``cell`` as a CSV may hold it: text that a spreadsheet would run as a formula gets a
    leading ``'``. Numbers stay numbers (a negative figure is a figure, not a formula), so
    only text is changed."""
    if isinstance(cell, str) and cell.startswith(FORMULA_STARTS):
        return "'" + cell
    return cell


def csv_text(columns: list[str], rows: list[list[Any]]) -> str:
    """The one CSV writer of the product: a header row, then one line per row, every text
    cell made spreadsheet-safe."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\r\n")
    writer.writerow([spreadsheet_safe(c) for c in columns])
    writer.writerows([spreadsheet_safe(c) for c in row] for row in rows)
    return out.getvalue()


def filter_dict(filters: InsightFilter) -> dict[str, Any]:
    return {
        "since": filters.since.isoformat(),
        "until": filters.until.isoformat(),
        "project": filters.project_id,
        "job": filters.job,
        "workflow": filters.workflow,
        "agent": filters.agent_id,
        "dialect": filters.dialect,
    }


def _round(value: float | None, places: int = 3) -> float | None:
    return None if value is None else round(value, places)


# --- Each insight's figures and table -------------------------------------------------------


def sessions_table(days: list[work.DayOutcomes]) -> InsightTable:
    return InsightTable(
        "sessions-per-day",
        "Sessions started per day, by outcome",
        ["day", "started", "completed", "aborted", "active"],
        [[d.day.isoformat(), d.started, d.completed, d.aborted, d.active] for d in days],
    )


@dataclass(frozen=True)
class StepTimes:
    choice: work.WorkflowChoice | None
    times: list[work.StepTime]


def step_times(filters: InsightFilter) -> StepTimes:
    choice = work.busiest_workflow(filters=filters)
    if choice is None:
        return StepTimes(None, [])
    return StepTimes(choice, work.step_times(filters=filters, choice=choice))


def step_times_table(data: StepTimes) -> InsightTable:
    notes = []
    if data.choice is not None:
        notes.append(f"Workflow {data.choice.job}/{data.choice.workflow}")
    if any(t.approximate for t in data.times):
        notes.append(
            f"Over {work.EXACT_STEP_TIMES_LIMIT:,} runs: median and p90 from 2% duration "
            "buckets, each within 1% of the exact figure"
        )
    return InsightTable(
        "step-times",
        "Time per step (seconds, from the step becoming current to its completion)",
        ["step", "entry", "runs", "median_seconds", "p90_seconds"],
        [
            [t.step_id, t.entry_index, t.runs, _round(t.median_seconds), _round(t.p90_seconds)]
            for t in data.times
        ],
        notes,
    )


@dataclass(frozen=True)
class AllWaits:
    reviews: reviews.Waits
    blockers: Percentiles | None


def waits(filters: InsightFilter) -> AllWaits:
    return AllWaits(reviews.waits(filters=filters), tracked.blocker_waits(filters=filters))


WAIT_LABELS = {
    "reviewer": "A reviewer's verdict",
    "person": "A person's ruling on a review",
    "blocker": "A person's answer to a blocker",
}


def wait_rows(data: AllWaits) -> list[tuple[str, Percentiles | None]]:
    return [
        ("reviewer", data.reviews.reviewer),
        ("person", data.reviews.person),
        ("blocker", data.blockers),
    ]


def waits_table(data: AllWaits) -> InsightTable:
    return InsightTable(
        "waits",
        "Time waiting on reviews and on people (seconds)",
        ["waiting_on", "count", "median_seconds", "p90_seconds"],
        [
            [
                WAIT_LABELS[key],
                p.count if p else 0,
                _round(p.median) if p else None,
                _round(p.p90) if p else None,
            ]
            for key, p in wait_rows(data)
        ],
    )


def pass_rates_table(rates: list[reviews.ReviewPassRate]) -> InsightTable:
    return InsightTable(
        "review-pass-rates",
        "Review pass rate per review",
        ["step", "review", "reviews", "passed", "pass_rate"],
        [[r.step_id, r.run_each, r.reviews, r.passed, _round(r.rate)] for r in rates],
    )


def criteria_table(data: reviews.CriteriaInsights) -> InsightTable:
    notes = []
    if data.sampled:
        notes.append(f"From the newest {data.reviews_read} reviews in the range")
    return InsightTable(
        "criteria",
        "Pass rate per criterion, most failed first",
        ["criterion", "results", "passed", "failed", "pass_rate", "sample_feedback"],
        [
            [
                c.criterion,
                c.results,
                c.passed,
                c.failed,
                _round(c.rate),
                " | ".join(s.feedback for s in c.samples),
            ]
            for c in data.criteria
        ],
        notes,
    )


def attempts_table(steps: list[reviews.StepAttempts]) -> InsightTable:
    top = max((len(s.runs_by_rounds) for s in steps), default=1)
    return InsightTable(
        "attempts",
        "Review rounds per step run",
        ["step", "runs", *(f"runs_with_{k}_rounds" for k in range(1, top + 1))],
        [
            [s.step_id, s.runs, *s.runs_by_rounds, *([0] * (top - len(s.runs_by_rounds)))]
            for s in steps
        ],
    )


def rulings_table(people: list[reviews.PersonRulings]) -> InsightTable:
    return InsightTable(
        "rulings",
        "Rulings by people",
        ["person", "overrides", "changes_requested", "total"],
        [[p.person, p.overrides, p.changes_requested, p.total] for p in people],
    )


def agents_table(agents: list[work.AgentActivity]) -> InsightTable:
    return InsightTable(
        "agents",
        "Per agent: steps finished, failed review rounds and aborted sessions",
        ["agent", "steps_finished", "failed_review_rounds", "aborted_sessions"],
        [[a.agent_id, a.steps, a.failed_reviews, a.aborts] for a in agents],
    )


def agent_days_table(agents: list[work.AgentActivity], filters: InsightFilter) -> InsightTable:
    return InsightTable(
        "agent-steps-per-day",
        "Steps finished per day, per agent",
        ["day", *(a.agent_id for a in agents)],
        [
            [day.isoformat(), *(a.steps_per_day[n] for a in agents)]
            for n, day in enumerate(filters.days)
        ],
    )


def tracker_files_table(data: tracked.TrackerInsights) -> InsightTable:
    notes = ["Sampled: the newest tasks only"] if data.files_sampled else []
    return InsightTable(
        "tracker-files",
        "Tracker: tasks completed and files they changed, per day",
        ["day", "tasks", "added", "modified", "deleted"],
        [[d.day.isoformat(), d.tasks, d.added, d.modified, d.deleted] for d in data.days],
        notes,
    )


def tracker_decisions_table(data: tracked.TrackerInsights) -> InsightTable:
    return InsightTable(
        "tracker-decisions",
        "Tracker: decisions per category",
        ["category", "decisions"],
        [[category, n] for category, n in data.decisions],
    )


def tracker_blockers_table(data: tracked.TrackerInsights) -> InsightTable:
    notes = []
    if data.open_blocker_count > len(data.open_blockers):
        notes.append(f"The oldest {len(data.open_blockers)} of {data.open_blocker_count}")
    return InsightTable(
        "tracker-blockers",
        "Tracker: blockers open now, oldest first",
        ["issue", "workflow", "type", "description", "raised_at", "age_hours"],
        [
            [
                b.issue_id,
                b.workflow_name,
                b.type,
                b.description,
                b.created_at.isoformat(),
                _round(b.age_seconds / 3600, 2),
            ]
            for b in data.open_blockers
        ],
        notes,
    )


def handoffs_table(waits: list[dag.HandoffWait]) -> InsightTable:
    return InsightTable(
        "dag-handoffs",
        "DAG hand-off waits per role (seconds from a step being ready to being claimed)",
        [
            "role",
            "handoffs",
            "median_seconds",
            "p90_seconds",
            "longest_seconds",
            "longest_workflow",
            "longest_step",
        ],
        [
            [
                w.role,
                w.handoffs,
                _round(w.median_seconds),
                _round(w.p90_seconds),
                _round(w.longest_seconds),
                w.longest_workflow,
                w.longest_step,
            ]
            for w in waits
        ],
    )


def role_load_table(loads: list[dag.RoleLoad]) -> InsightTable:
    return InsightTable(
        "dag-load",
        "DAG load per role: steps open now, finished in the range, agents' busy hours",
        [
            "role",
            "waiting_now",
            "held_now",
            "completed",
            "failed",
            "busy_hours",
            "agents_with_role",
        ],
        [
            [
                r.role,
                r.waiting,
                r.held,
                r.completed,
                r.failed,
                _round(r.busy_hours, 2),
                r.agents,
            ]
            for r in loads
        ],
    )


@dataclass(frozen=True)
class Insight:
    compute: Callable[[InsightFilter], Any]
    table: Callable[[Any, InsightFilter], InsightTable]


INSIGHTS: dict[str, Insight] = {
    "sessions-per-day": Insight(
        lambda f: work.sessions_per_day(filters=f), lambda d, f: sessions_table(d)
    ),
    "step-times": Insight(step_times, lambda d, f: step_times_table(d)),
    "waits": Insight(waits, lambda d, f: waits_table(d)),
    "review-pass-rates": Insight(
        lambda f: reviews.review_pass_rates(filters=f), lambda d, f: pass_rates_table(d)
    ),
    "criteria": Insight(
        lambda f: reviews.criterion_pass_rates(filters=f), lambda d, f: criteria_table(d)
    ),
    "attempts": Insight(
        lambda f: reviews.attempts_per_step(filters=f), lambda d, f: attempts_table(d)
    ),
    "rulings": Insight(
        lambda f: reviews.rulings_by_person(filters=f), lambda d, f: rulings_table(d)
    ),
    "agents": Insight(lambda f: work.agent_activity(filters=f), lambda d, f: agents_table(d)),
    "agent-steps-per-day": Insight(lambda f: work.agent_activity(filters=f), agent_days_table),
    "tracker-files": Insight(
        lambda f: tracked.tracker_insights(filters=f), lambda d, f: tracker_files_table(d)
    ),
    "tracker-decisions": Insight(
        lambda f: tracked.tracker_insights(filters=f), lambda d, f: tracker_decisions_table(d)
    ),
    "tracker-blockers": Insight(
        lambda f: tracked.tracker_insights(filters=f), lambda d, f: tracker_blockers_table(d)
    ),
    "dag-handoffs": Insight(lambda f: dag.handoff_waits(filters=f), lambda d, f: handoffs_table(d)),
    "dag-load": Insight(lambda f: dag.role_load(filters=f), lambda d, f: role_load_table(d)),
}
INSIGHT_NAMES = tuple(INSIGHTS)


def insight_table(*, name: str, filters: InsightFilter) -> InsightTable:
    """One insight's table (``KeyError`` for an unknown name; interfaces check the name)."""
    insight = INSIGHTS[name]
    return insight.table(insight.compute(filters), filters)


def table_json(table: InsightTable, filters: InsightFilter) -> str:
    return json.dumps(table.as_json(filters), indent=2, default=str)
