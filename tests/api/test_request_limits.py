"""Requests past Django's upload limits are refused in the one error shape, never a 500."""

from __future__ import annotations

import json
import logging

import pytest
from django.test import Client

from tests.api.conftest import assert_error

pytestmark = pytest.mark.django_db


def test_a_body_over_the_upload_limit_is_413(operator, settings, project, caplog):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000
    body = {"project": project.pk, "job_name": "demo", "workflow_name": "main", "goal": "x" * 2000}
    with caplog.at_level(logging.ERROR):
        response = operator.post("/api/sessions", body)
    error = assert_error(response, 413, "payload_too_large")
    assert error["message"] == "The request body is larger than this server accepts (1000 bytes)"
    assert error["details"] is None
    # Logged where Django logs it, not as an unhandled error of the API.
    assert [record.name for record in caplog.records] == ["django.security.RequestDataTooBig"]


def test_a_body_under_the_limit_is_read(operator, settings, project):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000
    body = {"project": project.pk, "job_name": "ghost", "workflow_name": "main", "goal": "x"}
    assert len(json.dumps(body)) < 1000
    assert_error(operator.post("/api/sessions", body), 404, "not_found")


def test_permission_is_still_checked_before_the_body(viewer, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 10
    response = viewer.post("/api/sessions", {"goal": "x" * 100})
    assert_error(response, 403, "forbidden")


def test_too_many_query_parameters_is_400(viewer, settings, caplog):
    settings.DATA_UPLOAD_MAX_NUMBER_FIELDS = 5
    query = "&".join(f"job=j{n}" for n in range(6))
    with caplog.at_level(logging.ERROR):
        response = Client().get(
            f"/api/sessions?{query}", headers={"Authorization": f"Bearer {viewer.token}"}
        )
    error = assert_error(response, 400, "bad_request")
    assert error["message"] == "Too many query or form parameters (this server accepts 5)"
    assert [record.name for record in caplog.records] == ["django.security.TooManyFieldsSent"]


def test_the_actions_document_413(client):
    document = client.get("/api/openapi.json").json()
    for path_item in document["paths"].values():
        for method, operation in path_item.items():
            assert ("413" in operation["responses"]) == (method == "post"), operation
            if method == "post":
                assert operation["responses"]["413"]["content"]["application/json"]["schema"] == {
                    "$ref": "#/components/schemas/ErrorOut"
                }
