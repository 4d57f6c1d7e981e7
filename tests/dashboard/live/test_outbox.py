"""Outbox announcements go out after commit only, over a real channel layer and to in-process
listeners, and a broken layer never breaks the write that announces."""

from __future__ import annotations

import asyncio
import contextlib
import threading

import pytest
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.db import transaction

from workflows import outbox
from workflows.events import event_record, event_record_many
from workflows.models import Event

pytestmark = pytest.mark.django_db(transaction=True)

FLUSH_SECONDS = 10


class Rollback(Exception):
    pass


@pytest.fixture
def announced(settings):
    """The announcements this process sends over an in-memory channel layer.

    ``REDIS_URL`` only switches announcing on; the layer itself is in-memory, so the test
    listens on the very layer the announcer sends through.
    """
    settings.REDIS_URL = "redis://announcements.test:6379/0"
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    layer = get_channel_layer()
    channel = async_to_sync(layer.new_channel)()
    async_to_sync(layer.group_add)(outbox.OUTBOX_GROUP, channel)

    def sent_so_far() -> list[dict]:
        """Everything announced until now: the announcer is flushed first, so the channel
        already holds whatever was sent."""
        assert outbox.flush(FLUSH_SECONDS)

        async def drain() -> list[dict]:
            messages = []
            while True:
                try:
                    messages.append(await asyncio.wait_for(layer.receive(channel), 0.05))
                except TimeoutError:
                    return messages

        return async_to_sync(drain)()

    return sent_so_far


SYNCED = {"jobs": 1, "errors": 0}


def write_event(project) -> Event:
    return event_record(project=project, kind=Event.Kind.CATALOG_SYNCED, payload=SYNCED)


def write_and_roll_back(project) -> None:
    with contextlib.suppress(Rollback), transaction.atomic():
        write_event(project)
        raise Rollback


def test_a_write_is_announced_once_its_transaction_commits(announced, project):
    assert announced() == []
    with transaction.atomic():
        write_event(project)
        assert announced() == [], "announced before the commit"
    assert announced() == [outbox.ANNOUNCE_MESSAGE]


def test_a_rolled_back_write_announces_nothing(announced, project):
    write_and_roll_back(project)
    assert not Event.objects.exists()
    assert announced() == []

    write_event(project)
    assert announced() == [outbox.ANNOUNCE_MESSAGE]


def test_a_write_inside_a_rolled_back_savepoint_announces_nothing(announced, project):
    with transaction.atomic():
        write_and_roll_back(project)
        project.refresh_from_db()
    assert not Event.objects.exists()
    assert announced() == []


def test_bulk_writes_are_announced_after_commit(announced, project):
    with transaction.atomic():
        event_record_many(project=project, kind=Event.Kind.CATALOG_SYNCED, payloads=[SYNCED] * 3)
        assert announced() == []
    # A burst needs one "look now"; never more than one per committed write.
    assert 1 <= len(announced_messages := announced()) <= 3
    assert set(map(str, announced_messages)) == {str(outbox.ANNOUNCE_MESSAGE)}


def test_without_redis_nothing_goes_over_the_layer(settings, project):
    settings.REDIS_URL = ""
    assert not outbox.announces_over_channel_layer()
    assert not outbox.announcer_enabled()


def test_local_listeners_hear_committed_writes_only(settings, project):
    settings.REDIS_URL = ""
    heard: list[str] = []
    listener = lambda: heard.append(threading.current_thread().name)  # noqa: E731
    outbox.add_local_listener(listener)
    try:
        write_and_roll_back(project)
        with transaction.atomic():
            write_event(project)
            assert heard == []
        assert heard == [threading.current_thread().name]
    finally:
        outbox.remove_local_listener(listener)
    write_event(project)
    assert len(heard) == 1


def test_an_unreachable_layer_never_breaks_the_write(settings, project, caplog):
    settings.REDIS_URL = "redis://127.0.0.1:1/0"
    settings.CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            "CONFIG": {"hosts": [settings.REDIS_URL]},
        }
    }
    event = write_event(project)
    assert outbox.flush(FLUSH_SECONDS)
    assert Event.objects.filter(pk=event.pk).exists()
    assert "Could not announce outbox changes" in caplog.text


def test_a_failing_local_listener_never_breaks_the_write(settings, project):
    settings.REDIS_URL = ""

    def broken() -> None:
        raise RuntimeError("listener trouble")

    outbox.add_local_listener(broken)
    try:
        event = write_event(project)
    finally:
        outbox.remove_local_listener(broken)
    assert Event.objects.filter(pk=event.pk).exists()
