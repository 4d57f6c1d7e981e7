"""Making and revoking tokens: ``manage.py api_token`` and the admin."""

from __future__ import annotations

import re
from io import StringIO

import pytest
from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied
from django.core.management import CommandError, call_command
from django.test import Client

from accounts.models import ApiToken
from accounts.services import api_token_create, api_token_revoke
from tests.api.conftest import VIEW, Caller
from tests.support.factories import make_user

pytestmark = pytest.mark.django_db


def run(*args: str) -> tuple[str, str]:
    out, err = StringIO(), StringIO()
    call_command("api_token", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


@pytest.fixture
def alice(db):
    return make_user(username="alice", perms=(VIEW,))


def test_create_prints_only_the_secret_on_stdout(alice):
    out, err = run("create", "--user", "alice", "--name", "ci")
    secret = out.strip()
    assert re.fullmatch(r"dwk_[A-Za-z0-9_-]{43}", secret)
    token = ApiToken.objects.get()
    assert (token.user, token.name, token.prefix) == (alice, "ci", secret[:12])
    assert secret not in err
    assert "not shown again" in err
    assert Caller(Client(), secret).get("/api/projects").status_code == 200


def test_create_refuses_unknown_users_and_taken_names(alice):
    with pytest.raises(CommandError, match="No user named 'bob'"):
        run("create", "--user", "bob", "--name", "ci")
    run("create", "--user", "alice", "--name", "ci")
    with pytest.raises(CommandError, match="already has a live token named 'ci'"):
        run("create", "--user", "alice", "--name", "ci")
    assert ApiToken.objects.count() == 1


def test_an_unknown_user_gets_a_hint_and_create_user_makes_one_who_may_drive(db):
    with pytest.raises(CommandError, match=r"No user named 'bob'\. Add --create-user to make one"):
        run("create", "--user", "bob", "--mcp")
    out, err = run("create", "--user", "bob", "--mcp", "--create-user")
    bob = get_user_model().objects.get(username="bob")
    assert "Made user 'bob' in the Deciders group" in err
    assert "lacks the permission" not in err
    assert bob.has_perm("workflows.drive_session")
    assert not bob.has_usable_password()  # a token acts for it; a password is set by hand
    token = ApiToken.objects.get()
    assert (token.user, token.mcp, token.name.startswith("mcp ")) == (bob, True, True)
    # --create-user for a user who exists makes only the token.
    run("create", "--user", "bob", "--mcp", "--create-user", "--name", "second")
    assert get_user_model().objects.filter(username="bob").count() == 1


def test_an_mcp_token_for_a_user_who_may_not_drive_says_so(alice):
    _, err = run("create", "--user", "alice", "--mcp", "--name", "agent")
    assert "'alice' lacks the permission 'workflows.drive_session'" in err


def test_create_user_refuses_a_bad_username(db):
    with pytest.raises(CommandError, match="Username 'a b'"):
        run("create", "--user", "a b", "--mcp", "--create-user")
    assert not get_user_model().objects.exists()


def test_list_shows_prefixes_never_secrets(alice):
    bob = make_user(username="bob")
    _, alice_secret = api_token_create(user=alice, name="ci")
    api_token_create(user=bob, name="laptop")
    out, _ = run("list")
    lines = out.strip().splitlines()
    assert len(lines) == 2
    assert alice_secret not in out
    assert f"{alice_secret[:12]}…\talice\tci\tlast used never\tlive" in lines[0]
    out, _ = run("list", "--user", "bob")
    assert "laptop" in out
    assert "alice" not in out


def test_revoke_by_prefix_or_id_takes_effect_at_once(alice):
    token, secret = api_token_create(user=alice, name="ci")
    caller = Caller(Client(), secret)
    assert caller.get("/api/projects").status_code == 200

    out, _ = run("revoke", token.prefix + "…")
    assert "Revoked" in out
    assert caller.get("/api/projects").status_code == 401
    out, _ = run("revoke", str(token.pk))
    assert "already revoked" in out
    assert "revoked" in run("list")[0]
    with pytest.raises(CommandError, match="No API token has the id or prefix 'dwk_nope'"):
        run("revoke", "dwk_nope")


@pytest.mark.parametrize("part", ["", " ", "…", "d", "dwk_", "<all but the last character>"])
def test_revoke_needs_the_whole_prefix_not_a_part_of_it(alice, part):
    token, secret = api_token_create(user=alice, name="ci")
    if part.startswith("<"):
        part = token.prefix[:-1]
    with pytest.raises(CommandError, match="Give the token's id|No API token has the id"):
        run("revoke", part)
    token.refresh_from_db()
    assert token.revoked_at is None
    assert Caller(Client(), secret).get("/api/projects").status_code == 200


@pytest.fixture
def admin_client(db):
    admin = make_user(username="root", superuser=True)
    client = Client()
    client.force_login(admin)
    return client


SECRET = re.compile(r"dwk_[A-Za-z0-9_-]{43}")


def test_admin_add_shows_the_secret_once_on_its_own_page(admin_client, alice):
    response = admin_client.post(
        "/admin/accounts/apitoken/add/", {"user": alice.pk, "name": "dashboard-script"}
    )
    assert response.status_code == 200
    token = ApiToken.objects.get()
    assert (token.user, token.name) == (alice, "dashboard-script")
    [secret] = set(SECRET.findall(response.content.decode()))
    assert secret.startswith(token.prefix)
    assert "no-store" in response["Cache-Control"]
    assert Caller(Client(), secret).get("/api/projects").status_code == 200

    # Not in a flash message, whose default storage is a cookie.
    assert not [str(message) for message in response.context["messages"]]
    assert all(secret not in morsel.value for morsel in admin_client.cookies.values())
    assert all(secret not in str(value) for value in admin_client.session.values())

    listing = admin_client.get("/admin/accounts/apitoken/").content.decode()
    assert token.prefix in listing
    assert secret not in listing
    assert (
        secret
        not in admin_client.get(f"/admin/accounts/apitoken/{token.pk}/change/").content.decode()
    )


def test_admin_add_refuses_a_taken_name(admin_client, alice):
    api_token_create(user=alice, name="ci")
    response = admin_client.post("/admin/accounts/apitoken/add/", {"user": alice.pk, "name": "ci"})
    assert response.status_code == 200
    assert "already has a live token with this name" in response.content.decode()
    assert ApiToken.objects.count() == 1


def test_admin_revoke_action(admin_client, alice):
    first, first_secret = api_token_create(user=alice, name="one")
    second, _ = api_token_create(user=alice, name="two")
    response = admin_client.post(
        "/admin/accounts/apitoken/",
        {"action": "revoke", "_selected_action": [first.pk]},
        follow=True,
    )
    assert response.status_code == 200
    first.refresh_from_db()
    second.refresh_from_db()
    assert first.revoked_at is not None
    assert second.revoked_at is None
    assert Caller(Client(), first_secret).get("/api/projects").status_code == 401
    # Revoked tokens stay on record: the admin offers no delete.
    assert admin_client.post(f"/admin/accounts/apitoken/{first.pk}/delete/").status_code == 403
    assert ApiToken.objects.count() == 2


@pytest.fixture
def staff(db):
    """A staff user who may manage API tokens in the admin, and nothing else."""
    user = make_user(
        username="staff",
        perms=("accounts.add_apitoken", "accounts.change_apitoken", "accounts.view_apitoken"),
        staff=True,
    )
    client = Client()
    client.force_login(user)
    return user, client


def test_staff_cannot_make_a_token_for_someone_else(staff, alice):
    user, client = staff
    root = make_user(username="root", superuser=True)
    for victim in (root, alice):
        response = client.post("/admin/accounts/apitoken/add/", {"user": victim.pk, "name": "mine"})
        assert response.status_code == 200
        assert "Select a valid choice" in response.content.decode()
        assert not SECRET.search(response.content.decode())
    assert not ApiToken.objects.exists()

    # The form offers only themselves.
    form = client.get("/admin/accounts/apitoken/add/").content.decode()
    assert re.findall(r'<option value="(\d+)"', form) == [str(user.pk)]

    response = client.post("/admin/accounts/apitoken/add/", {"user": user.pk, "name": "mine"})
    assert response.status_code == 200
    assert ApiToken.objects.get().user == user
    assert SECRET.search(response.content.decode())


def test_only_a_superuser_may_make_or_revoke_tokens_of_others(staff, alice):
    user, _ = staff
    with pytest.raises(PermissionDenied):
        api_token_create(user=alice, name="x", by=user)
    token, _ = api_token_create(user=alice, name="x", by=alice)
    with pytest.raises(PermissionDenied):
        api_token_revoke(token=token, by=user)
    token.refresh_from_db()
    assert token.revoked_at is None
    root = make_user(username="root", superuser=True)
    api_token_create(user=alice, name="y", by=root)
    assert api_token_revoke(token=token, by=root)


def test_staff_see_and_revoke_only_their_own_tokens(staff, alice):
    user, client = staff
    own, own_secret = api_token_create(user=user, name="own")
    other, other_secret = api_token_create(user=alice, name="other")

    listing = client.get("/admin/accounts/apitoken/").content.decode()
    assert own.prefix in listing
    assert other.prefix not in listing
    assert client.get(f"/admin/accounts/apitoken/{other.pk}/change/").status_code == 302

    client.post(
        "/admin/accounts/apitoken/",
        {"action": "revoke", "_selected_action": [own.pk, other.pk]},
        follow=True,
    )
    own.refresh_from_db()
    other.refresh_from_db()
    assert own.revoked_at is not None
    assert other.revoked_at is None
    assert Caller(Client(), other_secret).get("/api/projects").status_code == 200


def test_admin_add_picks_the_user_from_a_list_by_name(admin_client, alice):
    # A list of people by name, not a box for a raw user id.
    form = admin_client.get("/admin/accounts/apitoken/add/").content.decode()
    assert '<select name="user"' in form
    assert f'<option value="{alice.pk}">alice</option>' in form
    assert 'class="vForeignKeyRawIdAdminField"' not in form
