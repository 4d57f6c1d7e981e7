"""Every model's admin pages render with real rows; nothing can be added, changed or deleted."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from django.contrib import admin
from django.contrib.auth import get_user_model
from django.http import QueryDict
from django.urls import reverse

from reviews.models import HumanDecision, ReviewResult
from reviews.rulings import review_request_changes
from workflows.models import (
    Agent,
    Event,
    Job,
    JobLoadError,
    Project,
    Step,
    StepRun,
    Workflow,
    WorkflowSession,
    WorkflowStep,
)

pytestmark = pytest.mark.django_db

MODELS = [
    Project,
    Agent,
    Job,
    Workflow,
    Step,
    WorkflowStep,
    JobLoadError,
    WorkflowSession,
    StepRun,
    Event,
    ReviewResult,
    HumanDecision,
]


def url(model, view: str, *args) -> str:
    return reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_{view}", args=args)


def test_every_model_is_registered():
    assert {m for m in MODELS if admin.site.is_registered(m)} == set(MODELS)


@pytest.mark.parametrize("model", MODELS, ids=lambda m: m.__name__)
def test_pages_render_and_nothing_can_be_written(model, admin_client, every_model):
    obj = model.objects.order_by("id").first()
    assert obj is not None, f"the services wrote no {model.__name__}"
    count = model.objects.count()

    listing = admin_client.get(url(model, "changelist"))
    assert listing.status_code == 200
    assert url(model, "change", obj.pk) in listing.text
    page = admin_client.get(url(model, "change", obj.pk))
    assert page.status_code == 200
    # View-only, even for a superuser: no form to save, no delete link ...
    assert 'name="_save"' not in page.text
    assert url(model, "delete", obj.pk) not in page.text
    # ... and every way to write is refused.
    if model is Project:
        # A project is added through ``project_add`` on a page of its own
        # (tests/admin/test_project_add.py); an empty form adds nothing.
        assert admin_client.post(url(model, "add"), {}).status_code == 200
    else:
        assert admin_client.get(url(model, "add")).status_code == 403
        assert admin_client.post(url(model, "add"), {}).status_code == 403
    assert admin_client.post(url(model, "change", obj.pk), {}).status_code == 403
    assert admin_client.get(url(model, "delete", obj.pk)).status_code == 403
    assert admin_client.post(url(model, "delete", obj.pk), {"post": "yes"}).status_code == 403
    bulk = admin_client.post(
        url(model, "changelist"),
        {"action": "delete_selected", "_selected_action": [obj.pk], "post": "yes", "index": 0},
    )
    assert bulk.status_code in (200, 302)
    assert model.objects.count() == count


def test_session_page_shows_its_step_runs_and_history_links(admin_client, every_model):
    session = every_model.session
    page = admin_client.get(url(WorkflowSession, "change", session.pk))

    for run in session.runs.all():
        assert url(StepRun, "change", run.pk) in page.text
    # The reviews' link comes from the reviews app, which the sessions' admin does not import.
    for model in (Event, StepRun, ReviewResult):
        assert f"{url(model, 'changelist')}?session__id__exact={session.pk}" in page.text


def test_step_run_page_shows_its_reviews_and_decisions(admin_client, every_model):
    page = admin_client.get(url(StepRun, "change", every_model.pk))

    assert "Needs improvement" in page.text
    assert "Cite the sources" in page.text


def changelist_ids(response) -> set[int]:
    return {obj.pk for obj in response.context["cl"].result_list}


def test_session_search_and_filters(admin_client, driver, every_model):
    active = every_model.session
    sessions_url = url(WorkflowSession, "changelist")

    by_id = admin_client.get(sessions_url, {"q": active.session_id})
    assert changelist_ids(by_id) == {active.pk}

    by_status = admin_client.get(sessions_url, {"status__exact": "completed"})
    assert changelist_ids(by_status) == set(
        WorkflowSession.objects.filter(status="completed").values_list("pk", flat=True)
    )
    assert changelist_ids(by_status)

    by_goal = admin_client.get(sessions_url, {"q": "summarise"})
    assert changelist_ids(by_goal) == {active.pk}


def test_event_filters_by_kind_and_session(admin_client, every_model):
    session = every_model.session
    events_url = url(Event, "changelist")

    failed = admin_client.get(events_url, {"kind__exact": "review_failed"})
    assert changelist_ids(failed) == set(
        Event.objects.filter(kind="review_failed").values_list("pk", flat=True)
    )
    assert changelist_ids(failed)

    linked = admin_client.get(events_url, {"session__id__exact": session.pk})
    assert changelist_ids(linked) == set(session.events.values_list("pk", flat=True))

    searched = admin_client.get(events_url, {"q": session.session_id})
    assert changelist_ids(searched) == changelist_ids(linked)

    by_agent = admin_client.get(events_url, {"q": session.agent.agent_id})
    assert changelist_ids(by_agent) == set(
        Event.objects.filter(agent=session.agent).values_list("pk", flat=True)
    )
    assert changelist_ids(by_agent) - changelist_ids(linked)


def test_review_and_decision_filters(admin_client, every_model):
    failed = admin_client.get(url(ReviewResult, "changelist"), {"passed__exact": "0"})
    assert changelist_ids(failed) == set(
        ReviewResult.objects.filter(passed=False).values_list("pk", flat=True)
    )
    assert changelist_ids(failed)

    pending = admin_client.get(url(HumanDecision, "changelist"), {"state": "pending"})
    assert changelist_ids(pending) == set(HumanDecision.objects.values_list("pk", flat=True))
    delivered = admin_client.get(url(HumanDecision, "changelist"), {"state": "delivered"})
    assert changelist_ids(delivered) == set()


def test_step_run_search_by_session_or_step(admin_client, every_model):
    session = every_model.session
    found = admin_client.get(url(StepRun, "changelist"), {"q": session.session_id})
    assert changelist_ids(found) == set(session.runs.values_list("pk", flat=True))

    by_step = admin_client.get(url(StepRun, "changelist"), {"q": "wrap_up"})
    assert changelist_ids(by_step) == {every_model.pk}


def test_decision_search_by_session(admin_client, driver, every_model):
    other = driver.fail_review(driver.start())
    review_request_changes(
        step_run=other,
        feedback="Other",
        by=get_user_model().objects.get_or_create(username="ann")[0],
        via="admin",
    )

    found = admin_client.get(
        url(HumanDecision, "changelist"), {"q": every_model.session.session_id}
    )
    assert changelist_ids(found) == set(
        HumanDecision.objects.filter(step_run=every_model).values_list("pk", flat=True)
    )
    by_name = admin_client.get(url(HumanDecision, "changelist"), {"q": "ann"})
    assert changelist_ids(by_name) == set(
        HumanDecision.objects.filter(step_run=other).values_list("pk", flat=True)
    )


def test_sessions_filter_by_start_date(admin_client, every_model):
    sessions_url = url(WorkflowSession, "changelist")
    listing = admin_client.get(sessions_url)
    (started,) = [f for f in listing.context["cl"].filter_specs if f.title == "started at"]
    links = {c["display"]: c["query_string"] for c in started.choices(listing.context["cl"])}

    today = admin_client.get(sessions_url + links["Today"])
    assert changelist_ids(today) == set(WorkflowSession.objects.values_list("pk", flat=True))
    assert changelist_ids(today)

    # The same one-day range a week earlier holds none of them.
    week_ago = QueryDict(links["Today"][1:], mutable=True)
    for key, value in list(week_ago.items()):
        week_ago[key] = str(datetime.fromisoformat(value) - timedelta(days=7))
    earlier = admin_client.get(sessions_url, week_ago)
    assert earlier.context["cl"].has_filters
    assert changelist_ids(earlier) == set()
