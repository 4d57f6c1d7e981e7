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
from accounts.services import api_token_authenticate, api_token_create, api_token_revoke
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
        r'<pre id="[^"]+" data-testid="(' + prefix + r'-[^"]+)" data-language="(\w+)">(.*?)</pre>',
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

    def command(project: str) -> dict:
        return {"command": "uvx", "args": ["deepwork-server", "mcp", "--path", project]}

    assert json.loads(shown["stdio-claude-code-2"][1]) == {
        "mcpServers": {"deepwork": command("${CLAUDE_PROJECT_DIR:-.}")}
    }
    assert json.loads(shown["stdio-cursor-1"][1]) == {
        "mcpServers": {"deepwork": command("${workspaceFolder}")}
    }
    assert tomllib.loads(shown["stdio-codex-1"][1]) == {
        "mcp_servers": {
            "deepwork": {
                **command("."),
                "env_vars": ["DEEPWORK_VAR_DIR", "DATABASE_URL", "REDIS_URL"],
                "startup_timeout_sec": 60,
            }
        }
    }
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
    export = shown["hosted-claude-code-2"]
    assert export[0] == "shell"
    secret = export[1].removeprefix("export DEEPWORK_MCP_TOKEN=").removesuffix("\n")
    # The secret on the page is the new token's, and it works.
    assert api_token_authenticate(secret=secret) == token
    # It is in the lines that export it, and in no file.
    for testid, (language, text) in shown.items():
        assert (secret in text) == (language == "shell"), testid
    server = json.loads(shown["hosted-claude-code-1"][1])["mcpServers"]["deepwork"]
    assert server == {
        "type": "http",
        "url": url,
        "headers": {"Authorization": "Bearer ${DEEPWORK_MCP_TOKEN}"},
    }
    assert json.loads(shown["hosted-cursor-1"][1]) == {
        "mcpServers": {
            "deepwork": {
                "url": url,
                "headers": {"Authorization": "Bearer ${env:DEEPWORK_MCP_TOKEN}"},
            }
        }
    }
    vscode = json.loads(shown["hosted-vscode-1"][1])
    assert vscode["servers"]["deepwork"]["headers"] == {
        "Authorization": "Bearer ${input:deepwork-token}"
    }
    assert tomllib.loads(shown["hosted-codex-1"][1]) == {
        "mcp_servers": {
            "deepwork": {
                "url": url,
                "bearer_token_env_var": "DEEPWORK_MCP_TOKEN",
                "startup_timeout_sec": 60,
            }
        }
    }
    assert shown["hosted-codex-2"][1] == f"export DEEPWORK_MCP_TOKEN={secret}\n"
    # Every snippet has its copy button.
    for testid in shown:
        assert f'data-copy="{testid}"' in page
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
    # The session, the user, their permissions (their own, their groups'), the projects, the
    # person's tokens.
    with django_assert_num_queries(6):
        response = client.get(URL)
    assert response.status_code == 200


def csrf_of(client: Client) -> str:
    return re.search(
        r'name="csrfmiddlewaretoken" value="([^"]+)"', client.get(URL).content.decode()
    )[1]


def test_the_person_lists_their_own_live_tokens(maker: User, project):
    laptop, _ = api_token_create(user=maker, name="laptop", mcp=True, mcp_project=project)
    key, _ = api_token_create(user=maker, name="ci")
    gone, _ = api_token_create(user=maker, name="old")
    api_token_revoke(token=gone)
    other, _ = api_token_create(user=make_user(username="otto"), name="otto-key")
    page = client_for(maker).get(URL).content.decode()
    rows = dict(re.findall(r'<tr data-testid="connect-token-(\d+)">(.*?)</tr>', page, re.DOTALL))
    assert set(rows) == {str(laptop.pk), str(key.pk)}
    assert "laptop" in rows[str(laptop.pk)]
    assert f"project <strong>{project.name}</strong> only" in rows[str(laptop.pk)]
    assert "never" in rows[str(laptop.pk)]  # not used yet
    assert "your own key (REST API)" in rows[str(key.pk)]
    assert f"{key.prefix}…" in rows[str(key.pk)]
    assert "otto-key" not in page
    assert other.prefix not in page


def test_the_person_revokes_their_own_token_and_no_one_elses(maker: User, project):
    mine, secret = api_token_create(user=maker, name="laptop", mcp=True, mcp_project=project)
    theirs, their_secret = api_token_create(user=make_user(username="otto"), name="k")
    client = client_for(maker, enforce_csrf=True)
    revoke = f"/connect/tokens/{mine.pk}/revoke"
    # Without the CSRF token, or by GET: nothing is revoked.
    assert client.post(revoke).status_code == 403
    assert client.get(revoke).status_code == 405
    assert api_token_authenticate(secret=secret) == mine
    # Another person's token, a missing one, an id past any row: all the same 404.
    csrf = csrf_of(client)
    for token_id in (theirs.pk, 999_999, 2**64):
        response = client.post(f"/connect/tokens/{token_id}/revoke", {"csrfmiddlewaretoken": csrf})
        assert response.status_code == 404
    assert api_token_authenticate(secret=their_secret) == theirs

    response = client.post(revoke, {"csrfmiddlewaretoken": csrf}, follow=True)
    assert response.redirect_chain[-1][0].endswith("/connect/#connect-tokens")
    assert f"Token {mine.prefix}… “laptop” revoked" in response.content.decode()
    assert api_token_authenticate(secret=secret) is None
    assert f'data-testid="connect-token-{mine.pk}"' not in response.content.decode()
    # Revoked once: a second revoke finds no live token.
    assert client.post(revoke, {"csrfmiddlewaretoken": csrf}).status_code == 404


def test_a_watcher_without_token_permissions_still_revokes_their_own(project):
    watcher = make_user(username="walt", perms=(WATCH,))
    token, secret = api_token_create(user=watcher, name="given by an admin")
    client = client_for(watcher)
    assert f'data-testid="connect-token-{token.pk}"' in client.get(URL).content.decode()
    assert client.post(f"/connect/tokens/{token.pk}/revoke").status_code == 302
    assert api_token_authenticate(secret=secret) is None


@pytest.mark.parametrize(
    ("name", "said"),
    [
        ("\u202eevil", "invisible character U+202E (RIGHT-TO-LEFT OVERRIDE) at position 0"),
        ("x\u200by", "invisible character U+200B (ZERO WIDTH SPACE) at position 1"),
        ("<script>", "contains '<' at position 0; it must be plain text"),
    ],
)
def test_a_token_name_with_invisible_or_markup_characters_is_refused(
    maker: User, project, name: str, said: str
):
    response = client_for(maker).post(URL, {"project": project.pk, "name": name})
    assert said in html.unescape(response.content.decode())
    assert not ApiToken.objects.exists()


def test_the_token_list_query_count(maker: User, project, django_assert_num_queries):
    client = client_for(maker)
    client.get(URL)
    for n in range(5):
        api_token_create(user=maker, name=f"t{n}", mcp=True, mcp_project=project)
    # The session, the user, their permissions (their own, their groups'), the projects, the
    # tokens with their projects: the same however many tokens.
    with django_assert_num_queries(6):
        response = client.get(URL)
    assert response.content.decode().count('data-testid="connect-revoke-') == 5
