"""The acting person the interfaces hand to the services."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import AnonymousUser
from django.core.exceptions import PermissionDenied
from django.test import RequestFactory

from accounts.people import signed_in_user
from tests.support.factories import make_user


@pytest.mark.django_db
def test_the_authenticated_user_is_the_one_acting():
    alice = make_user(username="alice")
    request = RequestFactory().get("/")
    request.user = alice
    assert signed_in_user(request) == alice


def test_a_request_nobody_signed_in_to_is_refused_not_acted_on_by_nobody():
    request = RequestFactory().get("/")
    request.user = AnonymousUser()
    with pytest.raises(PermissionDenied, match="signed-in user"):
        signed_in_user(request)
