"""The dashboard app, and the two groups a server gives its people.

- **Watchers** may watch: the view permissions of every ``workflows``, ``tracker``, ``dag``,
  ``workflow_tools``, ``reviews`` and ``insights`` model (among them
  ``workflows.view_workflowsession``, which every dashboard page requires).
- **Deciders** may also act: Watchers' permissions plus ``workflows.abort_session``,
  ``workflows.drive_session``, ``reviews.decide_review`` (override a review, request
  changes), ``tracker.resolve_blocker`` (answer a blocker an agent raised) and
  ``dag.decide_human_step`` (complete or fail a DAG step assigned to people).

Neither may add projects (``workflows.add_project``): serving another folder of the server's
disk makes its files readable through sessions, so it is granted by hand, to the people who run
the server, as ``workflows.allow_review_commands`` is.

Both are made, or topped up, after every ``migrate``. Permissions an administrator added to
a group by hand stay.
"""

from __future__ import annotations

from typing import Any

from django.apps import AppConfig
from django.apps import apps as global_apps
from django.apps.registry import Apps
from django.db import DEFAULT_DB_ALIAS
from django.db.models.signals import post_migrate

WATCHED_APPS = ("workflows", "tracker", "dag", "workflow_tools", "reviews", "insights")
DECIDER_PERMISSIONS = (
    ("workflows", "abort_session"),
    ("workflows", "drive_session"),
    ("reviews", "decide_review"),
    ("tracker", "resolve_blocker"),
    ("dag", "decide_human_step"),
)


def ensure_groups(using: str = DEFAULT_DB_ALIAS, apps: Apps = global_apps, **kwargs: Any) -> None:
    """Create the Watchers and Deciders groups and give them their permissions; idempotent."""
    try:
        group_model = apps.get_model("auth", "Group")
        permission_model = apps.get_model("auth", "Permission")
    except LookupError:  # auth is not migrated yet (a partial migrate)
        return
    permissions = permission_model.objects.using(using)
    watch = list(
        permissions.filter(
            content_type__app_label__in=WATCHED_APPS, codename__startswith="view_"
        ).values_list("pk", flat=True)
    )
    decide_filter = None
    for app_label, codename in DECIDER_PERMISSIONS:
        one = permissions.filter(content_type__app_label=app_label, codename=codename)
        decide_filter = one if decide_filter is None else decide_filter | one
    assert decide_filter is not None  # DECIDER_PERMISSIONS is not empty
    decide = list(decide_filter.values_list("pk", flat=True))

    watchers, _ = group_model.objects.using(using).get_or_create(name="Watchers")
    watchers.permissions.add(*watch)
    deciders, _ = group_model.objects.using(using).get_or_create(name="Deciders")
    deciders.permissions.add(*watch, *decide)


class DashboardConfig(AppConfig):
    name = "dashboard"
    verbose_name = "Dashboard"

    def ready(self) -> None:
        # migrate sends post_migrate only for apps with models, so never for this one: top
        # the groups up after each watched app instead, once its permissions exist (auth's
        # handler was connected before ours, so it runs first).
        post_migrate.connect(_on_post_migrate, dispatch_uid="dashboard.ensure_groups")


def _on_post_migrate(
    sender: AppConfig, using: str = DEFAULT_DB_ALIAS, apps: Apps = global_apps, **kwargs: Any
) -> None:
    if sender.label in WATCHED_APPS:
        ensure_groups(using=using, apps=apps)
