"""Who may see the pages: a login for everything, the watch permission for every page."""

from __future__ import annotations

import pytest

from tests.dashboard.conftest import client_for
from tests.support.factories import make_user

pytestmark = pytest.mark.django_db

PAGES = [
    "/",
    "/jobs/",
    "/sessions/",
    "/sessions/{sid}/",
    "/sessions/{sid}/files/?path=notes.md",
]
ACTIONS = [
    "/sessions/{sid}/override/",
    "/sessions/{sid}/request-changes/",
    "/sessions/{sid}/abort/",
]


@pytest.fixture
def sid(driver) -> str:
    session = driver.start()
    driver.finish({"notes.md": "notes.md"})
    return session.session_id


@pytest.mark.parametrize("url", PAGES + ACTIONS)
def test_anonymous_visitors_are_sent_to_log_in(client, sid, url):
    url = url.format(sid=sid)
    method = client.post if url in [a.format(sid=sid) for a in ACTIONS] else client.get
    response = method(url)
    assert response.status_code == 302
    assert response["Location"].startswith("/login/?next=")


@pytest.mark.parametrize("url", PAGES)
def test_people_without_the_watch_permission_get_403(nobody, sid, url):
    response = client_for(nobody).get(url.format(sid=sid))
    assert response.status_code == 403
    assert "workflows.view_workflowsession" in response.content.decode()


@pytest.mark.parametrize("url", PAGES)
def test_the_watch_permission_alone_is_enough(sid, url):
    user = make_user(username="solo", perms=("workflows.view_workflowsession",))
    assert client_for(user).get(url.format(sid=sid)).status_code == 200


@pytest.mark.parametrize("url", PAGES)
def test_fragments_are_guarded_too(client, nobody, sid, url):
    url = url.format(sid=sid)
    anonymous = client.get(url, headers={"X-Live-Fragment": "1"})
    assert anonymous.status_code == 302
    assert "X-Live-Fragment" not in anonymous
    assert client_for(nobody).get(url, headers={"X-Live-Fragment": "1"}).status_code == 403


def test_log_in_through_the_form_and_out_with_a_post(db, watcher):
    client = client_for(None, enforce_csrf=True)
    page = client.get("/login/?next=/jobs/")
    html = page.content.decode()
    assert page.status_code == 200
    for testid in ("login-form", "login-username", "login-password", "login-submit"):
        assert f'data-testid="{testid}"' in html
    token = page.cookies["csrftoken"].value
    wrong = client.post(
        "/login/",
        {"username": "wanda", "password": "nope", "csrfmiddlewaretoken": token},
    )
    assert wrong.status_code == 200
    assert 'data-testid="login-error"' in wrong.content.decode()

    logged_in = client.post(
        "/login/",
        {
            "username": "wanda",
            "password": "pw-wanda",
            "next": "/jobs/",
            "csrfmiddlewaretoken": token,
        },
    )
    assert logged_in.status_code == 302
    assert logged_in["Location"] == "/jobs/"
    overview = client.get("/")
    assert overview.status_code == 200
    assert 'data-testid="logout-form"' in overview.content.decode()

    assert client.get("/logout/").status_code == 405  # logging out takes a POST
    token = client.cookies["csrftoken"].value
    out = client.post("/logout/", {"csrfmiddlewaretoken": token})
    assert out.status_code == 302
    assert out["Location"] == "/login/"
    assert client.get("/")["Location"].startswith("/login/")


def test_superusers_see_everything(db, sid):
    admin = make_user(username="root", superuser=True)
    for url in PAGES:
        assert client_for(admin).get(url.format(sid=sid)).status_code == 200
