"""The API docs page works on a machine with no internet access."""

from __future__ import annotations

import re

from django.test import Client


def test_the_docs_page_loads_swagger_from_this_server_not_a_cdn():
    page = Client().get("/api/docs")
    assert page.status_code == 200
    assets = re.findall(r'(?:src|href)="([^"]+)"', page.content.decode())
    assert any(asset.endswith("swagger-ui-bundle.js") for asset in assets), assets
    assert all(asset.startswith("/static/") for asset in assets), assets
