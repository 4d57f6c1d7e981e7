"""Admin pages read a constant number of queries however many rows there are."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse

from reviews.rulings import review_request_changes
from tests.conftest import NESTED_JOB
from tests.support.factories import write_job
from workflows.models import StepRun, WorkflowSession
from workflows.services.agents import agent_ensure
from workflows.services.projects import project_ensure

pytestmark = pytest.mark.django_db

_counter = itertools.count()

# Every page starts with the same two: the login session and its user.
# Then, per changelist:
#   project filter choices | COUNT of the filtered rows | COUNT of all rows (small tables only;
#   big ones set show_full_result_count = False) | the page of rows, related rows joined |
#   date hierarchy (small tables only): first/last date, then the distinct dates of the range.
CHANGELISTS = {
    # filter, COUNT, rows
    "workflows_workflowsession": 5,
    "workflows_event": 5,
    "workflows_steprun": 5,
    "reviews_reviewresult": 5,
    # COUNT, rows, date range, dates
    "reviews_humandecision": 6,
    # filter, COUNT, COUNT all, rows
    "workflows_agent": 6,
    "workflows_job": 6,
    "workflows_workflow": 6,
    "workflows_step": 6,
    "workflows_workflowstep": 6,
    "workflows_jobloaderror": 6,
    # COUNT, COUNT all, rows
    "workflows_project": 5,
}


def grow(driver, tmp_path, rounds: int) -> None:
    """More of everything, all through the services: projects, agents, jobs (good and broken),
    and sessions that reach a failed review with a pending ruling."""
    for _ in range(rounds):
        n = next(_counter)
        project_ensure(root_path=(tmp_path / f"other{n}").resolve())
        agent_ensure(project=driver.project, agent_id=f"named-{n}")
        root = Path(driver.project.root_path)
        write_job(root, f"nested{n}", NESTED_JOB, ["first", "second"])
        write_job(root, f"broken{n}", "name: [unclosed\n", [])
        finished = driver.start(job="nested", workflow="only")
        driver.finish(finished, {"first.md": "first.md"})
        run = driver.fail_review(driver.start())
        review_request_changes(
            step_run=run,
            feedback="More",
            by=get_user_model().objects.get_or_create(username="ann")[0],
            via="admin",
        )


@pytest.fixture
def grown(driver, tmp_path):
    return lambda rounds: grow(driver, tmp_path, rounds)


@pytest.mark.parametrize(("name", "expected"), CHANGELISTS.items(), ids=list(CHANGELISTS))
def test_changelist_query_count_is_constant(
    name, expected, admin_client, grown, django_assert_num_queries
):
    url = reverse(f"admin:{name}_changelist")
    grown(1)
    admin_client.get(url)  # the first request of a login refreshes its session

    with django_assert_num_queries(expected):
        few = admin_client.get(url)
    grown(3)
    with django_assert_num_queries(expected):
        many = admin_client.get(url)

    assert len(many.context["cl"].result_list) > len(few.context["cl"].result_list) > 0


def test_session_page_query_count_is_constant(admin_client, driver, django_assert_num_queries):
    driver.start()  # the sessions below sit on top of it, so each has a parent
    short = driver.start()
    long = driver.start()
    driver.fail_review(long)
    assert short.runs.count() == 1
    assert long.runs.count() == 4

    def page(session: WorkflowSession) -> None:
        url = reverse("admin:workflows_workflowsession_change", args=[session.pk])
        assert admin_client.get(url).status_code == 200

    page(short)
    # the session with the project, agent, parent, job and workflow it links to; its step runs
    with django_assert_num_queries(2 + 2):
        page(short)
    with django_assert_num_queries(2 + 2):
        page(long)


def test_step_run_page_query_count_is_constant(admin_client, driver, django_assert_num_queries):
    session = driver.start()
    first = driver.fail_review(session)
    other = driver.fail_review(driver.start())
    driver.hand_in_failing(other.session)
    review_request_changes(
        step_run=other,
        feedback="More",
        by=get_user_model().objects.get_or_create(username="ann")[0],
        via="admin",
    )
    assert (first.reviews.count(), other.reviews.count()) == (1, 2)

    def page(run: StepRun) -> None:
        url = reverse("admin:workflows_steprun_change", args=[run.pk])
        assert admin_client.get(url).status_code == 200

    page(first)
    # the run with the session and step it links to; its reviews; its decisions
    with django_assert_num_queries(2 + 3):
        page(first)
    with django_assert_num_queries(2 + 3):
        page(other)
