"""Issue 9.10: an open live socket must not outlive the right to watch.

Reproduced as found: a socket opened by a permitted user kept streaming every event after the
user logged out, was deactivated or lost the watch permission. Each way of losing the right is
done for real (the logout view flushing the session, the user row, the permission rows) while
the socket is open through the real ASGI application; the socket must close with the
documented code and send nothing more.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from channels.db import database_sync_to_async
from django.contrib.auth.models import Group, Permission, User
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from dashboard import access, consumers, live
from dashboard.access import WatchRight, watch_right
from tests.dashboard.live.conftest import (
    WATCH,
    add_event,
    assert_closed_with,
    max_event_id,
    open_socket,
    receive_events,
    session_cookie,
)
from tests.support.factories import make_user

LOGGED_OUT, FORBIDDEN = 4401, 4403


@pytest.fixture(autouse=True)
async def _fresh_tailer(settings):
    # As in tests/live: one tailer per test's event loop, polling quickly, stopped after.
    settings.DEEPWORK_OUTBOX_POLL_SECONDS = 0.05
    await live.shutdown()
    yield
    await live.shutdown()


@pytest.fixture
def watcher(transactional_db) -> User:
    return make_user(username="watcher", perms=(WATCH,))


@pytest.fixture
def watcher_cookie(watcher) -> str:
    return session_cookie(watcher)


def watch_permission() -> Permission:
    return Permission.objects.get(
        content_type__app_label="workflows", codename="view_workflowsession"
    )


def log_out(user: User, cookie: str) -> None:
    client = Client()
    client.cookies["sessionid"] = cookie
    assert client.post("/logout/").status_code == 302


def deactivate(user: User, cookie: str) -> None:
    User.objects.filter(pk=user.pk).update(is_active=False)


def change_password(user: User, cookie: str) -> None:
    user.set_password("another-unused-password")
    user.save()


def remove_permission(user: User, cookie: str) -> None:
    user.user_permissions.remove(watch_permission())


def delete_user(user: User, cookie: str) -> None:
    User.objects.filter(pk=user.pk).delete()


LOSSES: dict[str, tuple[Callable[[User, str], None], int]] = {
    "logged out": (log_out, LOGGED_OUT),
    "deactivated": (deactivate, LOGGED_OUT),
    "password changed elsewhere": (change_password, LOGGED_OUT),
    "deleted": (delete_user, LOGGED_OUT),
    "permission removed": (remove_permission, FORBIDDEN),
}


async def streaming_socket(cookie: str, project) -> object:
    """A socket that has been shown to deliver a live event."""
    communicator = await open_socket(f"/ws/events/?after={await max_event_id()}", cookie)
    first = await add_event(project)
    assert [event["id"] for event in await receive_events(communicator)] == [first.id]
    return communicator


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("loss", list(LOSSES))
async def test_a_socket_closes_at_the_next_batch_once_the_right_is_gone(
    watcher, watcher_cookie, project, monkeypatch, loss
):
    # Check before every batch, so that the very next event decides.
    monkeypatch.setattr(consumers, "RECHECK_MIN_SECONDS", 0.0)
    lose, code = LOSSES[loss]
    communicator = await streaming_socket(watcher_cookie, project)

    await database_sync_to_async(lose)(watcher, watcher_cookie)
    await add_event(project)

    await assert_closed_with(communicator, code)
    await add_event(project)
    assert await communicator.receive_nothing()
    await communicator.disconnect()


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("loss", ["logged out", "permission removed"])
async def test_an_idle_socket_closes_on_its_periodic_check(
    watcher, watcher_cookie, project, monkeypatch, loss
):
    """No event needs to arrive: the periodic re-check closes a socket that sends nothing."""
    monkeypatch.setattr(consumers, "RECHECK_SECONDS", 0.1)
    lose, code = LOSSES[loss]
    communicator = await streaming_socket(watcher_cookie, project)

    await database_sync_to_async(lose)(watcher, watcher_cookie)

    await assert_closed_with(communicator, code)
    await communicator.disconnect()


@pytest.mark.django_db(transaction=True)
async def test_a_socket_that_keeps_its_right_keeps_streaming(watcher_cookie, project, monkeypatch):
    monkeypatch.setattr(consumers, "RECHECK_SECONDS", 0.0)
    monkeypatch.setattr(consumers, "RECHECK_MIN_SECONDS", 0.0)
    communicator = await streaming_socket(watcher_cookie, project)
    for _ in range(3):
        fresh = await add_event(project)
        assert [event["id"] for event in await receive_events(communicator)] == [fresh.id]
    await communicator.disconnect()


@pytest.mark.django_db(transaction=True)
async def test_a_busy_socket_does_not_check_on_every_batch(watcher_cookie, project, monkeypatch):
    checks: list[str | None] = []
    real_check = access.watch_right

    def counted(**kwargs):
        checks.append(kwargs["session_key"])
        return real_check(**kwargs)

    monkeypatch.setattr(access, "watch_right", counted)
    communicator = await streaming_socket(watcher_cookie, project)
    for _ in range(5):
        fresh = await add_event(project)
        assert [event["id"] for event in await receive_events(communicator)] == [fresh.id]
    # Six batches within RECHECK_MIN_SECONDS of connecting: the connect check covers them.
    assert checks == []
    monkeypatch.setattr(consumers, "RECHECK_MIN_SECONDS", 0.0)
    fresh = await add_event(project)
    assert [event["id"] for event in await receive_events(communicator)] == [fresh.id]
    assert checks == [watcher_cookie]
    await communicator.disconnect()


@pytest.mark.django_db
def test_the_check_reads_the_session_the_user_and_the_permissions_only(db):
    watcher = make_user(username="counted", perms=(WATCH,))
    cookie = session_cookie(watcher)
    with CaptureQueriesContext(connection) as queries:
        assert watch_right(session_key=cookie, user_id=watcher.pk) is WatchRight.GRANTED
    # The session, the user, the user's and the groups' permissions.
    assert len(queries) == 4, [query["sql"] for query in queries]


@pytest.mark.django_db
def test_the_right_may_come_from_a_group_or_from_being_a_superuser(db):
    watchers = Group.objects.create(name="watchers")
    watchers.permissions.add(watch_permission())
    member = make_user(username="member", groups=("watchers",))
    cookie = session_cookie(member)
    assert watch_right(session_key=cookie, user_id=member.pk) is WatchRight.GRANTED
    member.groups.remove(watchers)
    assert watch_right(session_key=cookie, user_id=member.pk) is WatchRight.FORBIDDEN

    boss = make_user(username="boss", superuser=True)
    assert watch_right(session_key=session_cookie(boss), user_id=boss.pk) is WatchRight.GRANTED


@pytest.mark.django_db
def test_a_session_of_another_user_or_no_session_is_not_a_right(db):
    alice = make_user(username="alice", perms=(WATCH,))
    bob = make_user(username="bob", perms=(WATCH,))
    assert watch_right(session_key=session_cookie(bob), user_id=alice.pk) is WatchRight.LOGGED_OUT
    assert watch_right(session_key="no-such-session", user_id=alice.pk) is WatchRight.LOGGED_OUT
    assert watch_right(session_key=None, user_id=alice.pk) is WatchRight.LOGGED_OUT


@pytest.mark.django_db(transaction=True)
async def test_a_failing_check_does_not_cut_the_socket(watcher_cookie, project, monkeypatch):
    """The database failing the check is no proof the right is gone; the next check decides."""
    from django.db import OperationalError

    failures: list[str | None] = []

    def unreachable(**kwargs):
        failures.append(kwargs["session_key"])
        raise OperationalError("database is locked")

    communicator = await streaming_socket(watcher_cookie, project)
    monkeypatch.setattr(consumers, "RECHECK_MIN_SECONDS", 0.0)
    monkeypatch.setattr(consumers, "RECHECK_RETRY_SECONDS", 3600.0)
    monkeypatch.setattr(access, "watch_right", unreachable)
    fresh = await add_event(project)
    assert [event["id"] for event in await receive_events(communicator)] == [fresh.id]
    assert failures == [watcher_cookie]
    await communicator.disconnect()
