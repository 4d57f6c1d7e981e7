"""The insights' charts, drawn on the server as SVG by pygal.

pygal lays out axes, scales, stacking and legends; each chart comes out as one ``<svg>`` that
the page inlines, so it is readable without JavaScript, needs no network and runs nothing
under the Content-Security-Policy (pygal's optional tooltip script is switched off with
``js=[]``, and its inline config script is filtered out). Each bar links to the sessions
behind it where the session list can filter them (``xlink``), each chart has a title and
axis titles, and the page puts its data table beside it.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import wraps
from typing import Any
from urllib.parse import urlencode

import pygal
from django.urls import reverse
from django.utils.safestring import SafeString, mark_safe
from pygal.style import Style

from insights import dag, reviews
from insights import selectors as work
from insights import tracker as tracked
from insights.filters import InsightFilter
from insights.tables import WAIT_LABELS, AllWaits, StepTimes, wait_rows

# Colours that keep their contrast on the page's white cards, one per series.
STYLE = Style(
    background="transparent",
    plot_background="transparent",
    foreground="#1f2933",
    foreground_strong="#1f2933",
    foreground_subtle="#9aa5b1",
    opacity=".9",
    opacity_hover="1",
    colors=("#2f855a", "#c53030", "#2b6cb0", "#b7791f", "#6b46c1", "#2c7a7b", "#97266d"),
    font_family="system-ui, sans-serif",
    title_font_size=15,
    label_font_size=11,
    major_label_font_size=11,
    legend_font_size=12,
)
# Median and p90 are two readings of one thing, not good and bad: two blues.
PERCENTILE_STYLE = Style(**{**STYLE.to_dict(), "colors": ("#2b6cb0", "#90cdf4")})
# Two kinds of trouble (failed reviews, aborts): amber and red.
# Work done in the house green, then the two kinds of trouble in amber and red.
OUTCOMES_STYLE = Style(**{**STYLE.to_dict(), "colors": ("#2f855a", "#b7791f", "#c53030")})
WIDTH = 760
# Charts kept, drawn, per process: the same figures give the same SVG, so a live refresh or a
# second person on the same page only redraws charts whose figures changed.
CHART_CACHE_SIZE = 128

_drawn: OrderedDict[str, SafeString | None] = OrderedDict()
_drawn_lock = threading.Lock()


def memoized(draw: Callable[..., SafeString | None]) -> Callable[..., SafeString | None]:
    """Keep ``draw``'s SVG for its arguments (their repr: plain dataclasses, lists, dates)."""

    @wraps(draw)
    def wrapper(*args: Any) -> SafeString | None:
        key = hashlib.sha256(f"{draw.__name__}:{args!r}".encode()).hexdigest()
        with _drawn_lock:
            if key in _drawn:
                _drawn.move_to_end(key)
                return _drawn[key]
        svg = draw(*args)
        with _drawn_lock:
            _drawn[key] = svg
            while len(_drawn) > CHART_CACHE_SIZE:
                _drawn.popitem(last=False)
        return svg

    return wrapper


def forget_drawn_charts() -> None:
    """Empty the chart cache (the benchmark measures drawing too)."""
    with _drawn_lock:
        _drawn.clear()


HEIGHT = 300


def _without_scripts(root: Any) -> Any:
    """pygal always writes an inline ``<script>`` holding its config for the tooltip script;
    with no tooltip script it does nothing, and the CSP would refuse it (a console error)."""
    for parent in list(root.iter()):
        for child in list(parent):
            if isinstance(child.tag, str) and child.tag.rsplit("}", 1)[-1] == "script":
                parent.remove(child)
    return root


def _titled(title: str) -> Callable[[Any], Any]:
    """An SVG ``<title>`` (what a screen reader announces) and ``role="img"``; the page shows
    the same title as the figure's caption, so pygal draws none of its own."""

    def add(root: Any) -> Any:
        root.set("role", "img")
        root.set("aria-label", title)
        element = root.makeelement("title", {})
        element.text = title
        root.insert(0, element)
        return root

    return add


def _base(kind: type, *, title: str, x_title: str, y_title: str, **options: Any) -> Any:
    chart = kind(
        x_title=x_title,
        y_title=y_title,
        width=WIDTH,
        height=HEIGHT,
        style=options.pop("style", STYLE),
        js=[],  # no tooltip script: no CDN, nothing the CSP would block
        disable_xml_declaration=True,
        legend_at_bottom=True,
        truncate_legend=40,
        truncate_label=30,
        x_label_rotation=0,
        print_values=False,
        **options,
    )
    chart.add_xml_filter(_without_scripts)
    chart.add_xml_filter(_titled(title))
    return chart


def _svg(chart: Any) -> SafeString:
    # pygal escapes every label and value it writes into the SVG.
    return mark_safe(chart.render(is_unicode=True))  # noqa: S308


def _whole_numbers(chart: Any, values: Sequence[float]) -> None:
    """Counts get whole-number ticks (pygal would draw 0.2 steps up to 2)."""
    top = max(values, default=0)
    if top <= 10:
        chart.y_labels = list(range(0, int(top) + 1))


# Up to this many days a chart draws one bar per day; beyond, one per week (the data table
# and the exports keep every day).
DAILY_BARS = 62


@dataclass(frozen=True)
class Period:
    first: dt.date
    last: dt.date
    indices: range  # the days' positions in the range

    @property
    def label(self) -> str:
        return self.first.strftime("%m-%d")

    def total(self, values: Sequence[int]) -> int:
        return sum(values[i] for i in self.indices)


def _periods(days: Sequence[dt.date]) -> list[Period]:
    width = 1 if len(days) <= DAILY_BARS else 7
    return [
        Period(days[i], days[min(i + width, len(days)) - 1], range(i, min(i + width, len(days))))
        for i in range(0, len(days), width)
    ]


def _time_axis(chart: Any, periods: Sequence[Period], what: str) -> None:
    """One label per period, about seven shown; the axis says whether bars are days or weeks."""
    labels = [p.label for p in periods]
    chart.x_labels = labels
    chart.x_labels_major = labels[:: max(1, len(periods) // 7)]
    chart.show_minor_x_labels = False
    weekly = any(len(p.indices) > 1 for p in periods)
    chart.x_title = f"{'Week from' if weekly else 'Day'} {what} (UTC)"


def sessions_url(filters: InsightFilter, **extra: Any) -> str:
    """The session list with what the insight was filtered by, and ``extra``."""
    params: dict[str, Any] = {
        "project": filters.project_id,
        "job": filters.job,
        "agent": filters.agent_id,
        "started_from": filters.since.isoformat(),
        "started_to": filters.until.isoformat(),
    }
    params.update(extra)
    query = urlencode({k: v for k, v in params.items() if v not in (None, "")})
    return f"{reverse('dashboard:sessions')}?{query}"


def tracker_url(filters: InsightFilter) -> str:
    """The tracked workflows list with the insight's project and agent."""
    params = {"project": filters.project_id, "agent": filters.agent_id}
    query = urlencode({k: v for k, v in params.items() if v is not None})
    return f"{reverse('dashboard:tracker_workflows')}{'?' + query if query else ''}"


def _link(value: float, href: str, label: str) -> dict[str, Any]:
    return {"value": value, "label": label, "xlink": {"href": href, "target": "_top"}}


@memoized
def sessions_chart(days: list[work.DayOutcomes], filters: InsightFilter) -> SafeString:
    chart = _base(
        pygal.StackedBar,
        title="Sessions started per day, by outcome",
        x_title="Day started (UTC)",
        y_title="Sessions",
    )
    periods = _periods([d.day for d in days])
    _time_axis(chart, periods, "started")
    _whole_numbers(chart, [p.total([d.started for d in days]) for p in periods])
    for status, label in (("completed", "Completed"), ("aborted", "Aborted"), ("active", "Active")):
        counts = [getattr(d, status) for d in days]
        chart.add(
            label,
            [
                _link(
                    p.total(counts),
                    sessions_url(
                        filters,
                        status=status,
                        started_from=p.first.isoformat(),
                        started_to=p.last.isoformat(),
                    ),
                    f"{p.first.isoformat()}: {p.total(counts)} {status}",
                )
                for p in periods
            ],
        )
    return _svg(chart)


@memoized
def step_times_chart(data: StepTimes, filters: InsightFilter) -> SafeString | None:
    if not data.times or data.choice is None:
        return None
    chart = _base(
        pygal.Bar,
        title=f"Time per step of {data.choice.job}/{data.choice.workflow}",
        x_title="Step (workflow order)",
        y_title="Seconds",
        style=PERCENTILE_STYLE,
    )
    chart.x_labels = [t.step_id for t in data.times]
    url = sessions_url(filters, job=data.choice.job)
    chart.add("Median", [_link(t.median_seconds, url, t.step_id) for t in data.times])
    chart.add("p90", [_link(t.p90_seconds, url, t.step_id) for t in data.times])
    return _svg(chart)


@memoized
def waits_chart(data: AllWaits, filters: InsightFilter) -> SafeString | None:
    rows = [(key, p) for key, p in wait_rows(data) if p is not None]
    if not rows:
        return None
    chart = _base(
        pygal.HorizontalBar,
        title="Time waiting on reviews and on people",
        x_title="Seconds",
        y_title="Waiting on",
        style=PERCENTILE_STYLE,
    )
    chart.x_labels = [WAIT_LABELS[key] for key, _ in rows]
    url = sessions_url(filters)
    chart.add("Median", [_link(p.median or 0, url, WAIT_LABELS[k]) for k, p in rows])
    chart.add("p90", [_link(p.p90 or 0, url, WAIT_LABELS[k]) for k, p in rows])
    return _svg(chart)


@memoized
def pass_rates_chart(
    rates: list[reviews.ReviewPassRate], filters: InsightFilter
) -> SafeString | None:
    if not rates:
        return None
    chart = _base(
        pygal.HorizontalBar,
        title="Review pass rate per review",
        x_title="Passed (%)",
        y_title="Step: review",
        range=(0, 100),
    )
    chart.x_labels = [f"{r.step_id}: {r.run_each}" for r in rates]
    chart.add(
        "Pass rate",
        [
            _link(round(r.rate * 100, 1), sessions_url(filters), f"{r.passed}/{r.reviews}")
            for r in rates
        ],
    )
    return _svg(chart)


@memoized
def criteria_chart(data: reviews.CriteriaInsights, filters: InsightFilter) -> SafeString | None:
    shown = data.criteria[: reviews.TOP_FAILED_CRITERIA]
    if not shown:
        return None
    chart = _base(
        pygal.HorizontalStackedBar,
        title="Criteria, most failed first",
        x_title="Review results",
        y_title="Criterion",
    )
    chart.x_labels = [c.criterion for c in shown]
    url = sessions_url(filters)
    chart.add("Passed", [_link(c.passed, url, c.criterion) for c in shown])
    chart.add("Failed", [_link(c.failed, url, c.criterion) for c in shown])
    return _svg(chart)


@memoized
def attempts_chart(steps: list[reviews.StepAttempts], filters: InsightFilter) -> SafeString | None:
    if not steps:
        return None
    chart = _base(
        pygal.StackedBar,
        title="Review rounds per step run",
        x_title="Step",
        y_title="Step runs",
    )
    chart.x_labels = [s.step_id for s in steps]
    _whole_numbers(chart, [s.runs for s in steps])
    top = max(len(s.runs_by_rounds) for s in steps)
    url = sessions_url(filters)
    for k in range(top):
        label = "1 round" if k == 0 else f"{k + 1} rounds"
        counts = [s.runs_by_rounds[k] if k < len(s.runs_by_rounds) else 0 for s in steps]
        chart.add(label, [_link(n, url, label) for n in counts])
    return _svg(chart)


@memoized
def rulings_chart(people: list[reviews.PersonRulings], filters: InsightFilter) -> SafeString | None:
    if not people:
        return None
    chart = _base(
        pygal.StackedBar,
        title="Rulings by people",
        x_title="Person",
        y_title="Rulings",
    )
    chart.x_labels = [p.person for p in people]
    _whole_numbers(chart, [p.total for p in people])
    url = sessions_url(filters)
    chart.add("Overrides", [_link(p.overrides, url, p.person) for p in people])
    chart.add("Changes requested", [_link(p.changes_requested, url, p.person) for p in people])
    return _svg(chart)


@memoized
def agent_days_chart(agents: list[work.AgentActivity], filters: InsightFilter) -> SafeString | None:
    """Stacked areas rather than bars: nine agents over a month are 270 bars, five times the
    drawing; each agent's legend entry links to its sessions instead of each bar."""
    if not agents:
        return None
    periods = _periods(filters.days)
    # An area needs two points to have a width: a single day is drawn as one stacked bar.
    shape: dict[str, Any] = {"fill": True, "show_dots": False} if len(periods) > 1 else {}
    chart = _base(
        pygal.StackedLine if len(periods) > 1 else pygal.StackedBar,
        title="Steps finished per day, per agent",
        x_title="Day (UTC)",
        y_title="Steps finished",
        **shape,
    )
    _time_axis(chart, periods, "finished")
    totals = [sum(day) for day in zip(*(a.steps_per_day for a in agents), strict=True)]
    _whole_numbers(chart, [p.total(totals) for p in periods])
    for a in agents:
        title: dict[str, Any] = {"title": a.agent_id}
        if not a.others:
            title["xlink"] = {"href": sessions_url(filters, agent=a.agent_id), "target": "_top"}
        chart.add(title, [p.total(a.steps_per_day) for p in periods])
    return _svg(chart)


@memoized
def agent_outcomes_chart(
    agents: list[work.AgentActivity], filters: InsightFilter
) -> SafeString | None:
    if not agents:
        return None
    chart = _base(
        pygal.Bar,
        title="Steps finished, failed review rounds and aborted sessions, per agent",
        style=OUTCOMES_STYLE,
        x_title="Agent",
        y_title="Count",
    )
    chart.x_labels = [a.agent_id for a in agents]
    _whole_numbers(chart, [max(a.steps, a.failed_reviews, a.aborts) for a in agents])

    def url(a: work.AgentActivity, **extra: Any) -> str:
        return sessions_url(filters, agent=None if a.others else a.agent_id, **extra)

    chart.add("Steps finished", [_link(a.steps, url(a), a.agent_id) for a in agents])
    chart.add("Failed review rounds", [_link(a.failed_reviews, url(a), a.agent_id) for a in agents])
    chart.add(
        "Aborted sessions",
        [_link(a.aborts, url(a, status="aborted"), a.agent_id) for a in agents],
    )
    return _svg(chart)


def tracker_files_chart(data: tracked.TrackerInsights, filters: InsightFilter) -> SafeString | None:
    # Only the figures drawn key the kept chart: the blockers' ages change every second.
    return _tracker_files_chart(data.days, filters)


@memoized
def _tracker_files_chart(
    days: list[tracked.TrackerDay], filters: InsightFilter
) -> SafeString | None:
    if not any(d.tasks for d in days):
        return None
    chart = _base(
        pygal.StackedBar,
        title="Files changed by tracked tasks, per day",
        x_title="Day completed (UTC)",
        y_title="Files",
    )
    periods = _periods([d.day for d in days])
    _time_axis(chart, periods, "completed")
    added = [d.added for d in days]
    modified = [d.modified for d in days]
    deleted = [d.deleted for d in days]
    _whole_numbers(chart, [p.total(added) + p.total(modified) + p.total(deleted) for p in periods])
    url = tracker_url(filters)
    for label, counts in (("Added", added), ("Modified", modified), ("Deleted", deleted)):
        chart.add(label, [_link(p.total(counts), url, p.first.isoformat()) for p in periods])
    return _svg(chart)


def tracker_decisions_chart(
    data: tracked.TrackerInsights, filters: InsightFilter
) -> SafeString | None:
    return _tracker_decisions_chart(data.decisions, filters)


@memoized
def _tracker_decisions_chart(
    decisions: list[tuple[str, int]], filters: InsightFilter
) -> SafeString | None:
    if not decisions:
        return None
    chart = _base(
        pygal.Bar, title="Decisions per category", x_title="Category", y_title="Decisions"
    )
    chart.x_labels = [category for category, _ in decisions]
    _whole_numbers(chart, [n for _, n in decisions])
    url = tracker_url(filters)
    chart.add("Decisions", [_link(n, url, category) for category, n in decisions])
    return _svg(chart)


@dataclass(frozen=True)
class BlockerBar:
    label: str
    hours: float  # as drawn, to a tenth of an hour
    workflow_id: int
    workflow_name: str


def tracker_blockers_chart(
    data: tracked.TrackerInsights, filters: InsightFilter
) -> SafeString | None:
    bars = [
        BlockerBar(
            f"#{b.issue_id} {b.description[:40]}",
            round(b.age_seconds / 3600, 1),
            b.workflow_id,
            b.workflow_name,
        )
        for b in data.open_blockers
    ]
    # Redrawn when an age moves by a tenth of an hour, not on every refresh.
    return _tracker_blockers_chart(bars)


@memoized
def _tracker_blockers_chart(bars: list[BlockerBar]) -> SafeString | None:
    if not bars:
        return None
    chart = _base(
        pygal.HorizontalBar,
        title="Open blockers by age, oldest first",
        x_title="Hours open",
        y_title="Blocker",
    )
    chart.x_labels = [b.label for b in bars]
    chart.add(
        "Hours open",
        [
            _link(
                b.hours,
                reverse("dashboard:tracker_workflow", args=[b.workflow_id]),
                b.workflow_name,
            )
            for b in bars
        ],
    )
    return _svg(chart)


def dag_url() -> str:
    """The DAG workflows list (each workflow's page shows its steps and agents)."""
    return reverse("dashboard:dag_list")


@memoized
def handoffs_chart(waits: list[dag.HandoffWait], filters: InsightFilter) -> SafeString | None:
    if not waits:
        return None
    chart = _base(
        pygal.Bar,
        title="DAG hand-off waits per role",
        x_title="Role",
        y_title="Seconds from ready to claimed",
        style=PERCENTILE_STYLE,
    )
    chart.x_labels = [w.role for w in waits]
    # Each bar opens the workflow that waited longest for that role.
    for label, values in (
        ("Median", [w.median_seconds for w in waits]),
        ("p90", [w.p90_seconds for w in waits]),
    ):
        chart.add(
            label,
            [
                _link(value, reverse("dashboard:dag", args=[w.longest_workflow]), w.role)
                for value, w in zip(values, waits, strict=True)
            ],
        )
    return _svg(chart)


@memoized
def role_load_chart(loads: list[dag.RoleLoad], filters: InsightFilter) -> SafeString | None:
    if not any(r.open or r.completed or r.failed for r in loads):
        return None
    chart = _base(pygal.Bar, title="DAG load per role", x_title="Role", y_title="Steps")
    chart.x_labels = [r.role for r in loads]
    _whole_numbers(chart, [max(r.waiting, r.held, r.completed, r.failed) for r in loads])
    url = dag_url()
    for label, attr in (
        ("Waiting for an agent now", "waiting"),
        ("Held by an agent now", "held"),
        ("Completed in the range", "completed"),
        ("Failed in the range", "failed"),
    ):
        chart.add(label, [_link(getattr(r, attr), url, r.role) for r in loads])
    return _svg(chart)
