"""Who is acting, for the interfaces that hand a request's person to the services."""

from __future__ import annotations

from django.contrib.auth.models import AnonymousUser, User
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest


def signed_in_user(request: HttpRequest) -> User:
    """The person ``request`` was authenticated as, for the services' ``by``.

    Only for views behind a login or a token check, where this never refuses; if such a check
    is ever forgotten, the request is refused rather than acted on by nobody.
    """
    user = request.user
    if isinstance(user, AnonymousUser) or not user.is_authenticated:
        raise PermissionDenied("This needs a signed-in user")
    return user
