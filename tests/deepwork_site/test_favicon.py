"""The site's icon: named by every dashboard page, and /favicon.ico answers for the rest."""

from __future__ import annotations

import pytest
from django.test import Client

pytestmark = pytest.mark.django_db


def test_favicon_ico_leads_to_the_icon():
    response = Client().get("/favicon.ico")
    assert response.status_code == 301
    assert response["Location"] == "/static/dashboard/favicon.svg"


def test_pages_name_the_icon(client, django_user_model):
    client.force_login(django_user_model.objects.create_superuser("root", "r@x.org", "pw"))
    page = client.get("/").content.decode()
    assert '<link rel="icon" href="/static/dashboard/favicon.svg"' in page
