"""Every operation refuses callers without a valid token (401) or its permission (403), in the
one error shape; tokens store only a hash."""

from __future__ import annotations

import hashlib
from datetime import timedelta

import pytest
from django.db import IntegrityError
from django.test import Client
from django.utils import timezone

from accounts.models import ApiToken
from accounts.services import api_token_authenticate, api_token_create, api_token_revoke
from api.api import api
from api.auth import TokenAuth
from tests.api.conftest import (
    ABORT,
    DECIDE,
    DECIDE_HUMAN_STEP,
    DRIVE,
    RESOLVE_BLOCKER,
    VIEW,
    Caller,
    assert_error,
)
from tests.support.factories import make_user
from workflows.errors import InvalidInput

pytestmark = pytest.mark.django_db

# Every operation, with the permission it needs. Ids need not exist: authentication and the
# permission are checked before anything else.
ADD_PROJECT = "workflows.add_project"
OPERATIONS = [
    ("get", "/api/projects", VIEW),
    ("post", "/api/projects", ADD_PROJECT),
    ("get", "/api/projects/1", VIEW),
    ("delete", "/api/projects/1", ADD_PROJECT),
    ("get", "/api/projects/1/jobs", VIEW),
    ("get", "/api/sessions", VIEW),
    ("get", "/api/sessions/deadbeef", VIEW),
    ("get", "/api/events", VIEW),
    ("post", "/api/sessions", DRIVE),
    ("post", "/api/sessions/deadbeef/finish", DRIVE),
    ("post", "/api/sessions/deadbeef/go-to-step", DRIVE),
    ("post", "/api/sessions/deadbeef/abort", ABORT),
    ("post", "/api/sessions/deadbeef/steps/gather/override", DECIDE),
    ("post", "/api/sessions/deadbeef/steps/gather/request-changes", DECIDE),
    ("get", "/api/tracker/workflows", VIEW),
    ("get", "/api/tracker/workflows/1", VIEW),
    ("get", "/api/tracker/workflows/1/tasks", VIEW),
    ("get", "/api/tracker/workflows/1/decisions", VIEW),
    ("get", "/api/tracker/workflows/1/issues", VIEW),
    ("get", "/api/tracker/workflows/1/milestones", VIEW),
    ("get", "/api/tracker/tasks/1/subtasks", VIEW),
    ("post", "/api/tracker/issues/1/resolve", RESOLVE_BLOCKER),
    ("get", "/api/projects/1/published-workflows", VIEW),
    ("post", "/api/projects/1/published-workflows/runs", DRIVE),
    ("get", "/api/projects/1/published-workflows/runs/deadbeef", VIEW),
    ("post", "/api/projects/1/published-workflows/runs/deadbeef/cancel", ABORT),
    ("get", "/api/dag/workflows", VIEW),
    ("get", "/api/dag/workflows/dag-1", VIEW),
    ("get", "/api/dag/workflows/dag-1/steps/a/result", VIEW),
    ("get", "/api/dag/agents?project=1", VIEW),
    ("post", "/api/dag/workflows", DRIVE),
    ("post", "/api/dag/workflows/dag-1/execute", DRIVE),
    ("post", "/api/dag/workflows/dag-1/delete", DRIVE),
    ("post", "/api/dag/workflows/dag-1/steps/a/complete", DECIDE_HUMAN_STEP),
    ("post", "/api/dag/workflows/dag-1/steps/a/fail", DECIDE_HUMAN_STEP),
    ("get", "/api/insights/waits", VIEW),
    ("get", "/api/insights/waits/csv", VIEW),
    ("get", "/api/sessions/deadbeef/history", VIEW),
    ("get", "/api/sessions/deadbeef/history/markdown", VIEW),
]
ALL_PERMS = (VIEW, DRIVE, ABORT, DECIDE, RESOLVE_BLOCKER, DECIDE_HUMAN_STEP, ADD_PROJECT)


def call(caller: Caller, method: str, url: str):
    if method == "delete":
        return caller.delete(url)
    return caller.get(url) if method == "get" else caller.post(url, {})


@pytest.mark.parametrize(("method", "url", "perm"), OPERATIONS)
def test_without_a_token_is_401(method, url, perm):
    error = assert_error(call(Caller(Client(), None), method, url), 401, "unauthorized")
    assert "Authorization: Bearer" in error["message"]


@pytest.mark.parametrize(("method", "url", "perm"), OPERATIONS)
def test_a_wrong_token_is_401(method, url, perm, make_caller):
    caller = make_caller(*ALL_PERMS)
    caller.token = caller.token[:-2] + "xx"
    response = call(caller, method, url)
    assert_error(response, 401, "unauthorized")
    assert response["WWW-Authenticate"] == "Bearer"


@pytest.mark.parametrize(("method", "url", "perm"), OPERATIONS)
def test_a_revoked_token_is_401(method, url, perm, make_caller):
    caller = make_caller(*ALL_PERMS)
    assert api_token_revoke(token=ApiToken.objects.get(user=caller.user))
    assert_error(call(caller, method, url), 401, "unauthorized")


@pytest.mark.parametrize(("method", "url", "perm"), OPERATIONS)
def test_without_the_permission_is_403(method, url, perm, make_caller):
    caller = make_caller(*(p for p in ALL_PERMS if p != perm))
    error = assert_error(call(caller, method, url), 403, "forbidden")
    assert error["message"] == f"This needs the permission '{perm}'"


@pytest.mark.parametrize(("method", "url", "perm"), OPERATIONS)
def test_with_the_permission_gets_past_authentication(method, url, perm, make_caller):
    response = call(make_caller(perm), method, url)
    assert response.status_code not in (401, 403), response.content


def test_other_schemes_and_malformed_headers_are_401(make_caller):
    caller = make_caller(VIEW)
    for header in (f"Token {caller.token}", caller.token, "Bearer", "Bearer ", "Basic eDp5"):
        response = caller.client.get("/api/projects", headers={"Authorization": header})
        assert_error(response, 401, "unauthorized")


def test_an_inactive_users_token_is_401(make_caller):
    caller = make_caller(VIEW)
    caller.user.is_active = False
    caller.user.save(update_fields=["is_active"])
    assert_error(caller.get("/api/projects"), 401, "unauthorized")


def test_a_superuser_needs_no_granted_permission(db):
    root = make_user(username="root", superuser=True)
    _, secret = api_token_create(user=root, name="root")
    assert Caller(Client(), secret).get("/api/projects").status_code == 200


def test_only_a_hash_and_a_prefix_of_the_secret_are_stored(db):
    user = make_user(username="alice")
    token, secret = api_token_create(user=user, name="ci")
    assert secret.startswith("dwk_")
    assert len(secret) > 40
    stored = ApiToken.objects.get(pk=token.pk)
    assert stored.key_hash == hashlib.sha256(secret.encode()).hexdigest()
    assert stored.prefix == secret[:12]
    assert secret not in str(ApiToken.objects.filter(pk=token.pk).values().get())
    assert str(stored) == f"{secret[:12]}… (ci)"
    assert api_token_authenticate(secret=secret).user == user
    assert api_token_authenticate(secret=secret + "x") is None
    assert api_token_authenticate(secret="not-ours") is None


def test_names_are_unique_among_a_users_live_tokens(db):
    alice = make_user(username="alice")
    bob = make_user(username="bob")
    first, _ = api_token_create(user=alice, name="ci")
    with pytest.raises(InvalidInput, match="already has a live token named 'ci'"):
        api_token_create(user=alice, name="ci")
    api_token_create(user=bob, name="ci")
    assert api_token_revoke(token=first)
    assert not api_token_revoke(token=first)
    api_token_create(user=alice, name="ci")
    with pytest.raises(InvalidInput, match="1 to 100 characters"):
        api_token_create(user=alice, name="  ")
    with pytest.raises(IntegrityError):
        ApiToken.objects.create(user=alice, name="", prefix="p", key_hash="0" * 64)


def test_last_use_is_recorded_at_most_once_a_minute(make_caller):
    caller = make_caller(VIEW)
    token = ApiToken.objects.get(user=caller.user)
    assert token.last_used_at is None

    caller.get("/api/projects")
    token.refresh_from_db()
    first_use = token.last_used_at
    assert first_use is not None
    caller.get("/api/projects")
    token.refresh_from_db()
    assert token.last_used_at == first_use

    long_ago = timezone.now() - timedelta(minutes=5)
    ApiToken.objects.filter(pk=token.pk).update(last_used_at=long_ago)
    caller.get("/api/projects")
    token.refresh_from_db()
    assert token.last_used_at > long_ago


def test_openapi_and_docs_are_public(client):
    schema = client.get("/api/openapi.json")
    assert schema.status_code == 200
    operations = [op for path in schema.json()["paths"].values() for op in path.values()]
    assert len(operations) == len(OPERATIONS)
    for operation in operations:
        assert {"400", "401", "403", "404"} <= set(operation["responses"])
    assert client.get("/api/docs").status_code == 200


def test_every_operation_in_the_document_needs_a_bearer_token(client):
    """Walks the published document, so an operation added without a token fails here."""
    document = client.get("/api/openapi.json").json()
    assert document["components"]["securitySchemes"] == {
        "TokenAuth": {"type": "http", "scheme": "bearer"}
    }
    assert "security" not in document  # no document-wide default that an operation inherits
    operations = [
        (method.upper(), path, operation)
        for path, path_item in document["paths"].items()
        for method, operation in path_item.items()
    ]
    assert operations
    for method, path, operation in operations:
        assert operation.get("security") == [{"TokenAuth": []}], f"{method} {path} is public"
        assert "401" in operation["responses"], f"{method} {path}"


def test_an_operation_that_names_no_auth_still_needs_a_viewers_token():
    # ninja gives an operation declared without ``auth=`` the API's default.
    [default] = api.auth
    assert isinstance(default, TokenAuth)
    assert default.permission == VIEW
