"""Every insights page, export and endpoint costs the same number of queries with 2 sessions
a day as with 20."""

from __future__ import annotations

import datetime as dt

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from accounts.services import api_token_create
from insights.tables import INSIGHT_NAMES
from reviews.models import ReviewResult, copied_from
from tests.insights.conftest import D1, D3
from tests.support.factories import make_user
from workflows.models import Agent, Event, StepRun, WorkflowSession

pytestmark = pytest.mark.django_db

RANGE = f"since={D1.isoformat()}&until={D3.isoformat()}"
URLS = [
    f"/insights/?{RANGE}",
    f"/insights/time/?{RANGE}",
    f"/insights/reviews/?{RANGE}",
    f"/insights/tracker/?{RANGE}",
    *(f"/insights/export/{name}.json?{RANGE}" for name in INSIGHT_NAMES),
    "/sessions/s1/history.md",
]
API_URLS = [f"/api/insights/{name}?{RANGE}" for name in INSIGHT_NAMES] + [
    "/api/sessions/s1/history"
]


def more(history, first: int, n: int) -> None:
    """``n`` more sessions a day (numbered from ``first``), each with a run, a review and
    an event, on new agents."""
    template = history.sessions["s1"]
    run = history.runs["s1.wrap_up"]
    for day in (D1, D3):
        for k in range(first, first + n):
            agent = Agent.objects.create(project=history.p1, agent_id=f"x{day.day}-{k}")
            start = dt.datetime.combine(day, dt.time(13, k), tzinfo=dt.UTC)
            s = WorkflowSession.objects.create(
                session_id=f"x{day.day}-{k}",
                project=history.p1,
                agent=agent,
                job=template.job,
                workflow=template.workflow,
                job_name="demo",
                workflow_name=f"w{k}",
                goal="g",
                status="completed",
                current_step_id="gather",
                started_at=start,
                completed_at=start + dt.timedelta(minutes=1),
            )
            r = StepRun.objects.create(
                session=s,
                step_def=run.step_def,
                step_id=f"step{k}",
                entry_index=k,
                status="completed",
                started_at=start,
                completed_at=start + dt.timedelta(seconds=k + 1),
            )
            ReviewResult.objects.create(
                step_run=r,
                session=s,
                **copied_from(s),
                step_id=r.step_id,
                attempt=1,
                run_each=f"r{k}",
                passed=bool(k % 2),
                criteria_results=[{"criterion": f"c{k}", "passed": False, "feedback": "no"}],
                reviewer_kind="external",
                duration_ms=k,
                created_at=start,
            )
            Event.objects.create(
                project=history.p1,
                session=s,
                agent=agent,
                kind="review_failed",
                created_at=start,
                payload={},
            )


def counts(client, urls, **headers) -> list[int]:
    found = []
    for url in urls:
        with CaptureQueriesContext(connection) as queries:
            assert client.get(url, **headers).status_code == 200, url
        found.append(len(queries))
    return found


def test_pages_and_exports_cost_the_same_with_more_rows(history):
    client = Client()
    client.force_login(make_user(username="wanda", groups=("Watchers",)))
    more(history, 0, 2)
    few = counts(client, URLS)
    more(history, 2, 18)
    assert counts(client, URLS) == few


def test_api_costs_the_same_with_more_rows(history):
    user = make_user(username="viewer", perms=["workflows.view_workflowsession"])
    _, secret = api_token_create(user=user, name="t")
    headers = {"HTTP_AUTHORIZATION": f"Bearer {secret}"}
    # The token's first use records when it was used; later ones within a while do not.
    Client().get("/api/insights/waits", **headers)
    more(history, 0, 2)
    few = counts(Client(), API_URLS, **headers)
    more(history, 2, 18)
    assert counts(Client(), API_URLS, **headers) == few
