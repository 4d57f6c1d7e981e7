"""The insights pages, their exports, and a session's history as a download.

Five pages share one filter form: activity (sessions per day, per agent), time (per step,
waiting), reviews (pass rates, criteria, rounds, rulings), tracker and DAG (hand-off waits,
load per role). Each chart sits in a
figure with its data table and links to CSV and JSON of the same table, and to the sessions
behind it. Every page re-renders live like the rest of the dashboard.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django import forms
from django.http import Http404, HttpRequest, HttpResponse
from django.utils.safestring import SafeString
from django.views.decorators.http import require_safe

from dashboard import insight_charts as charts
from dashboard.views import _live_page, watcher_required
from insights import dag, reviews
from insights import selectors as work
from insights import tracker as tracked
from insights.filters import MAX_RANGE_DAYS, Dialect, InsightFilter, insight_filter
from insights.tables import (
    INSIGHT_NAMES,
    InsightTable,
    agent_days_table,
    agents_table,
    attempts_table,
    criteria_table,
    handoffs_table,
    insight_table,
    pass_rates_table,
    role_load_table,
    rulings_table,
    sessions_table,
    step_times,
    step_times_table,
    table_json,
    tracker_blockers_table,
    tracker_decisions_table,
    tracker_files_table,
    waits,
    waits_table,
)
from reviews.history import history_markdown, session_history
from workflows.errors import InvalidInput, NotFound
from workflows.selectors.catalog import project_list, project_not_found
from workflows.selectors.events import newest_event_id

MAX_ID = 2**63 - 1


class InsightFilterForm(forms.Form):
    project = forms.IntegerField(required=False, min_value=1, max_value=MAX_ID)
    job = forms.CharField(required=False, max_length=255, strip=True)
    workflow = forms.CharField(required=False, max_length=255, strip=True)
    agent = forms.CharField(required=False, max_length=128, strip=True)
    dialect = forms.ChoiceField(required=False, choices=[("", "All"), *Dialect.CHOICES])
    since = forms.DateField(required=False)
    until = forms.DateField(required=False)

    def __init__(self, *args: Any, known_projects: set[int], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.known_projects = known_projects

    def clean_project(self) -> int | None:
        project_id: int | None = self.cleaned_data.get("project")
        if project_id is not None and project_id not in self.known_projects:
            raise forms.ValidationError(project_not_found(project_id))
        return project_id

    def insight_filter(self) -> InsightFilter:
        """The valid filters (an invalid field is shown and left out); a date range that
        cannot be used falls back to the default one, with the reason shown."""
        data = getattr(self, "cleaned_data", {})

        def checked(since: dt.date | None, until: dt.date | None) -> InsightFilter:
            return insight_filter(
                since=since,
                until=until,
                project_id=data.get("project"),
                job=data.get("job") or None,
                workflow=data.get("workflow") or None,
                agent_id=data.get("agent") or None,
                dialect=data.get("dialect") or None,
            )

        try:
            return checked(data.get("since"), data.get("until"))
        except InvalidInput as exc:
            self.add_error(None, str(exc))
            return checked(None, None)


@dataclass
class Panel:
    """One chart with the table behind it."""

    table: InsightTable
    svg: SafeString | None
    sessions_url: str | None = None
    detail: Any = None


def _activity(filters: InsightFilter) -> list[Panel]:
    days = work.sessions_per_day(filters=filters)
    agents = work.agent_activity(filters=filters)
    return [
        Panel(
            sessions_table(days),
            charts.sessions_chart(days, filters),
            charts.sessions_url(filters),
        ),
        Panel(
            agent_days_table(agents, filters),
            charts.agent_days_chart(agents, filters),
            charts.sessions_url(filters),
        ),
        Panel(
            agents_table(agents),
            charts.agent_outcomes_chart(agents, filters),
            charts.sessions_url(filters),
        ),
    ]


def _time(filters: InsightFilter) -> list[Panel]:
    times = step_times(filters)
    waited = waits(filters)
    job = times.choice.job if times.choice else None
    return [
        Panel(
            step_times_table(times),
            charts.step_times_chart(times, filters),
            charts.sessions_url(filters, job=job),
        ),
        Panel(
            waits_table(waited), charts.waits_chart(waited, filters), charts.sessions_url(filters)
        ),
    ]


def _reviews(filters: InsightFilter) -> list[Panel]:
    rates = reviews.review_pass_rates(filters=filters)
    criteria = reviews.criterion_pass_rates(filters=filters)
    attempts = reviews.attempts_per_step(filters=filters)
    people = reviews.rulings_by_person(filters=filters)
    failing = [c for c in criteria.criteria if c.failed][: reviews.TOP_FAILED_CRITERIA]
    return [
        Panel(
            pass_rates_table(rates),
            charts.pass_rates_chart(rates, filters),
            charts.sessions_url(filters),
        ),
        Panel(
            criteria_table(criteria),
            charts.criteria_chart(criteria, filters),
            charts.sessions_url(filters),
            detail=failing,
        ),
        Panel(
            attempts_table(attempts),
            charts.attempts_chart(attempts, filters),
            charts.sessions_url(filters),
        ),
        Panel(
            rulings_table(people),
            charts.rulings_chart(people, filters),
            charts.sessions_url(filters),
        ),
    ]


def _tracker(filters: InsightFilter) -> list[Panel]:
    data = tracked.tracker_insights(filters=filters)
    # The tracker's own pages list the workflows behind these charts.
    url = charts.tracker_url(filters)
    return [
        Panel(tracker_files_table(data), charts.tracker_files_chart(data, filters), url),
        Panel(tracker_decisions_table(data), charts.tracker_decisions_chart(data, filters), url),
        Panel(tracker_blockers_table(data), charts.tracker_blockers_chart(data, filters), url),
    ]


def _dag(filters: InsightFilter) -> list[Panel]:
    waits = dag.handoff_waits(filters=filters)
    loads = dag.role_load(filters=filters)
    url = charts.dag_url()
    return [
        Panel(handoffs_table(waits), charts.handoffs_chart(waits, filters), url),
        Panel(role_load_table(loads), charts.role_load_chart(loads, filters), url),
    ]


@dataclass(frozen=True)
class Page:
    slug: str
    url_name: str
    title: str
    panels: Callable[[InsightFilter], list[Panel]]


PAGES = {
    "activity": Page("activity", "insights", "Activity", _activity),
    "time": Page("time", "insights_time", "Time", _time),
    "reviews": Page("reviews", "insights_reviews", "Reviews", _reviews),
    "tracker": Page("tracker", "insights_tracker", "Tracker", _tracker),
    "dag": Page("dag", "insights_dag", "DAG", _dag),
}


def _filters_from(request: HttpRequest) -> tuple[InsightFilterForm, InsightFilter, list[Any]]:
    projects = project_list()
    form = InsightFilterForm(request.GET, known_projects={p.pk for p in projects})
    form.is_valid()  # errors are shown; the valid filters still apply
    return form, form.insight_filter(), projects


def _page(request: HttpRequest, slug: str) -> HttpResponse:
    live_after = newest_event_id()
    page = PAGES[slug]
    form, filters, projects = _filters_from(request)
    context = {
        "page": page,
        "pages": PAGES.values(),
        "form": form,
        "filters": filters,
        "projects": projects,
        "dialects": Dialect.CHOICES,
        "max_range_days": MAX_RANGE_DAYS,
        "panels": page.panels(filters),
        "query": request.GET.urlencode(),
    }
    return _live_page(
        request, "insights", context, live_after=live_after, project_id=filters.project_id
    )


@require_safe
@watcher_required
def insights_activity(request: HttpRequest) -> HttpResponse:
    return _page(request, "activity")


@require_safe
@watcher_required
def insights_time(request: HttpRequest) -> HttpResponse:
    return _page(request, "time")


@require_safe
@watcher_required
def insights_reviews(request: HttpRequest) -> HttpResponse:
    return _page(request, "reviews")


@require_safe
@watcher_required
def insights_tracker(request: HttpRequest) -> HttpResponse:
    return _page(request, "tracker")


@require_safe
@watcher_required
def insights_dag(request: HttpRequest) -> HttpResponse:
    return _page(request, "dag")


def _download(body: str, *, content_type: str, filename: str) -> HttpResponse:
    response = HttpResponse(body, content_type=content_type)
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response


@require_safe
@watcher_required
def insights_export(request: HttpRequest, name: str, fmt: str) -> HttpResponse:
    """One insight's table as CSV or JSON, filtered as the page was. A filter the page would
    leave out (an unknown project, a bad range) is refused here: a download must say what it
    holds."""
    if fmt not in ("csv", "json"):
        raise Http404(f"Export as .csv or .json, not .{fmt}")
    if name not in INSIGHT_NAMES:
        raise Http404(f"No insight named '{name}'; there are: {', '.join(INSIGHT_NAMES)}")
    form, filters, _ = _filters_from(request)
    if form.errors:
        errors = "; ".join(
            " ".join(str(e) for e in v) if k == "__all__" else f"{k}: {' '.join(str(e) for e in v)}"
            for k, v in form.errors.items()
        )
        return HttpResponse(errors, status=400, content_type="text/plain; charset=utf-8")
    table = insight_table(name=name, filters=filters)
    stem = f"{name}_{filters.since}_{filters.until}"
    if fmt == "csv":
        return _download(
            table.as_csv(), content_type="text/csv; charset=utf-8", filename=f"{stem}.csv"
        )
    return _download(
        table_json(table, filters), content_type="application/json", filename=f"{stem}.json"
    )


@require_safe
@watcher_required
def session_history_export(request: HttpRequest, session_id: str, fmt: str) -> HttpResponse:
    if fmt not in ("json", "md"):
        raise Http404(f"A session's history comes as .json or .md, not .{fmt}")
    try:
        history = session_history(session_id=session_id)
    except NotFound as exc:
        raise Http404(str(exc)) from None
    if fmt == "md":
        return _download(
            history_markdown(history),
            content_type="text/markdown; charset=utf-8",
            filename=f"session-{session_id}.md",
        )
    return _download(
        json.dumps(history, indent=2, default=str),
        content_type="application/json",
        filename=f"session-{session_id}.json",
    )
