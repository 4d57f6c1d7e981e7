"""The session jobs page: 0.14 conversations' own jobs, read-only, with filters and search."""

from __future__ import annotations

import contextlib
import itertools

import pytest
from django.urls import reverse

from workflows.errors import InvalidInput
from workflows.models import SessionJob
from workflows.services.session_jobs import session_job_register

pytestmark = pytest.mark.django_db

VALID = """\
name: scratch
summary: "A job made up on the spot"
step_arguments: []
workflows:
  only:
    summary: "One step"
    steps:
      - name: go
        instructions: "Do it."
"""
INVALID = "name: scratch\nsummary: broken\nworkflows: []\n"
_n = itertools.count()


def register(project, conversation: str, yaml_text: str = VALID, name: str = "scratch"):
    # An invalid definition is refused to the agent but kept, as get_session_job shows it.
    with contextlib.suppress(InvalidInput):
        session_job_register(
            project=project,
            platform="claude",
            conversation_id=conversation,
            job_name=name,
            yaml_text=yaml_text,
        )
    return SessionJob.objects.get(project=project, conversation_id=conversation, job_name=name)


def listing_url(**query: str) -> str:
    url = reverse("admin:workflows_sessionjob_changelist")
    return url + ("?" + "&".join(f"{k}={v}" for k, v in query.items()) if query else "")


def shown(response) -> set[int]:
    return {obj.pk for obj in response.context["cl"].result_list}


def test_list_filters_and_search(admin_client, project):
    good = register(project, "conv-a")
    bad = register(project, "conv-b", INVALID, name="other")
    assert good.job_id is not None
    assert bad.job_id is None

    page = admin_client.get(listing_url())
    assert page.status_code == 200
    assert shown(page) == {good.pk, bad.pk}
    assert "conv-a" in page.text
    assert "conv-b" in page.text

    assert shown(admin_client.get(listing_url(valid="yes"))) == {good.pk}
    assert shown(admin_client.get(listing_url(valid="no"))) == {bad.pk}
    assert shown(admin_client.get(listing_url(q="conv-b"))) == {bad.pk}
    assert shown(admin_client.get(listing_url(q="conv"))) == set()  # ids match exactly
    assert shown(admin_client.get(listing_url(q="other"))) == {bad.pk}
    assert shown(admin_client.get(listing_url(q="spot"))) == {good.pk}  # words of the YAML


def test_change_page_shows_the_text_error_and_links_and_writes_nothing(admin_client, project):
    bad = register(project, "conv-b", INVALID)
    good = register(project, "conv-a")
    url = reverse("admin:workflows_sessionjob_change", args=[bad.pk])
    page = admin_client.get(url)
    assert page.status_code == 200
    assert "workflows: []" in page.text
    assert "Job definition validation failed" in page.text
    assert 'name="_save"' not in page.text
    good_page = admin_client.get(reverse("admin:workflows_sessionjob_change", args=[good.pk]))
    assert reverse("admin:workflows_job_change", args=[good.job_id]) in good_page.text
    assert "conversation_id__exact=conv-a" in good_page.text

    before = list(SessionJob.objects.values_list("pk", "yaml_text", "job_id"))
    assert admin_client.get(reverse("admin:workflows_sessionjob_add")).status_code == 403
    assert admin_client.post(url, {"yaml_text": "x"}).status_code == 403
    delete = reverse("admin:workflows_sessionjob_delete", args=[bad.pk])
    assert admin_client.post(delete, {"post": "yes"}).status_code == 403
    admin_client.post(
        listing_url(),
        {"action": "delete_selected", "_selected_action": [bad.pk], "post": "yes", "index": 0},
    )
    assert list(SessionJob.objects.values_list("pk", "yaml_text", "job_id")) == before


def test_list_query_count_is_constant(admin_client, project, django_assert_num_queries):
    def grow(rounds: int) -> None:
        for _ in range(rounds):
            n = next(_n)
            register(project, f"c{n}")
            register(project, f"c{n}", INVALID, name="broken")

    grow(1)
    admin_client.get(listing_url())  # the first request of a login refreshes its session
    # login session and user | project filter choices | COUNT | COUNT all | rows, joined |
    # registered_at filter needs no query
    with django_assert_num_queries(6):
        few = admin_client.get(listing_url())
    grow(3)
    with django_assert_num_queries(6):
        many = admin_client.get(listing_url())
    assert len(shown(many)) > len(shown(few)) > 0
