"""Tokens allowed MCP: ``manage.py api_token create --mcp [--project]`` and the admin."""

from __future__ import annotations

from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from accounts.models import ApiToken
from accounts.services import api_token_create
from tests.support.factories import make_user
from workflows.errors import InvalidInput
from workflows.services.projects import project_ensure

pytestmark = pytest.mark.django_db


def run(*args: str) -> str:
    out = StringIO()
    call_command("api_token", *args, stdout=out, stderr=StringIO())
    return out.getvalue()


@pytest.fixture
def alice(db):
    return make_user(username="alice")


def test_the_command_makes_mcp_tokens_bound_or_not(alice, project_dir: Path):
    project = project_ensure(root_path=project_dir)
    run("create", "--user", "alice", "--name", "laptop", "--mcp", "--project", str(project.pk))
    run("create", "--user", "alice", "--name", "ci", "--mcp", "--project", str(project_dir))
    run("create", "--user", "alice", "--name", "roaming", "--mcp")
    run("create", "--user", "alice", "--name", "rest")
    tokens = {t.name: (t.mcp, t.mcp_project_id) for t in ApiToken.objects.all()}
    assert tokens == {
        "laptop": (True, project.pk),
        "ci": (True, project.pk),
        "roaming": (True, None),
        "rest": (False, None),
    }
    listing = run("list")
    assert "live, MCP (project" in listing
    assert "live, MCP (any project)" in listing


def test_the_command_refuses_a_project_without_mcp_or_unknown(alice, project_dir: Path):
    project = project_ensure(root_path=project_dir)
    with pytest.raises(CommandError, match="allow MCP to give it one"):
        run("create", "--user", "alice", "--name", "x", "--project", str(project.pk))
    with pytest.raises(CommandError, match="No project '999'"):
        run("create", "--user", "alice", "--name", "x", "--mcp", "--project", "999")
    # Digits of other scripts and ids longer than any id are references to nothing, not crashes.
    for odd in ("²", "9" * 5000):
        with pytest.raises(CommandError, match="No project"):
            run("create", "--user", "alice", "--name", "x", "--mcp", "--project", odd)
    with pytest.raises(InvalidInput):
        api_token_create(user=alice, name="x", mcp_project=project)
    assert not ApiToken.objects.exists()


def test_the_admin_makes_mcp_tokens(admin_client, alice, project_dir: Path):
    project = project_ensure(root_path=project_dir)
    response = admin_client.post(
        "/admin/accounts/apitoken/add/",
        {"user": alice.pk, "name": "laptop", "mcp": "on", "mcp_project": project.pk},
    )
    assert response.status_code == 200
    token = ApiToken.objects.get()
    assert (token.mcp, token.mcp_project) == (True, project)
    # A project without MCP is refused on the form, and nothing is made.
    response = admin_client.post(
        "/admin/accounts/apitoken/add/",
        {"user": alice.pk, "name": "other", "mcp_project": project.pk},
    )
    assert "A project binds MCP use: tick MCP too." in response.content.decode()
    assert ApiToken.objects.count() == 1
    # A token never changes after it is made: its MCP fields are read-only.
    change = admin_client.get(f"/admin/accounts/apitoken/{token.pk}/change/").content.decode()
    assert 'name="mcp"' not in change


def test_roles_of_a_token_agent_from_the_command_and_the_admin(admin_client, alice):
    run("create", "--user", "alice", "--name", "ci", "--mcp", "--roles", "swe, qa,swe")
    assert ApiToken.objects.get(name="ci").mcp_roles == ["swe", "qa"]
    with pytest.raises(CommandError, match="allow MCP to give it some"):
        run("create", "--user", "alice", "--name", "x", "--roles", "swe")
    with pytest.raises(CommandError, match="Roles are names of 1 to 128 characters"):
        run("create", "--user", "alice", "--name", "x", "--mcp", "--roles", "a," + "b" * 129)
    response = admin_client.post(
        "/admin/accounts/apitoken/add/",
        {"user": alice.pk, "name": "laptop", "mcp": "on", "mcp_roles": '["review"]'},
    )
    assert response.status_code == 200
    assert ApiToken.objects.get(name="laptop").mcp_roles == ["review"]
    response = admin_client.post(
        "/admin/accounts/apitoken/add/", {"user": alice.pk, "name": "bad", "mcp_roles": '"swe"'}
    )
    assert "A JSON list of role names, e.g. [&quot;swe&quot;, &quot;qa&quot;]." in (
        response.content.decode()
    )
    assert sorted(ApiToken.objects.values_list("name", flat=True)) == ["ci", "laptop"]
