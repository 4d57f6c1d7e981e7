"""The Watchers and Deciders groups that migrate creates."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group, Permission
from django.core.management.sql import emit_post_migrate_signal

from dashboard.apps import ensure_groups
from tests.dashboard.conftest import client_for
from tests.support.factories import make_user

pytestmark = pytest.mark.django_db

WATCH = {
    "reviews.view_humandecision",
    "reviews.view_reviewresult",
    "workflows.view_agent",
    "workflows.view_event",
    "workflows.view_job",
    "workflows.view_jobloaderror",
    "workflows.view_project",
    "workflows.view_step",
    "workflows.view_steprun",
    "workflows.view_workflow",
    "workflows.view_workflowsession",
    "workflows.view_workflowstep",
    # The tracker's tables (their own app): watching covers them too.
    "tracker.view_trackedworkflow",
    "tracker.view_phase",
    "tracker.view_task",
    "tracker.view_decision",
    "tracker.view_issue",
    "tracker.view_milestone",
    # The workflow tools' names and filters (their own app).
    "workflow_tools.view_workflowtoolname",
    "workflow_tools.view_workflowtoolfilter",
    # The DAG scheduler's runs (a proxy of the sessions above).
    "dag.view_dagrun",
    # DeepWork 0.14's session jobs.
    "workflows.view_sessionjob",
    # The insights' tallies.
    "insights.view_sessiontally",
    "insights.view_agenttally",
    "insights.view_steptimetally",
}
DECIDE = {
    "workflows.abort_session",
    "workflows.drive_session",
    "reviews.decide_review",
    "tracker.resolve_blocker",
    "dag.decide_human_step",
}


def permissions_of(name: str) -> set[str]:
    return {
        f"{app}.{codename}"
        for app, codename in Group.objects.get(name=name).permissions.values_list(
            "content_type__app_label", "codename"
        )
    }


def test_migrate_made_both_groups():
    assert permissions_of("Watchers") == WATCH
    assert permissions_of("Deciders") == WATCH | DECIDE


def test_making_them_again_changes_nothing_and_keeps_additions():
    extra = Permission.objects.get(codename="add_group")
    Group.objects.get(name="Watchers").permissions.add(extra)
    Group.objects.get(name="Deciders").permissions.remove(
        Permission.objects.get(codename="decide_review")
    )

    ensure_groups()
    emit_post_migrate_signal(verbosity=0, interactive=False, db="default")  # as migrate does

    assert Group.objects.filter(name__in=["Watchers", "Deciders"]).count() == 2
    assert permissions_of("Watchers") == WATCH | {"auth.add_group"}
    assert permissions_of("Deciders") == WATCH | DECIDE


def test_a_deleted_group_comes_back():
    Group.objects.filter(name="Deciders").delete()
    emit_post_migrate_signal(verbosity=0, interactive=False, db="default")
    assert permissions_of("Deciders") == WATCH | DECIDE


def test_the_groups_grant_what_the_pages_check(driver):
    session = driver.to_wrap_up()
    watcher = make_user(username="w", groups=("Watchers",))
    decider = make_user(username="d", groups=("Deciders",))
    assert watcher.has_perm("workflows.view_workflowsession")
    assert not watcher.has_perm("reviews.decide_review")
    assert not watcher.has_perm("tracker.resolve_blocker")
    assert decider.has_perms(list(DECIDE))
    url = f"/sessions/{session.session_id}/"
    assert client_for(watcher).post(url + "abort/", {"reason": "r"}).status_code == 403
    assert client_for(decider).post(url + "abort/", {"reason": "r"}).status_code == 302
