"""Each page renders real data from sessions driven through the services."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.conf import settings
from django.urls import reverse

from workflows.models import Event, WorkflowSession
from workflows.services import sessions

pytestmark = pytest.mark.django_db


def tagged(html: str, testid: str) -> list[str]:
    """The opening tags carrying ``data-testid=testid``, in document order."""
    return re.findall(rf'<[^>]*data-testid="{testid}"[^>]*>', html)


def attr(tag: str, name: str) -> str:
    match = re.search(rf'{name}="([^"]*)"', tag)
    assert match, f"{name} not in {tag}"
    return match.group(1)


def test_overview_shows_each_stack_nested_bottom_to_top(watching, driver, other_driver):
    outer = driver.start(goal="Outer goal")
    driver.finish({"notes.md": "notes.md"})
    inner = driver.start(job="nested", workflow="only", goal="Inner goal")
    elsewhere = other_driver.start(workflow="quick", goal="Other agent")
    done = other_driver.start(job="nested", workflow="only")
    sessions.session_abort(
        project=other_driver.project, agent=other_driver.agent, explanation="not needed"
    )

    html = watching.get("/").content.decode()

    stacks = tagged(html, "stack")
    assert [attr(tag, "data-agent-id") for tag in stacks] == [
        driver.agent.agent_id,
        "agent-two",
    ]
    entries = [attr(tag, "data-session-id") for tag in tagged(html, "stack-entry")]
    assert entries == [outer.session_id, inner.session_id, elsewhere.session_id]
    assert done.session_id not in entries  # aborted: no longer on a stack
    # The nested session's <li> sits inside its parent's.
    outer_at = html.index(f'data-session-id="{outer.session_id}"')
    nested_list = html.index('class="stack-list nested"', outer_at)
    assert outer_at < nested_list < html.index(f'data-session-id="{inner.session_id}"')
    steps = re.findall(r'data-testid="current-step">([^<]*)<', html)
    assert steps == ["part_a ‖ part_b", "first", "gather"]
    progress = [
        (attr(tag, "data-done"), attr(tag, "data-total")) for tag in tagged(html, "progress")
    ]
    assert progress == [("1", "4"), ("0", "2"), ("0", "1")]
    assert "Outer goal" in html
    assert 'data-live-after="' in html
    event_ids = [int(attr(tag, "data-event-id")) for tag in tagged(html, "event-row")]
    newest = Event.objects.order_by("-id").first()
    assert event_ids[0] == newest.pk
    assert event_ids == sorted(event_ids, reverse=True)
    assert f'data-live-after="{newest.pk}"' in html
    assert f'data-live-event-id="{newest.pk}"' in html


def test_overview_keeps_only_the_latest_thirty_events(watching, driver):
    driver.start()
    for _ in range(20):
        driver.finish({"notes.md": "notes.md"})
        driver.finish({"a.md": "a.md", "b.md": "b.md"})
        sessions.session_go_to_step(project=driver.project, agent=driver.agent, step_id="gather")
    html = watching.get("/").content.decode()
    assert len(tagged(html, "event-row")) == 30


def test_session_page_shows_picture_runs_reviews_decisions_and_events(watching, driver, decider):
    from reviews.rulings import review_request_changes

    session = driver.to_wrap_up()
    run = session.runs.get(step_id="wrap_up", status="active")
    review_request_changes(step_run=run, feedback="Cite the notes", by=decider, via="dashboard")

    response = watching.get(f"/sessions/{session.session_id}/")
    html = response.content.decode()

    assert response.status_code == 200
    nodes = [(attr(t, "data-step-id"), attr(t, "data-status")) for t in tagged(html, "wf-node")]
    assert nodes == [
        ("gather", "done"),
        ("part_a", "done"),
        ("part_b", "done"),
        ("wrap_up", "current"),
    ]
    entries = [
        (attr(t, "data-entry-index"), attr(t, "data-concurrent")) for t in tagged(html, "wf-entry")
    ]
    assert entries == [("0", "false"), ("1", "true"), ("2", "false")]
    runs = [(attr(t, "data-step-id"), attr(t, "data-status")) for t in tagged(html, "step-run")]
    assert runs == [
        ("gather", "completed"),
        ("part_a", "completed"),
        ("part_b", "completed"),
        ("wrap_up", "active"),
    ]
    links = [attr(t, "data-path") for t in tagged(html, "output-link")]
    assert links == ["notes.md", "extra1.md", "extra2.md", "a.md", "b.md"]
    assert f'href="/sessions/{session.session_id}/files/?path=notes.md"' in html
    assert "gathered" in html  # the notes
    (review,) = tagged(html, "review-row")
    assert attr(review, "data-passed") == "false"
    assert attr(review, "data-attempt") == "1"
    assert attr(review, "data-reviewer-kind") == "external"
    assert "The summary misses the B half" in html
    criteria = [attr(t, "data-passed") for t in tagged(html, "criterion")]
    assert criteria == ["false", "true"]
    assert "Part B is missing" in html
    assert "never-run-reviewer" in html
    (decision,) = tagged(html, "decision-row")
    assert attr(decision, "data-kind") == "request_changes"
    assert "Cite the notes" in html
    assert "dana" in html
    kinds = [attr(t, "data-kind") for t in tagged(html, "event-row")]
    assert kinds[0] == "session_started"
    assert kinds[-3:] == ["step_started", "review_failed", "changes_requested"]
    assert re.search(r'data-testid="current-step">wrap_up<', html)
    progress = tagged(html, "progress")[0]
    assert (attr(progress, "data-done"), attr(progress, "data-total")) == ("3", "4")
    assert f'data-live-session="{session.session_id}"' in html
    # A watcher may not decide: no forms.
    assert not tagged(html, "override-form")
    assert not tagged(html, "abort-form")


def test_session_page_colours_invalidated_and_aborted_steps(watching, driver):
    session = driver.start()
    driver.finish({"notes.md": "notes.md"})
    driver.finish({"a.md": "a.md", "b.md": "b.md"})
    sessions.session_go_to_step(project=driver.project, agent=driver.agent, step_id="part_a")
    sessions.session_abort(project=driver.project, agent=driver.agent, explanation="enough")

    html = watching.get(f"/sessions/{session.session_id}/").content.decode()

    nodes = {attr(t, "data-step-id"): attr(t, "data-status") for t in tagged(html, "wf-node")}
    assert nodes == {
        "gather": "done",
        "part_a": "aborted",
        "part_b": "aborted",
        "wrap_up": "invalidated",
    }
    assert 'data-status="aborted"' in tagged(html, "session-status")[0]
    assert "enough" in html


def test_session_page_offers_the_forms_to_deciders(deciding, driver):
    session = driver.to_wrap_up()
    html = deciding.get(f"/sessions/{session.session_id}/").content.decode()
    for testid in (
        "override-form",
        "override-reason",
        "override-submit",
        "changes-form",
        "changes-feedback",
        "changes-submit",
        "abort-form",
        "abort-reason",
        "abort-submit",
    ):
        assert len(tagged(html, testid)) == 1, testid
    assert 'name="csrfmiddlewaretoken"' in html
    assert '<input type="hidden" name="step_id" value="wrap_up">' in html


def test_the_readmes_step_in_names_what_the_session_page_offers(deciding, driver):
    """The walkthrough's "Step in" sends a person to the session page by the names of its
    panel and forms; each must be there, and the one step running needs no picking."""
    readme = (Path(settings.BASE_DIR) / "README.md").read_text(encoding="utf-8")
    step_in = readme[readme.index("**6. Step in.**") :]
    step_in = step_in[: step_in.index("\n\n")]
    named = [
        " ".join(name.split())  # a name may wrap across lines
        for name in re.findall(r"\*\*([^*]+)\*\*", step_in.removeprefix("**6. Step in.**"))
    ]
    assert {"Decide", "Request changes"} <= set(named)
    session = driver.to_wrap_up()
    html = deciding.get(f"/sessions/{session.session_id}/").content.decode()
    headings = re.findall(r"<h[23][^>]*>([^<]+)</h[23]>", html)
    assert [name for name in named if name not in headings] == []
    assert 'data-testid="changes-step"' not in html  # no menu for one running step
    assert "tick a box" in step_in
    assert len(tagged(html, "abort-confirm")) == 1


def test_concurrent_entry_lets_the_decider_pick_the_step(deciding, driver):
    session = driver.start()
    driver.finish({"notes.md": "notes.md"})
    html = deciding.get(f"/sessions/{session.session_id}/").content.decode()
    assert len(tagged(html, "override-step")) == 1
    assert '<option value="part_a">part_a</option>' in html
    assert '<option value="part_b">part_b</option>' in html


def test_finished_sessions_offer_no_forms(deciding, driver):
    session = driver.start(workflow="quick")
    driver.finish({"notes.md": "notes.md"})
    html = deciding.get(f"/sessions/{session.session_id}/").content.decode()
    assert 'data-status="completed"' in tagged(html, "session-status")[0]
    assert not tagged(html, "actions")


def test_unknown_session_is_a_404(watching):
    response = watching.get("/sessions/nope1234/")
    assert response.status_code == 404
    assert "Session &#x27;nope1234&#x27; not found" in response.content.decode()


def test_fragment_renders_only_the_live_region(watching, driver):
    session = driver.to_wrap_up()
    for url in ("/", f"/sessions/{session.session_id}/", "/jobs/", "/sessions/"):
        full = watching.get(url).content.decode()
        response = watching.get(url, headers={"X-Live-Fragment": "1"})
        fragment = response.content.decode()
        assert response.status_code == 200
        assert response["X-Live-Fragment"] == "1"
        assert "X-Live-Fragment" in response["Vary"]
        assert "<body" not in fragment
        assert 'id="live"' not in fragment
        assert "<body" in full
        # The fragment is exactly what the full page holds inside #live.
        inner = full.split('data-live-event-id="', 1)[1].split(">", 1)[1]
        inner = inner.rsplit("</div>", 1)[0]
        assert fragment.strip() in inner, url


def test_jobs_page_lists_workflows_entries_and_load_errors(watching, project, catalog, driver):
    broken = driver.project.root_path + "/.deepwork/jobs/broken"
    import os

    os.makedirs(broken)
    with open(broken + "/job.yml", "w") as handle:
        handle.write("name: broken\nversion: [not a string\n")
    catalog.view()

    html = watching.get("/jobs/").content.decode()

    names = [attr(t, "data-job-name") for t in tagged(html, "job")]
    assert "demo" in names
    assert "nested" in names
    workflows = [attr(t, "data-workflow-name") for t in tagged(html, "job-workflow")]
    assert workflows[:2] == ["main", "quick"]
    (error,) = tagged(html, "load-error")
    assert attr(error, "data-dir-name") == "broken"
    concurrent = [attr(t, "data-concurrent") for t in tagged(html, "wf-entry")][:3]
    assert concurrent == ["false", "true", "false"]


def test_jobs_page_filters_by_project(watching, project, catalog, tmp_path):
    from workflows.services.projects import project_ensure

    catalog.view()
    other_root = tmp_path / "other"
    other_root.mkdir()
    other = project_ensure(root_path=other_root.resolve())
    html = watching.get(f"/jobs/?project={other.pk}").content.decode()
    shown = [attr(t, "data-project-id") for t in tagged(html, "project-catalog")]
    assert shown == [str(other.pk)]
    assert f'data-live-project="{other.pk}"' in html


def test_sessions_list_filters(watching, driver, other_driver):
    first = driver.start(workflow="quick")
    driver.finish({"notes.md": "notes.md"})
    second = driver.start(job="nested", workflow="only")
    third = other_driver.start()

    def listed(query: str = "") -> list[str]:
        html = watching.get(f"/sessions/{query}").content.decode()
        return [attr(t, "data-session-id") for t in tagged(html, "session-row")]

    assert listed() == [third.session_id, second.session_id, first.session_id]
    assert listed("?status=completed") == [first.session_id]
    assert listed("?job=nested") == [second.session_id]
    assert listed("?agent=agent-two") == [third.session_id]
    assert listed(f"?project={driver.project.pk}") == listed()
    assert listed(f"?project={driver.project.pk + 1000}") == []
    today = first.started_at.date().isoformat()
    assert len(listed(f"?started_from={today}&started_to={today}")) == 3
    assert listed("?started_from=2000-01-01&started_to=2000-01-02") == []
    # An invalid filter is reported and left out.
    response = watching.get("/sessions/?status=bogus")
    assert response.status_code == 200
    assert tagged(response.content.decode(), "filter-errors")
    assert len(tagged(response.content.decode(), "session-row")) == 3


def test_sessions_list_pages_by_keyset(watching, driver, monkeypatch):
    from dashboard import selectors

    monkeypatch.setattr(selectors, "SESSIONS_PER_PAGE", 2)
    started = [driver.start(workflow="quick") for _ in range(5)]
    newest_first = [s.session_id for s in reversed(started)]

    def page(query: str = ""):
        html = watching.get(f"/sessions/{query}").content.decode()
        rows = [attr(t, "data-session-id") for t in tagged(html, "session-row")]
        older = tagged(html, "next-page")
        newer = tagged(html, "prev-page")
        return (
            rows,
            attr(older[0], "href").replace("&amp;", "&") if older else None,
            attr(newer[0], "href").replace("&amp;", "&") if newer else None,
        )

    rows, older, newer = page()
    assert rows == newest_first[:2]
    assert newer is None
    rows, older, newer = page(older)
    assert rows == newest_first[2:4]
    rows, last_older, _ = page(older)
    assert rows == newest_first[4:]
    assert last_older is None
    rows, _, newer = page(newer)
    assert rows == newest_first[:2]
    assert newer is None


def test_pages_put_the_newest_event_id_on_body_and_live(watching, driver):
    session = driver.start()
    newest = Event.objects.order_by("-id").first().pk
    for url in ("/", "/jobs/", "/sessions/", f"/sessions/{session.session_id}/"):
        html = watching.get(url).content.decode()
        assert f'<body data-live-after="{newest}">' in html, url
        assert re.search(rf'<div id="live" data-testid="live" data-live-event-id="{newest}"', html)
        assert "/static/dashboard/live.js" in html


def test_nav_and_logout_form(watching):
    html = watching.get(reverse("dashboard:overview")).content.decode()
    assert tagged(html, "logout-form")
    assert WorkflowSession.objects.count() == 0
    assert tagged(html, "no-stacks")
