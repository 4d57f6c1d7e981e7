"""Who a ``/mcp`` request acts as, in process: ``identify`` and its cost per request."""

from __future__ import annotations

from pathlib import Path

import pytest

from api.services import api_token_create, api_token_revoke
from mcp_bridge import hosted
from mcp_bridge.hosted import Identity, Refused, identify, still_authorised
from tests.factories import make_user
from tests.hosted.conftest import DRIVE
from workflows.models import Agent
from workflows.services.projects import project_ensure

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _fresh_process_caches():
    # The caches live as long as a server process; each test here is a new "process".
    for cache in (hosted._agents, hosted._projects, hosted._permissions):
        cache.clear()


def ask(secret: str, **options: str | None) -> Identity:
    return identify(
        secret=secret,
        project_ref=options.get("project"),
        toolsets_ref=options.get("toolsets"),
        sub_agent=options.get("agent"),
        default_toolsets=("deepwork",),
    )


def test_an_agent_per_token_and_sub_agent_and_one_query_per_request(
    project_dir: Path, django_assert_num_queries
):
    project = project_ensure(root_path=project_dir)
    user = make_user(username="alice", perms=(DRIVE,))
    token, secret = api_token_create(user=user, name="My Laptop", mcp=True, mcp_project=project)
    first = ask(secret)
    sub = ask(secret, agent="writer")
    assert first.agent.agent_id == f"token-{token.pk}-my-laptop"
    assert sub.agent.agent_id == f"token-{token.pk}-my-laptop/writer"
    assert Agent.objects.filter(explicit=True).count() == 2
    # After the first request: the token lookup alone (agent, project, permission remembered).
    with django_assert_num_queries(1):
        again = ask(secret, agent="writer", toolsets="deepwork,tracker")
    assert again.agent.pk == sub.agent.pk
    assert again.toolsets == ("deepwork", "tracker")
    assert still_authorised(token.pk)
    api_token_revoke(token=token)
    assert not still_authorised(token.pk)
    with pytest.raises(Refused) as refused:
        ask(secret)
    assert refused.value.status == 401
