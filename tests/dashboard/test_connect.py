"""The Connect page: each client's stdio configuration for everyone who may watch, and, for a
person who may make tokens and drive sessions, one new MCP token of their own with the hosted
configuration filled in, shown once."""

from __future__ import annotations

import html
import json
import re
import tomllib

import pytest
from django.contrib.auth.models import User
from django.test import Client

from accounts.models import ApiToken
from accounts.services import api_token_authenticate
from tests.dashboard.conftest import client_for
from tests.support.factories import make_user

pytestmark = pytest.mark.django_db

URL = "/connect/"
WATCH = "workflows.view_workflowsession"
DRIVE = "workflows.drive_session"
MAKE_TOKEN = "accounts.add_apitoken"


@pytest.fixture
def maker(db) -> User:
    return make_user(username="mia", groups=("Deciders",), perms=(MAKE_TOKEN,))


def snippets(page: str, prefix: str) -> dict[str, tuple[str, str]]:
    """``data-testid`` -> (language, text) of the page's ``<pre>`` blocks under ``prefix``."""
    found = re.findall(
        r'<pre data-testid="(' + prefix + r'-[^"]+)" data-language="(\w+)">(.*?)</pre>',
        page,
        re.DOTALL,
    )
    return {testid: (language, html.unescape(text)) for testid, language, text in found}


def test_every_watcher_sees_each_clients_stdio_configuration(watching: Client):
    page = watching.get(URL).content.decode()
    shown = snippets(page, "stdio")
    assert set(shown) == {
        "stdio-claude-code-1",
        "stdio-claude-code-2",
        "stdio-codex-1",
        "stdio-cursor-1",
        "stdio-vscode-1",
    }
    assert shown["stdio-claude-code-1"][1] == (
        "claude mcp add deepwork -- uvx deepwork-server mcp --path .\n"
    )
    command = {"command": "uvx", "args": ["deepwork-server", "mcp", "--path", "."]}
    assert json.loads(shown["stdio-claude-code-2"][1]) == {"mcpServers": {"deepwork": command}}
    assert json.loads(shown["stdio-cursor-1"][1]) == {"mcpServers": {"deepwork": command}}
    assert tomllib.loads(shown["stdio-codex-1"][1]) == {"mcp_servers": {"deepwork": command}}
    vscode = json.loads(shown["stdio-vscode-1"][1])["servers"]["deepwork"]
    assert vscode == {
        "type": "stdio",
        "command": "uvx",
        "args": ["deepwork-server", "mcp", "--path", "${workspaceFolder}"],
    }
    assert ".venv/bin/python manage.py mcpserve --path ." in page
    # A watcher may not make tokens: the page says what is missing, and offers no form.
    assert 'id="connect-form"' not in page
    assert f"<code>{MAKE_TOKEN}</code> and <code>{DRIVE}</code>" in page
    assert 'href="/api/docs"' in page


def test_the_nav_links_the_page_and_the_api_docs(watching: Client):
    page = watching.get("/").content.decode()
    assert 'id="nav-connect" href="/connect/"' in page
    assert 'id="nav-api-docs" href="/api/docs"' in page


def test_one_click_makes_one_token_of_the_person_and_shows_it_once(maker: User, project):
    client = client_for(maker, enforce_csrf=True)
    page = client.get(URL).content.decode()
    csrf = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page)[1]
    response = client.post(
        URL, {"project": project.pk, "name": "laptop", "csrfmiddlewaretoken": csrf}
    )
    assert response.status_code == 200
    assert "no-store" in response["Cache-Control"]
    token = ApiToken.objects.get()
    made = (token.user, token.name, token.mcp, token.mcp_project)
    assert made == (maker, "laptop", True, project)
    page = response.content.decode()
    shown = snippets(page, "hosted")
    url = "http://testserver/mcp"
    config = json.loads(shown["hosted-claude-code-2"][1])
    server = config["mcpServers"]["deepwork"]
    assert (server["type"], server["url"]) == ("http", url)
    secret = server["headers"]["Authorization"].removeprefix("Bearer ")
    # The secret on the page is the new token's, and it works.
    assert api_token_authenticate(secret=secret) == token
    assert json.loads(shown["hosted-cursor-1"][1]) == {
        "mcpServers": {"deepwork": {"url": url, "headers": {"Authorization": f"Bearer {secret}"}}}
    }
    assert json.loads(shown["hosted-vscode-1"][1]) == {
        "servers": {
            "deepwork": {
                "type": "http",
                "url": url,
                "headers": {"Authorization": f"Bearer {secret}"},
            }
        }
    }
    assert tomllib.loads(shown["hosted-codex-1"][1]) == {
        "mcp_servers": {"deepwork": {"url": url, "bearer_token_env_var": "DEEPWORK_MCP_TOKEN"}}
    }
    assert shown["hosted-codex-2"][1] == f"export DEEPWORK_MCP_TOKEN={secret}\n"
    assert shown["hosted-claude-code-1"][1] == (
        f"claude mcp add --transport http --scope user deepwork {url} "
        f"--header 'Authorization: Bearer {secret}'\n"
    )
    assert "it is shown only on this page" in page
    # Never again: the page, fetched again, holds no secret.
    again = client.get(URL).content.decode()
    assert secret not in again
    assert 'data-testid="connect-made"' not in again
    assert ApiToken.objects.count() == 1


def test_a_post_without_the_csrf_token_makes_nothing(maker: User, project):
    response = client_for(maker, enforce_csrf=True).post(URL, {"project": project.pk})
    assert response.status_code == 403
    assert not ApiToken.objects.exists()


@pytest.mark.parametrize(
    "perms",
    [
        (WATCH,),
        (WATCH, DRIVE),  # may drive, but not make tokens
        (WATCH, MAKE_TOKEN),  # may make tokens, but /mcp would refuse them
    ],
)
def test_a_person_without_both_permissions_is_refused(perms, project):
    person = make_user(username="pat", perms=perms)
    response = client_for(person).post(URL, {"project": project.pk})
    assert response.status_code == 403
    assert not ApiToken.objects.exists()


def test_people_who_may_not_watch_do_not_see_it(nobody, client):
    assert client_for(nobody).get(URL).status_code == 403
    assert client.get(URL).status_code == 302


def test_an_unknown_project_or_a_taken_name_is_said_and_makes_nothing(maker: User, project):
    client = client_for(maker)
    response = client.post(URL, {"project": project.pk + 100}, follow=True)
    assert f"project: Project {project.pk + 100} not found" in response.content.decode()
    assert not ApiToken.objects.exists()
    client.post(URL, {"project": project.pk, "name": "laptop"})
    response = client.post(URL, {"project": project.pk, "name": "laptop"})
    assert "already has a live token named &#x27;laptop&#x27;" in response.content.decode()
    assert ApiToken.objects.count() == 1


def test_without_a_project_it_says_how_to_add_one(maker: User):
    page = client_for(maker).get(URL).content.decode()
    assert 'id="connect-no-project"' in page
    assert "manage.py project_add PATH" in page


def test_the_page_query_count(maker: User, project, django_assert_num_queries):
    client = client_for(maker)
    client.get(URL)
    # The session, the user, their permissions (their own, their groups'), the projects.
    with django_assert_num_queries(5):
        response = client.get(URL)
    assert response.status_code == 200
