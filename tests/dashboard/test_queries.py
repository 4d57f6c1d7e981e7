"""Every page costs the same number of queries however many rows it shows.

Each test counts a page's queries, adds many more rows of every kind it shows, and counts
again. The first four queries of every page are the login and permission checks: the
session row, the user, the user's own permissions and the user's group permissions.
"""

from __future__ import annotations

import textwrap

import pytest

from tests.dashboard.conftest import Driver
from tests.support.factories import write_job
from workflows.selectors.sessions import session_cursor
from workflows.services import sessions
from workflows.services.agents import agent_ensure
from workflows.services.projects import project_ensure

pytestmark = pytest.mark.django_db

AUTH = 4  # session, user, user permissions, group permissions
LIVE_AFTER = 1  # the newest event id


def grow(driver: Driver, other_driver: Driver, decider, count: int = 3) -> None:
    """More of everything: stacks, nested sessions, agents, runs, reviews, decisions, events."""
    for n in range(count):
        agent = agent_ensure(project=driver.project, agent_id=f"extra-{n}")
        extra = Driver(project=driver.project, agent=agent, catalog=driver.catalog)
        extra.to_wrap_up(goal=f"extra {n}")
        extra.start(job="nested", workflow="only")
        other_driver.start(workflow="quick")
        other_driver.finish({"notes.md": "notes.md"})
    driver.to_wrap_up()
    for _ in range(count):
        driver.deliver_changes({"summary.md": "summary.md"}, by=decider)
        driver.fail_review({"summary.md": "summary.md"})


def test_overview(watching, driver, other_driver, decider, django_assert_num_queries):
    driver.to_wrap_up()
    # auth, newest event id, active sessions with progress, their active runs, tracked
    # workflows in progress, recent events
    expected = AUTH + LIVE_AFTER + 4
    with django_assert_num_queries(expected):
        assert watching.get("/").status_code == 200

    grow(driver, other_driver, decider)

    with django_assert_num_queries(expected):
        html = watching.get("/").content.decode()
    assert html.count('data-testid="stack-entry"') == 8
    with django_assert_num_queries(expected):
        watching.get("/", headers={"X-Live-Fragment": "1"})


def test_session_page(deciding, driver, other_driver, decider, django_assert_num_queries):
    session = driver.to_wrap_up()
    url = f"/sessions/{session.session_id}/"
    # auth, newest event id, the session (with project, agent, parent, workflow, job), its
    # nested sessions, the workflow's steps, runs, reviews, human decisions, events
    expected = AUTH + LIVE_AFTER + 7
    with django_assert_num_queries(expected):
        assert deciding.get(url).status_code == 200

    for _ in range(3):
        driver.deliver_changes({"summary.md": "summary.md"}, by=decider)
        driver.fail_review({"summary.md": "summary.md"})
    sessions.session_go_to_step(project=driver.project, agent=driver.agent, step_id="gather")
    driver.finish({"notes.md": "notes.md", "extras": ["extra1.md", "extra2.md"]})
    driver.start(job="nested", workflow="only")

    with django_assert_num_queries(expected):
        html = deciding.get(url).content.decode()
    # one failed review, then three times: changes requested (a human verdict) and a failure
    assert html.count('data-testid="review-row"') == 7
    assert html.count('data-testid="decision-row"') == 3
    assert html.count('data-testid="child-session"') == 1


def test_file_viewer(watching, driver, django_assert_num_queries):
    session = driver.start()
    driver.finish({"notes.md": "notes.md"})
    url = f"/sessions/{session.session_id}/files/?path=notes.md"
    # auth, newest event id, the session, the outputs of its runs
    expected = AUTH + LIVE_AFTER + 2
    with django_assert_num_queries(expected):
        assert watching.get(url).status_code == 200

    for _ in range(5):
        driver.finish({"a.md": "a.md", "b.md": "b.md"})
        sessions.session_go_to_step(project=driver.project, agent=driver.agent, step_id="gather")
        driver.finish({"notes.md": "notes.md", "extras": ["extra1.md", "extra2.md"]})

    with django_assert_num_queries(expected):
        assert watching.get(url).status_code == 200


JOB = textwrap.dedent(
    """\
    name: {name}
    version: "1.0.0"
    summary: "Job {name}"
    common_job_info_provided_to_all_steps_at_runtime: "x"
    workflows:
      - name: one
        summary: "One"
        steps: [s1, [s2, s3]]
      - name: two
        summary: "Two"
        steps: [s3]
    steps:
      - {{id: s1, name: S1, description: d, instructions_file: steps/s1.md,
          outputs: {{}}, reviews: []}}
      - {{id: s2, name: S2, description: d, instructions_file: steps/s2.md,
          outputs: {{}}, reviews: []}}
      - {{id: s3, name: S3, description: d, instructions_file: steps/s3.md,
          outputs: {{}}, reviews: []}}
    """
)


def test_jobs_page(watching, project, catalog, tmp_path, django_assert_num_queries):
    from workflows.services.catalog import Catalog

    catalog.view()
    # auth, newest event id, projects (for the filter and the catalogs alike), current jobs,
    # their workflows, the workflows' steps, load errors
    expected = AUTH + LIVE_AFTER + 5
    with django_assert_num_queries(expected):
        assert watching.get("/jobs/").status_code == 200

    for n in range(3):
        root = tmp_path / f"more{n}"
        (root / ".deepwork" / "jobs").mkdir(parents=True)
        for j in range(3):
            write_job(root, f"job{j}", JOB.format(name=f"job{j}"), ["s1", "s2", "s3"])
        broken = root / ".deepwork" / "jobs" / "broken"
        broken.mkdir()
        (broken / "job.yml").write_text("name: [\n")
        Catalog(project_ensure(root_path=root.resolve())).view()

    with django_assert_num_queries(expected):
        html = watching.get("/jobs/").content.decode()
    assert html.count('data-testid="load-error"') == 3
    assert html.count('data-testid="job-workflow"') >= 18
    with django_assert_num_queries(expected):
        watching.get(f"/jobs/?project={project.pk}", headers={"X-Live-Fragment": "1"})


@pytest.mark.parametrize(
    "query", ["", "?status=active", "?job=demo&agent=agent-two&started_from=2000-01-01"]
)
def test_sessions_list(
    watching, driver, other_driver, decider, tmp_path, query, django_assert_num_queries
):
    driver.start()
    # auth, newest event id, the page of sessions with progress, projects and job names for
    # the filter form; no COUNT(*)
    expected = AUTH + LIVE_AFTER + 3
    with django_assert_num_queries(expected):
        assert watching.get(f"/sessions/{query}").status_code == 200

    grow(driver, other_driver, decider)
    project_ensure(root_path=tmp_path)

    with django_assert_num_queries(expected) as captured:
        html = watching.get(f"/sessions/{query}").content.decode()
    assert 'data-testid="session-row"' in html
    assert not any("COUNT(*)" in q["sql"].upper() for q in captured.captured_queries)


def test_sessions_list_next_page(watching, driver, django_assert_num_queries, monkeypatch):
    from dashboard import selectors

    monkeypatch.setattr(selectors, "SESSIONS_PER_PAGE", 3)
    started = [driver.start(workflow="quick") for _ in range(8)]
    expected = AUTH + LIVE_AFTER + 3
    with django_assert_num_queries(expected):
        response = watching.get(f"/sessions/?before={session_cursor(started[5])}")
    assert response.content.decode().count('data-testid="session-row"') == 3
