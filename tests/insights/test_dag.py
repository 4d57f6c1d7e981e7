"""DAG insights (hand-off waits, load per role) on a DAG run through the real services with a
clock the test moves, so every wait is known: figures worked out by hand below.

Timeline (seconds after T0, D1 10:00 UTC), plan: plan (swe) -> a, b (swe), notes (no role);
a, b -> approve (human):
    0    executed; no agent takes swe yet: plan waits
    60   agent w (swe) registers; the dispatch hands it plan          wait 60
    100  plan completed: a, b, notes ready and handed to w at once    waits 0, 0, 0
    150  notes completed;  200  a completed;  300  b completed: approve ready
    900  a person completes approve                                  wait 600
"""

from __future__ import annotations

import datetime as dt

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from dag import services as dag
from insights import dag as dag_insights
from insights.filters import InsightFilter
from tests.dashboard.conftest import client_for
from tests.insights.conftest import D1, D2, D3, at, in_range
from tests.support.factories import make_user
from workflows.models import Project, StepRun

pytestmark = pytest.mark.django_db

T0 = at(D1, 10)
PLAN = [
    {"step_id": "plan", "description": "Plan", "assigned_role": "swe"},
    {"step_id": "a", "description": "A", "assigned_role": "swe", "depends_on": ["plan"]},
    {"step_id": "b", "description": "B", "assigned_role": "swe", "depends_on": ["plan"]},
    {"step_id": "notes", "description": "Notes", "depends_on": ["plan"]},
    {
        "step_id": "approve",
        "description": "OK?",
        "assigned_role": "human",
        "depends_on": ["a", "b"],
    },
]


class Clock:
    def __init__(self, monkeypatch) -> None:
        self.now = T0
        monkeypatch.setattr(timezone, "now", lambda: self.now)

    def at(self, seconds: int) -> None:
        self.now = T0 + dt.timedelta(seconds=seconds)


@pytest.fixture
def run_dag(tmp_path, monkeypatch):
    clock = Clock(monkeypatch)
    project = Project.objects.create(root_path=str(tmp_path), name="proj")
    wid = dag.dag_define(
        project=project, creator_id="c", name="Ship", description="", steps=PLAN
    ).job.dir_name
    dag.dag_execute(project=project, workflow_id=wid, triggering_agent_id="c")

    def report(step: str) -> None:
        dag.dag_report_completion(project=project, workflow_id=wid, step_id=step, agent_id="w")

    def until(seconds: int) -> None:
        steps = [
            (60, lambda: dag.dag_agent_register(project=project, agent_id="w", roles=["swe"])),
            (60, lambda: dag.dag_dispatch(project=project)),
            (100, lambda: report("plan")),
            (150, lambda: report("notes")),
            (200, lambda: report("a")),
            (300, lambda: report("b")),
            (
                900,
                lambda: dag.dag_person_report(
                    workflow_id=wid,
                    step_id="approve",
                    by=make_user(username="pat"),
                    via="dashboard",
                ),
            ),
        ]
        for when, action in steps:
            if when <= seconds and when > until.done:
                clock.at(when)
                action()
        until.done = seconds

    until.done = 0
    return project, wid, until


def waits(filters):
    return [
        (
            w.role,
            w.handoffs,
            w.median_seconds,
            w.p90_seconds,
            w.longest_seconds,
            w.longest_step,
        )
        for w in dag_insights.handoff_waits(filters=filters)
    ]


def loads(filters):
    return [
        (r.role, r.waiting, r.held, r.completed, r.failed, round(r.busy_hours * 3600), r.agents)
        for r in dag_insights.role_load(filters=filters)
    ]


def test_the_services_stamp_when_a_step_became_ready(run_dag):
    _, _, until = run_dag
    until(100)
    ready = dict(StepRun.objects.values_list("step_id", "ready_at"))
    assert ready["plan"] == T0
    assert ready["a"] == ready["b"] == ready["notes"] == T0 + dt.timedelta(seconds=100)
    assert ready["approve"] is None  # still pending


def test_handoff_waits_per_role(run_dag):
    _, wid, until = run_dag
    until(900)
    # swe: 60, 0, 0 -> sorted 0, 0, 60: the median is the 2nd (0), p90 the 3rd (60), the longest
    # plan's. The step with no role: 0. human: approve's 600.
    assert waits(in_range()) == [
        ("swe", 3, 0.0, 60.0, 60.0, "plan"),
        ("(no role)", 1, 0.0, 0.0, 0.0, "notes"),
        ("human", 1, 600.0, 600.0, 600.0, "approve"),
    ]
    assert {w.longest_workflow for w in dag_insights.handoff_waits(filters=in_range())} == {wid}
    # w claimed the agents' steps; the person's step has no agent.
    assert [row[0] for row in waits(in_range(agent_id="w"))] == ["swe", "(no role)"]
    assert waits(InsightFilter(since=D2, until=D3)) == []
    for other in ("deepwork", "deepwork-0.9", "tracker"):
        assert waits(in_range(dialect=other)) == []
    assert waits(in_range(workflow="Ship")) == waits(in_range())
    assert waits(in_range(workflow="other")) == []


def test_the_longest_wait_names_the_first_run_of_a_tie(run_dag):
    _, _, until = run_dag
    until(900)
    # b waits as long as plan (60 s; 0, 60, 60): plan, the earlier run, is named. A second
    # longer (0, 60, 61): b.
    b = StepRun.objects.get(step_id="b")
    StepRun.objects.filter(pk=b.pk).update(ready_at=b.assigned_at - dt.timedelta(seconds=60))
    assert waits(in_range())[0] == ("swe", 3, 60.0, 60.0, 60.0, "plan")
    StepRun.objects.filter(pk=b.pk).update(ready_at=b.assigned_at - dt.timedelta(seconds=61))
    assert waits(in_range())[0] == ("swe", 3, 60.0, 61.0, 61.0, "b")


def test_load_per_role_while_running_and_after(run_dag):
    _, _, until = run_dag
    until(120)
    # At 120 s: plan done (busy 60..100 = 40 s); a, b and notes held by w; approve pending.
    assert loads(in_range()) == [
        ("swe", 0, 2, 1, 0, 40, 1),
        ("(no role)", 0, 1, 0, 0, 0, 0),
    ]
    until(300)
    # approve waits for a person; notes (100..150 = 50 s), a (100..200) and b (100..300) done.
    assert loads(in_range()) == [
        ("human", 1, 0, 0, 0, 0, 0),
        ("swe", 0, 0, 3, 0, 340, 1),
        ("(no role)", 0, 0, 1, 0, 50, 0),
    ]
    until(900)
    assert loads(in_range()) == [
        ("swe", 0, 0, 3, 0, 340, 1),
        ("(no role)", 0, 0, 1, 0, 50, 0),
        ("human", 0, 0, 1, 0, 0, 0),
    ]
    # Out of the range nothing was finished; w still takes swe, idle.
    assert loads(InsightFilter(since=D2, until=D3)) == [("swe", 0, 0, 0, 0, 0, 1)]


def test_the_dag_tab_and_exports(run_dag):
    _, wid, until = run_dag
    until(900)
    client = client_for(make_user(username="wanda", groups=("Watchers",)))
    query = f"since={D1}&until={D3}"
    page = client.get(f"/insights/dag/?{query}").content.decode()
    assert page.count('data-testid="chart"') == 2
    assert f'href="/dag/{wid}/"' in page  # each hand-off bar opens the slowest workflow
    assert "DAG workflows behind this chart" in page
    csv_text = client.get(f"/insights/export/dag-handoffs.csv?{query}").content.decode()
    assert csv_text.splitlines()[1].split(",")[:4] == ["swe", "3", "0.0", "60.0"]
    data = client.get(f"/insights/export/dag-load.json?{query}").json()
    assert data["columns"][:4] == ["role", "waiting_now", "held_now", "completed"]
    assert data["rows"][0][:4] == ["swe", 0, 0, 3]


def test_the_dag_tab_costs_the_same_with_more_workflows_steps_and_roles(run_dag):
    project, _, until = run_dag
    until(900)
    client = client_for(make_user(username="wanda", groups=("Watchers",)))
    query = f"since={D1}&until={D3}"
    urls = [
        f"/insights/dag/?{query}",
        f"/insights/export/dag-handoffs.json?{query}",
        f"/insights/export/dag-load.csv?{query}",
    ]

    def counts() -> list[int]:
        found = []
        for url in urls:
            with CaptureQueriesContext(connection) as queries:
                assert client.get(url).status_code == 200, url
            found.append(len(queries))
        return found

    few = counts()
    roles = [f"r{n}" for n in range(5)]
    dag.dag_agent_register(project=project, agent_id="v", roles=roles)
    wide = [
        {"step_id": f"s{n}", "description": "S", "assigned_role": roles[n % 5]} for n in range(10)
    ]
    wid = dag.dag_define(
        project=project, creator_id="c", name="Wide", description="", steps=wide
    ).job.dir_name
    dag.dag_execute(project=project, workflow_id=wid, triggering_agent_id="c")
    for n in range(6):
        dag.dag_report_completion(project=project, workflow_id=wid, step_id=f"s{n}", agent_id="v")
    assert len(loads(in_range())) == 8  # swe, no role, human and five more roles
    assert counts() == few


def test_a_step_taken_from_a_lost_agent_waits_again_from_then(run_dag, monkeypatch):
    project, _, until = run_dag
    until(60)  # w holds plan from 60 s
    clock = Clock(monkeypatch)
    clock.at(500)  # w has been silent past the responsive limit (300 s)
    dag.dag_agent_register(project=project, agent_id="x", roles=["swe"])
    dag.dag_dispatch(project=project)
    plan = StepRun.objects.select_related("assigned_agent").get(step_id="plan")
    assert (plan.handoffs, plan.assigned_agent.agent_id) == (1, "x")
    assert plan.ready_at == plan.assigned_at == T0 + dt.timedelta(seconds=500)
    # The wait counted is the last one, from being taken back to x claiming it at once.
    assert waits(in_range()) == [("swe", 1, 0.0, 0.0, 0.0, "plan")]
