"""Live socket fixtures: users, session cookies, sockets through the real ASGI application.

The tailer and the catch-up read the database from Channels' database thread, which cannot see
a test's open transaction, so socket tests commit their data (``transaction=True``).
"""

from __future__ import annotations

import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import User
from django.test import Client

from dashboard import live
from deepwork_site.asgi import application
from tests.support.factories import make_user
from workflows.events import event_record
from workflows.models import Event, Project

ORIGIN = (b"origin", b"http://127.0.0.1")
TIMEOUT = 10
# The permission that lets a person watch sessions live.
WATCH = "workflows.view_workflowsession"


@pytest.fixture(autouse=True)
async def _stop_tailer(settings):
    # Each test runs on its own event loop; start every test with a fresh tailer that polls
    # quickly, and stop it before the loop goes away.
    settings.DEEPWORK_OUTBOX_POLL_SECONDS = 0.05
    await live.shutdown()
    yield
    await live.shutdown()


def session_cookie(user: User) -> str:
    client = Client()
    client.force_login(user)
    return client.cookies["sessionid"].value


@pytest.fixture
def watcher(transactional_db) -> User:
    return make_user(username="watcher", perms=(WATCH,))


@pytest.fixture
def watcher_cookie(watcher) -> str:
    return session_cookie(watcher)


def socket(path: str, cookie: str | None = None, origin=ORIGIN) -> WebsocketCommunicator:
    """A client of the real ASGI application (origin check, session auth, routing)."""
    headers = [origin, (b"host", b"127.0.0.1")]
    if cookie is not None:
        headers.append((b"cookie", f"sessionid={cookie}".encode()))
    return WebsocketCommunicator(application, path, headers=headers)


async def open_socket(path: str, cookie: str) -> WebsocketCommunicator:
    communicator = socket(path, cookie)
    connected, _ = await communicator.connect(timeout=TIMEOUT)
    assert connected
    return communicator


async def receive_events(communicator: WebsocketCommunicator) -> list[dict]:
    message = await communicator.receive_json_from(timeout=TIMEOUT)
    assert message["type"] == "events"
    assert message["events"], "an events batch is never empty"
    ids = [event["id"] for event in message["events"]]
    assert ids == sorted(ids)
    return message["events"]


async def receive_until(communicator: WebsocketCommunicator, last_id: int) -> list[dict]:
    """Every event received up to and including the one with ``last_id``."""
    received: list[dict] = []
    while not received or received[-1]["id"] < last_id:
        received.extend(await receive_events(communicator))
    return received


async def assert_closed_with(communicator: WebsocketCommunicator, code: int) -> None:
    output = await communicator.receive_output(timeout=TIMEOUT)
    assert output["type"] == "websocket.close", output
    assert output.get("code") == code, output


@database_sync_to_async
def add_event(project: Project, kind: str = Event.Kind.CATALOG_SYNCED, **fields) -> Event:
    return event_record(project=project, kind=kind, payload={"jobs": 1, "errors": 0}, **fields)


@database_sync_to_async
def max_event_id() -> int:
    last = Event.objects.order_by("-id").values_list("id", flat=True).first()
    return last or 0
