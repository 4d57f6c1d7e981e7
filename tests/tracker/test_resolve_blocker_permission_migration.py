"""Answering a blocker became the tracker's own permission: on a server upgraded from before it,
every group and person that could answer blockers (holding ``reviews.decide_review``) still can,
and nobody else gains it; taken back, the permission is gone with its grants."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group, Permission, User
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from tests.support.model_moves import migrate

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [("tracker", "0001_initial")]
RESOLVE = "tracker.resolve_blocker"


def holders() -> tuple[set[str], set[str]]:
    resolve = Permission.objects.filter(
        content_type__app_label="tracker", codename="resolve_blocker"
    )
    groups = set(Group.objects.filter(permissions__in=resolve).values_list("name", flat=True))
    users = User.objects.filter(user_permissions__in=resolve)
    return groups, set(users.values_list("username", flat=True))


def test_the_holders_of_decide_review_are_granted_resolve_blocker():
    decide = Permission.objects.get(content_type__app_label="reviews", codename="decide_review")
    reviewers = Group.objects.create(name="Reviewers")
    reviewers.permissions.add(decide)
    Group.objects.create(name="Readers")
    rita = User.objects.create_user("rita")
    rita.user_permissions.add(decide)
    User.objects.create_user("walt")

    migrate(BEFORE)
    try:
        assert not Permission.objects.filter(codename="resolve_blocker").exists()
        assert holders() == (set(), set())
        # The upgrade itself, before any post_migrate tops the Deciders group up.
        executor = MigrationExecutor(connection)
        executor.migrate([("tracker", "0002_resolve_blocker_permission")])
        assert holders() == ({"Deciders", "Reviewers"}, {"rita"})
        assert User.objects.get(username="rita").has_perm(RESOLVE)
        assert not User.objects.get(username="walt").has_perm(RESOLVE)
    finally:
        migrate()
