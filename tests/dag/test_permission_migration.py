"""Human DAG steps had no permission of their own (people used ``reviews.decide_review``): the
migration that gives the scheduler ``dag.decide_human_step`` grants it to every group and
person holding the borrowed one, so nobody loses what they could do, and to nobody else."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group, Permission, User
from django.contrib.contenttypes.models import ContentType

from dag.models import DagRun
from tests.support.model_moves import migrate

pytestmark = pytest.mark.django_db(transaction=True)


def fresh(user: User) -> User:
    return User.objects.get(pk=user.pk)  # has_perm caches


def test_who_decided_reviews_may_decide_human_steps_after_the_migration():
    migrate([("dag", None)])
    try:
        assert not Permission.objects.filter(codename="decide_human_step").exists()
        decide_review = Permission.objects.get(
            content_type__app_label="reviews", codename="decide_review"
        )
        reviewers = Group.objects.create(name="Reviewers")
        reviewers.permissions.add(decide_review)
        Group.objects.create(name="Bystanders")
        in_group = User.objects.create_user("ann")
        in_group.groups.add(reviewers)
        direct = User.objects.create_user("bob")
        direct.user_permissions.add(decide_review)
        neither = User.objects.create_user("cy")
        deciders = Group.objects.get(name="Deciders")
        assert deciders.permissions.filter(pk=decide_review.pk).exists()
    finally:
        migrate()

    holders = set(
        Group.objects.filter(permissions__codename="decide_human_step").values_list(
            "name", flat=True
        )
    )
    assert holders == {"Reviewers", "Deciders"}
    assert fresh(in_group).has_perm("dag.decide_human_step")
    assert fresh(direct).has_perm("dag.decide_human_step")
    assert not fresh(neither).has_perm("dag.decide_human_step")
    permission = Permission.objects.get(codename="decide_human_step")
    assert permission.content_type == ContentType.objects.get_for_model(
        DagRun, for_concrete_model=False
    )
    assert (permission.content_type.app_label, permission.content_type.model) == ("dag", "dagrun")
