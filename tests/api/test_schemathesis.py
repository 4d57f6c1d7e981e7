"""Property-based tests of every operation against the published OpenAPI document.

Schemathesis generates valid and invalid requests from /api/openapi.json and sends them to the
Django WSGI app in this process (so against the test database), with a superuser's token.
Every answer must be no server error and must match the document (status code, content type,
body and headers), and every schema-valid request must be accepted. Schema-violating requests
need not all be refused: a query parameter mutated into an object is sent as other parameters,
which the API ignores, so ``negative_data_rejection`` is left out. ``max_examples`` stays small
(API_FUZZ_EXAMPLES raises it for a longer hunt).
"""

from __future__ import annotations

import os

import pytest
import schemathesis
from django.core.signals import request_finished, request_started
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections
from hypothesis import HealthCheck, settings
from schemathesis.specs.openapi.checks import negative_data_rejection, positive_data_acceptance

from accounts.services import api_token_create
from tests.support.factories import make_user
from workflows.services import sessions
from workflows.services.agents import agent_ensure
from workflows.services.catalog import Catalog

schema = schemathesis.openapi.from_wsgi("/api/openapi.json", get_wsgi_application())
# The token is ours to send (below), and unknown query parameters are ignored, as most HTTP
# APIs do, rather than refused.
schema.config.generation.update(
    with_security_parameters=False, allow_extra_parameters=False, database=":memory:"
)


@pytest.fixture
def _keep_test_connection():
    """Keep the WSGI handler from closing the test's connection around each request, as
    Django's own test client does; the test runs inside a transaction on that connection."""
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


@pytest.fixture
def bearer(_keep_test_connection, project) -> dict[str, str]:
    """A superuser's token, over a project with one running session to find."""
    sessions.session_start(
        project=project,
        agent=agent_ensure(project=project, agent_id="a1"),
        catalog=Catalog(project).view(),
        job_name="demo",
        workflow_name="main",
        goal="g",
    )
    root = make_user(username="root", superuser=True)
    _, secret = api_token_create(user=root, name="schemathesis")
    return {"Authorization": f"Bearer {secret}"}


# Not transactional: a finish reaches the quality gate (which needs real transactions, see
# test_actions) only for an existing session, and generated session ids never name one.
@pytest.mark.django_db
@schema.parametrize()
@settings(
    max_examples=int(os.environ.get("API_FUZZ_EXAMPLES", "10")),
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
def test_api_conforms_to_its_schema(case, bearer):
    excluded = [negative_data_rejection]
    if case.method == "POST" and case.operation.path.startswith("/api/dag/"):
        # A DAG's rules (unique step ids, known dependencies, no cycle) and its text rules
        # (agent ids and failure messages not blank once stripped, no NUL anywhere in a step's
        # free JSON result) are beyond what a JSON schema can say, so a schema-valid body may
        # still be refused (400, with the rule named); every other check still applies.
        excluded.append(positive_data_acceptance)
    elif case.method == "POST" and case.operation.path == "/api/projects":
        # A project's folder is checked by the one service every way of adding it shares
        # (absolute, no control characters, not the root, not a regular file), so REST, the
        # command and the admin refuse with the same words (400, naming the rule); part of it
        # is a fact of the server's disk no schema can state. Every other check still applies.
        excluded.append(positive_data_acceptance)
    elif _holds_a_lone_surrogate(case.body) or _holds_a_lone_surrogate(case.query):
        # JSON may carry a lone surrogate ("\ud800") that no UTF-8 text can hold, and no JSON
        # schema can exclude it; the API refuses it (400, "must be valid Unicode text").
        excluded.append(positive_data_acceptance)
    case.call_and_validate(headers=bearer, excluded_checks=excluded)


def _holds_a_lone_surrogate(value: object) -> bool:
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return True
        return False
    if isinstance(value, dict):
        return any(
            _holds_a_lone_surrogate(k) or _holds_a_lone_surrogate(v) for k, v in value.items()
        )
    if isinstance(value, list | tuple):
        return any(_holds_a_lone_surrogate(v) for v in value)
    return False
