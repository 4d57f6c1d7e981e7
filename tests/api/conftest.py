"""REST API fixtures: users with exactly the permissions a test names, and their tokens."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pytest
from django.test import Client

from accounts.services import api_token_create
from tests.support.factories import make_user

VIEW = "workflows.view_workflowsession"
DRIVE = "workflows.drive_session"
ABORT = "workflows.abort_session"
DECIDE = "reviews.decide_review"
RESOLVE_BLOCKER = "tracker.resolve_blocker"
DECIDE_HUMAN_STEP = "dag.decide_human_step"
# Every permission over sessions at once: a caller holding them all is still refused what its
# kind of credential may not do.
EVERYTHING = (VIEW, DRIVE, ABORT, DECIDE, RESOLVE_BLOCKER, DECIDE_HUMAN_STEP)


@dataclass
class Caller:
    """A test client speaking as one token."""

    client: Client
    token: str | None
    user: object = None

    def _headers(self) -> dict:
        return {"Authorization": f"Bearer {self.token}"} if self.token else {}

    def get(self, path: str, **params):
        return self.client.get(path, params, headers=self._headers())

    def delete(self, path: str):
        return self.client.delete(path, headers=self._headers())

    def post(self, path: str, body: dict | None = None):
        return self.client.post(
            path,
            json.dumps(body or {}),
            content_type="application/json",
            headers=self._headers(),
        )


@pytest.fixture
def make_caller(django_user_model):
    """``make_caller(*perms, username=...)``: a new user holding ``perms``, with a token."""

    def make(*perms: str, username: str | None = None) -> Caller:
        username = username or f"user{django_user_model.objects.count() + 1}"
        user = make_user(username=username, perms=perms)
        _, secret = api_token_create(user=user, name="test")
        return Caller(Client(), secret, user)

    return make


@pytest.fixture
def viewer(make_caller) -> Caller:
    return make_caller(VIEW, username="viewer")


@pytest.fixture
def operator(make_caller) -> Caller:
    """May do everything the API offers."""
    return make_caller(VIEW, DRIVE, ABORT, DECIDE, username="alice")


def assert_error(response, status: int, code: str) -> dict:
    """The one error shape, with ``status`` and ``code``; returns the error object."""
    assert response.status_code == status, response.content
    assert response["Content-Type"] == "application/json; charset=utf-8"
    body = response.json()
    assert set(body) == {"error"}
    error = body["error"]
    assert set(error) == {"status", "code", "message", "details"}
    assert error["status"] == status
    assert error["code"] == code
    assert isinstance(error["message"], str)
    assert error["message"]
    return error
