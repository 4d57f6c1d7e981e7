"""The insights pages and their exports through the real views, on the seeded history."""

from __future__ import annotations

import csv
import io
import json
import re

import pytest
from django.test import Client

from insights.tables import INSIGHT_NAMES, insight_table
from tests.insights.conftest import D1, D3, in_range
from tests.support.factories import make_user

pytestmark = pytest.mark.django_db

RANGE = {"since": D1.isoformat(), "until": D3.isoformat()}
PAGES = ["/insights/", "/insights/time/", "/insights/reviews/", "/insights/tracker/"]


@pytest.fixture
def watching(db) -> Client:
    client = Client()
    client.force_login(make_user(username="wanda", groups=("Watchers",)))
    return client


@pytest.mark.parametrize("url", PAGES)
def test_each_page_draws_its_charts_with_tables_and_no_script(history, watching, url):
    response = watching.get(url, RANGE)
    assert response.status_code == 200
    html = response.content.decode()
    assert html.count('data-testid="chart"') >= 2
    assert html.count("<svg") == html.count('data-testid="chart"')
    assert html.count('data-testid="insight-table"') == html.count('data-testid="insight"')
    # Only the page's own script file: pygal's tooltip script is off.
    assert re.findall(r"<script[^>]*>", html) == ['<script src="/static/dashboard/live.js" defer>']


def test_a_bar_links_to_the_sessions_behind_it(history, watching):
    html = watching.get("/insights/", RANGE).content.decode()
    # An agent's legend entry in the steps-per-day areas: that agent's sessions.
    assert (
        'href="/sessions/?agent=a1&amp;started_from=2026-03-01&amp;started_to=2026-03-03"' in html
    )
    assert (
        'href="/sessions/?started_from=2026-03-01&amp;started_to=2026-03-01&amp;status=aborted"'
        in html
    )


def page_rows(html: str, name: str) -> list[list[str]]:
    table = re.search(
        rf'<table data-testid="insight-table" data-insight="{name}">(.*?)</table>', html, re.S
    ).group(1)
    body = table.split("<tbody>")[1]
    return [
        re.findall(r"<td>(.*?)</td>", row, re.S)
        for row in re.findall(r"<tr>(.*?)</tr>", body, re.S)
    ]


def test_the_data_table_shows_the_exported_rows(history, watching):
    html = watching.get("/insights/", RANGE).content.decode()
    assert page_rows(html, "sessions-per-day") == [
        ["2026-03-01", "2", "1", "1", "0"],
        ["2026-03-02", "2", "2", "0", "0"],
        ["2026-03-03", "2", "1", "0", "1"],
    ]


@pytest.mark.parametrize("name", INSIGHT_NAMES)
def test_exports_parse_back_to_the_insight(history, watching, name):
    expected = insight_table(name=name, filters=in_range())
    as_json = watching.get(f"/insights/export/{name}.json", RANGE)
    assert as_json.status_code == 200
    assert as_json["Content-Disposition"].startswith("attachment;")
    data = json.loads(as_json.content)
    assert data["columns"] == expected.columns
    assert data["rows"] == json.loads(json.dumps(expected.rows, default=str))
    assert data["filters"]["since"] == "2026-03-01"
    as_csv = watching.get(f"/insights/export/{name}.csv", RANGE)
    assert as_csv["Content-Type"] == "text/csv; charset=utf-8"
    rows = list(csv.reader(io.StringIO(as_csv.content.decode())))
    assert rows[0] == expected.columns
    assert rows[1:] == [["" if c is None else str(c) for c in row] for row in expected.rows]


def test_an_export_honours_the_filters(history, watching):
    data = json.loads(
        watching.get("/insights/export/sessions-per-day.json", {**RANGE, "agent": "a2"}).content
    )
    assert [row[1] for row in data["rows"]] == [0, 1, 1]


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"since": "2026-03-05", "until": "2026-03-01"}, "is after until"),
        ({"since": "2024-01-01", "until": "2026-03-01"}, "the limit is 366"),
        ({"project": "999999"}, "999999"),
        ({"dialect": "cobol"}, "cobol"),
    ],
)
def test_a_bad_filter_is_refused_by_the_export_and_shown_on_the_page(
    history, watching, params, message
):
    response = watching.get("/insights/export/sessions-per-day.csv", params)
    assert response.status_code == 400
    assert message in response.content.decode()
    page = watching.get("/insights/", params)
    assert page.status_code == 200
    assert 'data-testid="filter-errors"' in page.content.decode()


def test_unknown_insight_or_format_is_404(history, watching):
    assert watching.get("/insights/export/nope.csv").status_code == 404
    assert watching.get("/insights/export/waits.xml").status_code == 404


def test_pages_need_the_watch_permission(history):
    client = Client()
    assert client.get("/insights/").status_code == 302
    client.force_login(make_user(username="nemo"))
    assert client.get("/insights/").status_code == 403
    assert client.get("/insights/export/waits.csv").status_code == 403
    assert client.get("/sessions/s1/history.json").status_code == 403


def test_a_long_range_draws_weeks_and_keeps_every_day_in_the_table(history, watching):
    html = watching.get("/insights/", {"since": "2025-03-04", "until": "2026-03-03"}).content
    html = html.decode()
    assert "Week from started (UTC)" in html
    assert len(page_rows(html, "sessions-per-day")) == 365
    # The week holding 2026-03-01 links to its sessions from its first day to its last.
    assert "started_from=2026-02-24&amp;started_to=2026-03-02&amp;status=aborted" in html


def test_tracker_charts_lead_to_the_tracked_workflows(history, watching):
    html = watching.get("/insights/tracker/", RANGE).content.decode()
    assert 'href="/tracker/">Tracked workflows behind this chart' in html
    # The open blocker's bar opens its workflow's page.
    assert f'xlink:href="/tracker/{history.tracked.pk}/"' in html


def test_the_per_agent_chart_draws_every_series_its_table_holds(history, watching):
    from dashboard import insight_charts as charts
    from insights import selectors as work
    from insights.filters import InsightFilter

    filters = InsightFilter(since=D1, until=D3)
    agents = work.agent_activity(filters=filters)
    svg = str(charts.agent_outcomes_chart(agents, filters))
    for series in ("Steps finished", "Failed review rounds", "Aborted sessions"):
        assert f">{series}<" in svg, series


def test_one_day_of_agent_steps_is_drawn_as_bars_not_a_sliver(history, watching):
    html = watching.get("/insights/", {"since": D1.isoformat(), "until": D1.isoformat()})
    svg = html.content.decode().split("Steps finished per day, per agent", 1)[1].split("</svg>")[0]
    assert 'class="bar"' in svg
