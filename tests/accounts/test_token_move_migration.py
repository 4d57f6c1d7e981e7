"""``ApiToken`` moved from ``api`` to ``accounts`` with no SQL: a database holding tokens,
taken back to before the move and forward again, keeps every token (read through
``accounts.models.ApiToken``), and its permissions stay attached to the one content type."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group, Permission, User
from django.contrib.contenttypes.models import ContentType
from django.db import connection

from accounts.models import ApiToken
from accounts.services import api_token_authenticate, api_token_create, api_token_revoke
from tests.support.model_moves import migrate

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [("api", "0003_hosted15"), ("accounts", None)]


def test_tokens_survive_the_move_to_accounts():
    alice = User.objects.create_user("alice")
    kept, secret = api_token_create(user=alice, name="laptop", mcp=True, mcp_roles=["swe"])
    gone, _ = api_token_create(user=alice, name="old")
    api_token_revoke(token=gone)
    content_type = ContentType.objects.get(app_label="accounts", model="apitoken")
    view = Permission.objects.get(content_type=content_type, codename="view_apitoken")
    group = Group.objects.create(name="Token watchers")
    group.permissions.add(view)
    expected = sorted(ApiToken.objects.values_list("pk", "name", "key_hash", "revoked_at"))

    migrate(BEFORE)
    try:
        # Before the move the same row is the api app's, holding the same permissions.
        assert ContentType.objects.get(pk=content_type.pk).app_label == "api"
        with connection.cursor() as cursor:
            cursor.execute("SELECT COUNT(*) FROM api_apitoken")
            assert cursor.fetchone()[0] == 2
    finally:
        migrate()

    assert sorted(ApiToken.objects.values_list("pk", "name", "key_hash", "revoked_at")) == expected
    assert ApiToken._meta.db_table == "api_apitoken"
    found = api_token_authenticate(secret=secret)
    assert found is not None
    assert (found.pk, found.mcp_roles) == (kept.pk, ["swe"])
    assert ContentType.objects.get(pk=content_type.pk).app_label == "accounts"
    assert not ContentType.objects.filter(app_label="api", model="apitoken").exists()
    assert list(group.permissions.all()) == [view]
    alice = User.objects.get(pk=alice.pk)
    alice.groups.add(group)
    assert alice.has_perm("accounts.view_apitoken")
