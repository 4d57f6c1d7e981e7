"""Security headers on every kind of response."""

from __future__ import annotations

import pytest
from django.test import Client


@pytest.mark.django_db
@pytest.mark.parametrize("url", ["/login/", "/", "/api/docs", "/admin/login/"])
def test_every_response_carries_a_content_security_policy(url):
    response = Client().get(url)
    policy = response.headers["Content-Security-Policy"]
    directives = dict(part.strip().split(" ", 1) for part in policy.split(";"))
    assert directives["script-src"] == "'self'"
    assert directives["frame-ancestors"] == "'none'"
    assert response.headers["X-Frame-Options"] == "DENY"
    assert response.headers["X-Content-Type-Options"] == "nosniff"


def test_messages_are_kept_in_the_session_not_a_cookie(settings):
    # The admin's "new API token" message carries the secret once; it must not ride in a cookie.
    assert settings.MESSAGE_STORAGE.endswith("SessionStorage")
