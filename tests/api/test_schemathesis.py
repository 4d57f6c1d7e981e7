"""Property-based tests of every operation against the published OpenAPI document.

Schemathesis generates valid and invalid requests from /api/openapi.json and sends them to the
Django WSGI app in this process (so against the test database), with a superuser's token;
each answer must be no server error and must match the document (status code, content type,
body schema). ``max_examples`` stays small so the whole module runs in seconds.
"""

from __future__ import annotations

import pytest
import schemathesis
from django.core.wsgi import get_wsgi_application
from hypothesis import HealthCheck, settings

from api.services import api_token_create
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
def bearer(django_user_model, project) -> dict[str, str]:
    """A superuser's token, over a project with one running session to find."""
    sessions.session_start(
        project=project,
        agent=agent_ensure(project=project, agent_id="a1"),
        catalog=Catalog(project).view(),
        job_name="demo",
        workflow_name="main",
        goal="g",
    )
    root = django_user_model.objects.create_superuser(username="root", password="x")
    _, secret = api_token_create(user=root, name="schemathesis")
    return {"Authorization": f"Bearer {secret}"}


@pytest.mark.django_db(transaction=True)
@schema.parametrize()
@settings(
    max_examples=10,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
def test_api_conforms_to_its_schema(case, bearer):
    case.call_and_validate(headers=bearer)
