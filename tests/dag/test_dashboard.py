"""Dashboard pages of DAG workflows: the list, the DAG with each step's status and agent,
people completing and failing human steps, the agents page; access rules and query counts."""

from __future__ import annotations

import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from dag import services as dag
from tests.dashboard.conftest import client_for
from tests.support.factories import make_user
from workflows.models import Event, Project, StepRun

pytestmark = pytest.mark.django_db

PLAN = [
    {"step_id": "plan", "description": "Plan", "assigned_role": "swe"},
    {"step_id": "a", "description": "A", "assigned_role": "swe", "depends_on": ["plan"]},
    {"step_id": "b", "description": "B", "assigned_role": "swe", "depends_on": ["plan"]},
    {
        "step_id": "approve",
        "description": "OK?",
        "assigned_role": "human",
        "depends_on": ["a", "b"],
    },
]


@pytest.fixture
def proj(tmp_path) -> Project:
    return Project.objects.create(root_path=str(tmp_path), name="proj")


def run_to_approval(proj: Project) -> str:
    dag.dag_agent_register(project=proj, agent_id="w", roles=["swe"])
    wid = dag.dag_define(project=proj, creator_id="c", name="Ship", description="", steps=PLAN)
    wid = wid.job.dir_name
    dag.dag_execute(project=proj, workflow_id=wid, triggering_agent_id="c")
    for step in ("plan", "a", "b"):
        dag.dag_report_completion(project=proj, workflow_id=wid, step_id=step, agent_id="w")
    return wid


def test_pages_show_the_dag_fan_out_fan_in_and_agents(proj):
    wid = run_to_approval(proj)
    watching = client_for(make_user(username="wanda", groups=("Watchers",)))
    listing = watching.get("/dag/").content.decode()
    assert f'data-workflow-id="{wid}" data-status="running"' in listing
    page = watching.get(f"/dag/{wid}/").content.decode()
    # Three columns: plan, then a and b side by side, then the approval after both.
    assert page.count('data-testid="dag-column"') == 3
    assert 'data-step-id="approve" data-status="pending"' in page
    assert "after a, b" in page
    assert 'data-testid="dag-complete"' not in page  # a watcher cannot decide
    agents = watching.get("/agents/").content.decode()
    assert 'data-agent-id="w" data-responsive="true"' in agents
    fragment = watching.get(f"/dag/{wid}/", headers={"X-Live-Fragment": "1"})
    assert fragment["X-Live-Fragment"] == "1"
    assert watching.get("/dag/dag-nope/").status_code == 404


def test_a_decider_completes_the_human_step_and_a_watcher_may_not(proj):
    wid = run_to_approval(proj)
    watching = client_for(make_user(username="wanda", groups=("Watchers",)))
    refused = watching.post(f"/dag/{wid}/steps/approve/complete/", {"result": "yes"})
    assert refused.status_code == 403
    assert StepRun.objects.get(step_id="approve").status == "ready"
    deciding = client_for(make_user(username="dana", groups=("Deciders",)))
    assert 'data-testid="dag-complete"' in deciding.get(f"/dag/{wid}/").content.decode()
    done = deciding.post(f"/dag/{wid}/steps/approve/complete/", {"result": '{"ok": true}'})
    assert done.status_code == 302
    run = StepRun.objects.get(step_id="approve")
    assert run.status == "completed"
    assert run.result == {"ok": True}
    event = Event.objects.filter(kind=Event.Kind.DAG_STEP_COMPLETED).order_by("id").last()
    assert event.payload["by"] == "dana"
    assert "completed" in deciding.get("/dag/").content.decode()
    # Again: nothing changes, and the page says so.
    again = deciding.post(f"/dag/{wid}/steps/approve/complete/", {"result": "x"}, follow=True)
    assert "already reported completed; nothing changed" in again.content.decode()


def test_human_steps_need_the_dags_own_permission_not_the_reviews(proj):
    wid = run_to_approval(proj)
    view = "workflows.view_workflowsession"
    reviewer = client_for(make_user(username="rita", perms=(view, "reviews.decide_review")))
    assert 'data-testid="dag-complete"' not in reviewer.get(f"/dag/{wid}/").content.decode()
    refused = reviewer.post(f"/dag/{wid}/steps/approve/complete/", {"result": "yes"})
    assert refused.status_code == 403
    assert StepRun.objects.get(step_id="approve").status == "ready"
    person = client_for(make_user(username="hal", perms=(view, "dag.decide_human_step")))
    assert 'data-testid="dag-complete"' in person.get(f"/dag/{wid}/").content.decode()
    assert person.post(f"/dag/{wid}/steps/approve/complete/", {"result": "yes"}).status_code == 302
    assert StepRun.objects.get(step_id="approve").status == "completed"


def test_a_decider_fails_the_human_step_with_a_reason(proj):
    wid = run_to_approval(proj)
    deciding = client_for(make_user(username="dana", groups=("Deciders",)))
    empty = deciding.post(f"/dag/{wid}/steps/approve/fail/", {"error_message": " "}, follow=True)
    assert "error_message must say what went wrong" in empty.content.decode()
    deciding.post(f"/dag/{wid}/steps/approve/fail/", {"error_message": "not good enough"})
    page = deciding.get(f"/dag/{wid}/").content.decode()
    assert "Step &#x27;approve&#x27; failed: not good enough" in page


def test_the_fail_button_looks_destructive_and_says_it_fails_the_workflow(proj):
    wid = run_to_approval(proj)
    deciding = client_for(make_user(username="dana", groups=("Deciders",)))
    page = deciding.get(f"/dag/{wid}/").content.decode()
    [button] = re.findall(r'<button[^>]*data-testid="dag-fail-submit"[^>]*>[^<]*</button>', page)
    assert 'class="danger"' in button
    assert "whole workflow" in button
    [complete] = re.findall(r'<form[^>]*data-testid="dag-complete".*?</form>', page, re.S)
    assert "danger" not in complete


def test_the_agents_page_is_in_the_menu(proj):
    watching = client_for(make_user(username="wanda", groups=("Watchers",)))
    overview = watching.get("/").content.decode()
    assert 'id="nav-agents" href="/agents/"' in overview
    agents = watching.get("/agents/").content.decode()
    assert 'id="nav-agents" href="/agents/" aria-current="page"' in agents
    assert 'id="nav-dag" href="/dag/" aria-current' not in agents


def test_pages_cost_the_same_queries_however_many_rows(proj):
    watching = client_for(make_user(username="wanda", groups=("Watchers",)))

    def count(path: str) -> int:
        with CaptureQueriesContext(connection) as queries:
            assert watching.get(path).status_code == 200
        return len(queries)

    first = run_to_approval(proj)
    before = count("/dag/"), count("/agents/"), count(f"/dag/{first}/")
    for _ in range(19):
        run_to_approval(proj)
    for n in range(19):
        dag.dag_agent_register(project=proj, agent_id=f"x{n}", roles=["qa"])
    wide = [{"step_id": f"s{n}", "description": "x"} for n in range(30)]
    big = dag.dag_define(project=proj, creator_id="c", name="big", description="", steps=wide)
    dag.dag_execute(project=proj, workflow_id=big.job.dir_name, triggering_agent_id="c")
    assert (count("/dag/"), count("/agents/"), count(f"/dag/{big.job.dir_name}/")) == before


def test_pages_show_times_as_every_other_page_and_each_steps_result(proj):
    import re

    dag.dag_agent_register(project=proj, agent_id="w", roles=["swe"])
    wid = dag.dag_define(
        project=proj, creator_id="c", name="One", description="", steps=PLAN[:2]
    ).job.dir_name
    dag.dag_execute(project=proj, workflow_id=wid, triggering_agent_id="c")
    dag.dag_report_completion(
        project=proj, workflow_id=wid, step_id="plan", agent_id="w", result={"files": 3}
    )
    watching = client_for(make_user(username="wanda", groups=("Watchers",)))
    iso_with_micro = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+")
    for url in ("/dag/", f"/dag/{wid}/", "/agents/"):
        page = watching.get(url).content.decode()
        assert not iso_with_micro.search(re.sub(r'datetime="[^"]*"', "", page)), url
        assert re.search(r">\d{4}-\d\d-\d\d \d\d:\d\d:\d\d</time>", page), url
    page = watching.get(f"/dag/{wid}/").content.decode()
    assert page.count('data-testid="dag-result"') == 1
    assert "&quot;files&quot;: 3" in page
