"""The insights and session-history endpoints of the REST API."""

from __future__ import annotations

import csv
import io
import json

import pytest
from django.test import Client

from accounts.services import api_token_create
from insights.tables import INSIGHT_NAMES, insight_table
from reviews.history import history_markdown, session_history
from tests.insights.conftest import D1, D3, in_range
from tests.support.factories import make_user

pytestmark = pytest.mark.django_db

RANGE = {"since": D1.isoformat(), "until": D3.isoformat()}


@pytest.fixture
def api(db):
    user = make_user(username="viewer", perms=["workflows.view_workflowsession"])
    _, secret = api_token_create(user=user, name="t")
    client = Client()

    def get(path, **params):
        return client.get(path, params, headers={"Authorization": f"Bearer {secret}"})

    return get


@pytest.mark.parametrize("name", INSIGHT_NAMES)
def test_each_insight_as_json_and_csv(history, api, name):
    expected = insight_table(name=name, filters=in_range())
    response = api(f"/api/insights/{name}", **RANGE)
    assert response.status_code == 200, response.content
    data = response.json()
    assert (data["name"], data["columns"]) == (name, expected.columns)
    assert data["rows"] == json.loads(json.dumps(expected.rows, default=str))
    as_csv = api(f"/api/insights/{name}/csv", **RANGE)
    assert as_csv.status_code == 200
    rows = list(csv.reader(io.StringIO(as_csv.content.decode())))
    assert rows == [expected.columns] + [
        ["" if c is None else str(c) for c in row] for row in expected.rows
    ]


def test_filters_apply(history, api):
    data = api("/api/insights/sessions-per-day", project=history.p1.pk, **RANGE).json()
    assert [row[1:] for row in data["rows"]] == [[2, 1, 1, 0], [1, 1, 0, 0], [2, 1, 0, 1]]
    assert data["filters"]["project"] == history.p1.pk


@pytest.mark.parametrize(
    ("params", "status", "code"),
    [
        ({"dialect": "cobol"}, 400, "invalid_request"),
        ({"since": "2026-13-01"}, 400, "invalid_request"),
        ({"project": 999999}, 404, "not_found"),
    ],
)
def test_bad_filters(history, api, params, status, code):
    for path in ("/api/insights/waits", "/api/insights/waits/csv"):
        response = api(path, **params)
        assert response.status_code == status
        assert response.json()["error"]["code"] == code


def test_a_backwards_range_is_empty_and_a_long_one_is_cut(history, api):
    data = api("/api/insights/sessions-per-day", since="2026-03-05", until="2026-03-01").json()
    assert data["rows"] == []
    assert data["notes"] == ["since (2026-03-05) is after until (2026-03-01): the range is empty"]
    data = api("/api/insights/sessions-per-day", since="0001-01-01", until="9999-12-31").json()
    assert len(data["rows"]) == 366
    assert data["rows"][-1][0] == "9999-12-31"
    assert data["notes"] == ["The range was cut to the 366 days from 9998-12-31 to 9999-12-31"]


def test_unknown_insight_is_refused(history, api):
    assert api("/api/insights/nope").status_code == 400


def test_session_history_json_and_markdown(history, api):
    response = api("/api/sessions/s1/history")
    assert response.status_code == 200
    data = response.json()
    assert data == json.loads(json.dumps(session_history(session_id="s1"), default=str))
    markdown = api("/api/sessions/s1/history/markdown")
    assert markdown["Content-Type"] == "text/markdown; charset=utf-8"
    assert markdown.content.decode() == history_markdown(session_history(session_id="s1"))
    assert api("/api/sessions/nope/history").status_code == 404


def test_needs_a_token(history):
    assert Client().get("/api/insights/waits").status_code == 401
    assert Client().get("/api/sessions/s1/history").status_code == 401
