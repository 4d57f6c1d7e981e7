"""A REST action that finds the database locked by another writer answers 503 in plain words."""

from __future__ import annotations

import pytest
from django.db import connection

from tests.abuse.test_protocol import WriteLock
from tests.api.conftest import assert_error
from workflows.db import BUSY_MESSAGE
from workflows.models import WorkflowSession

pytestmark = pytest.mark.django_db(transaction=True)


def wait_briefly_for_locks() -> None:
    """This connection gives up on a held lock after 0.2 s instead of the configured wait."""
    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            cursor.execute("PRAGMA busy_timeout = 200")
        else:
            cursor.execute("SET lock_timeout = '200ms'")


def test_a_start_while_another_writer_holds_the_lock_is_503_and_changes_nothing(operator, project):
    body = {"project": project.pk, "job_name": "demo", "workflow_name": "main", "goal": "g"}
    operator.get(f"/api/projects/{project.pk}/jobs")  # the catalog is synced before the lock
    wait_briefly_for_locks()

    with WriteLock():
        response = operator.post("/api/sessions", body)

    error = assert_error(response, 503, "database_busy")
    assert error["message"] == BUSY_MESSAGE
    assert response["Retry-After"] == "2"
    assert not WorkflowSession.objects.exists()
    # The same request once the lock is gone succeeds.
    assert operator.post("/api/sessions", body).status_code == 201
