"""Who a ``/mcp`` request acts as, in process: ``identify`` and its cost per request."""

from __future__ import annotations

from pathlib import Path

import pytest

from accounts import identity
from accounts.services import api_token_create, api_token_revoke
from mcp_bridge.hosted import auth
from mcp_bridge.hosted.auth import Identity, identify, still_authorised
from mcp_bridge.hosted.refusals import Refused
from tests.mcp_bridge.hosted.conftest import DRIVE
from tests.support.factories import make_user
from workflows.models import Agent
from workflows.services.projects import project_add, project_ensure, project_remove

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _fresh_process_caches():
    # The caches live as long as a server process; each test here is a new "process".
    for cache in (auth._agents, auth._projects, identity._permissions, auth._alive):
        cache.clear()


def ask(secret: str, **options: str | None) -> Identity:
    return identify(
        secret=secret,
        project_ref=options.get("project"),
        toolsets_ref=options.get("toolsets"),
        sub_agent=options.get("agent"),
        default_toolsets=("deepwork",),
        roles=options.get("roles"),
    )


def test_an_agent_per_token_and_sub_agent_and_one_query_per_request(
    project_dir: Path, django_assert_num_queries
):
    project = project_add(root_path=str(project_dir)).project
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


def test_heartbeat_is_written_once_per_interval_and_roles_when_they_change(
    project_dir: Path, django_assert_num_queries, monkeypatch
):
    project = project_add(root_path=str(project_dir)).project
    user = make_user(username="alice", perms=(DRIVE,))
    token, secret = api_token_create(
        user=user, name="ci", mcp=True, mcp_project=project, mcp_roles=["swe"]
    )
    first = ask(secret)
    agent = Agent.objects.get(pk=first.agent.pk)
    assert (agent.roles, agent.takes_dag_steps) == (["swe"], True)
    beat = agent.heartbeat_at
    assert beat is not None
    # Within the interval: no write, only the token lookup.
    with django_assert_num_queries(1):
        ask(secret)
    # The interval over: one heartbeat (update, then the row read back).
    monkeypatch.setattr(auth, "heartbeat_seconds", lambda: 0.0)
    with django_assert_num_queries(3):
        ask(secret)
    assert Agent.objects.get(pk=agent.pk).heartbeat_at > beat
    # Roles named by the header replace the token's, once.
    ask(secret, roles="qa, review")
    assert Agent.objects.get(pk=agent.pk).roles == ["qa", "review"]
    with pytest.raises(Refused) as refused:
        ask(secret, roles=",".join(f"r{n}" for n in range(40)))
    assert (refused.value.status, refused.value.code) == (400, "invalid_roles")
    assert Agent.objects.get(pk=agent.pk).roles == ["qa", "review"]


@pytest.fixture
def roaming() -> str:
    """An unbound MCP token of a person who may drive sessions (a Decider's, say)."""
    user = make_user(username="dec", perms=(DRIVE,))
    return api_token_create(user=user, name="dec", mcp=True)[1]


def test_a_folder_a_stdio_server_registered_is_served_only_once_a_person_hosts_it(
    project_dir: Path, roaming: str
):
    local = project_ensure(root_path=project_dir)
    for ref in (str(local.pk), local.root_path):
        with pytest.raises(Refused) as refused:
            ask(roaming, project=ref)
        assert (refused.value.status, refused.value.code) == (403, "not_served")
        assert f"Project {local.pk} ({local.root_path}) is not hosted" in refused.value.message
    # A token bound to it is refused too.
    user = make_user(username="alice", perms=(DRIVE,))
    bound = api_token_create(user=user, name="b", mcp=True, mcp_project=local)[1]
    with pytest.raises(Refused) as refused:
        ask(bound)
    assert refused.value.code == "not_served"
    project_add(root_path=local.root_path)
    assert ask(roaming, project=str(local.pk)).project.pk == local.pk
    assert ask(bound).project.pk == local.pk


def test_a_removed_project_stops_being_served_within_the_cache_time(
    project_dir: Path, roaming: str, monkeypatch
):
    project = project_add(root_path=str(project_dir)).project
    assert ask(roaming, project=str(project.pk)).project.pk == project.pk
    project_remove(project=project, by="test")
    # Served from this process's memory for at most PROJECT_TTL seconds, then refused.
    monkeypatch.setattr(auth, "PROJECT_TTL", 0.0)
    with pytest.raises(Refused) as refused:
        ask(roaming, project=str(project.pk))
    assert (refused.value.status, refused.value.code) == (403, "not_served")
    assert "was removed from this server" in refused.value.message


@pytest.mark.parametrize("ref", ["²", "٣", "9" * 5000, "99999999999999999999", "0", "-1", " 1"])
def test_an_odd_project_reference_is_a_404_not_a_crash(project_dir: Path, roaming: str, ref: str):
    project_add(root_path=str(project_dir))
    with pytest.raises(Refused) as refused:
        ask(roaming, project=ref)
    assert (refused.value.status, refused.value.code) == (404, "not_found")
    assert refused.value.message == f"No project {ref[:200]!r} (give its id or root path)"
