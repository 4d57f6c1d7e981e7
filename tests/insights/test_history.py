"""A session's whole history, as JSON and Markdown, from the session page and read back."""

from __future__ import annotations

import json

import pytest
from django.test import Client

from tests.support.factories import make_user
from workflows.models import WorkflowSession

pytestmark = pytest.mark.django_db


@pytest.fixture
def watching(db) -> Client:
    client = Client()
    client.force_login(make_user(username="wanda", groups=("Watchers",)))
    return client


def test_the_session_page_links_both_downloads(history, watching):
    html = watching.get("/sessions/s1/").content.decode()
    assert 'href="/sessions/s1/history.json"' in html
    assert 'href="/sessions/s1/history.md"' in html


def test_json_history_holds_steps_reviews_rulings_and_events(history, watching):
    response = watching.get("/sessions/s3/history.json")
    assert response.status_code == 200
    assert response["Content-Disposition"] == 'attachment; filename="session-s3.json"'
    data = json.loads(response.content)
    assert data["format"] == "deepwork-session-history/1"
    assert data["session"]["session_id"] == "s3"
    assert data["session"]["agent"] == "a2"
    steps = [(s["step_id"], s["status"]) for s in data["steps"]]
    assert steps == [("gather", "invalidated"), ("gather", "completed"), ("wrap_up", "completed")]
    wrap_up = data["steps"][2]
    assert [(r["attempt"], r["passed"], r["feedback"]) for r in wrap_up["reviews"]] == [
        (1, False, "Short")
    ]
    assert wrap_up["reviews"][0]["criteria_results"][0] == {
        "criterion": "Complete",
        "passed": False,
        "feedback": "Too short",
    }
    assert [(d["kind"], d["by"], d["reason"]) for d in wrap_up["decisions"]] == [
        ("override", "dana", "fine as is")
    ]
    # In the order they were written (the outbox's id order).
    assert [e["kind"] for e in data["events"]] == [
        "step_finished",
        "step_finished",
        "review_failed",
    ]
    assert data["events_truncated"] is False


def test_markdown_history_reads_as_a_report(history, watching):
    WorkflowSession.objects.filter(session_id="s1").update(goal="Write ```this``` up")
    response = watching.get("/sessions/s1/history.md")
    assert response["Content-Type"] == "text/markdown; charset=utf-8"
    text = response.content.decode()
    assert text.startswith("# Session s1: demo/main\n")
    assert "### wrap_up (completed)" in text
    assert "- Review attempt 1 of summary.md: **failed** (external: claude)" in text
    assert "  - fail: Complete: Misses note 3" in text
    assert "| review_passed |" in text
    # A goal holding a fence is wrapped in a longer fence, so it cannot end the block early.
    assert "````text\nWrite ```this``` up\n````" in text


def test_unknown_session_or_format(history, watching):
    assert watching.get("/sessions/nope/history.json").status_code == 404
    assert watching.get("/sessions/s1/history.pdf").status_code == 404
