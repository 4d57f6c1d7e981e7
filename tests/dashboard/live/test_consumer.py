"""The live socket through the real ASGI application: who may watch, catch-up, filters, live
delivery, and no event sent twice or skipped where catch-up hands over to the live stream."""

from __future__ import annotations

import asyncio
import threading

import pytest
from channels.db import database_sync_to_async
from django.db import OperationalError, connection, transaction

from dashboard import live
from dashboard.origin import origin_matches_host
from tests.dashboard.live.conftest import (
    add_event,
    assert_closed_with,
    max_event_id,
    open_socket,
    receive_events,
    receive_until,
    session_cookie,
    socket,
)
from tests.support.driving import step_finish
from tests.support.factories import make_user
from workflows.events import event_record
from workflows.models import Event
from workflows.services import sessions
from workflows.services.projects import project_ensure

pytestmark = pytest.mark.django_db(transaction=True)


@database_sync_to_async
def start_session(project, agent, catalog, goal: str = "live") -> str:
    started = sessions.session_start(
        project=project,
        agent=agent,
        catalog=catalog.view(),
        job_name="nested",
        workflow_name="only",
        goal=goal,
    )
    return started.begun.session.session_id


@database_sync_to_async
def finish_first_step(project, agent, session_id: str) -> None:
    step_finish(
        project=project, agent=agent, outputs={"first.md": "first.md"}, session_id=session_id
    )


@pytest.fixture
def synced_catalog(catalog):
    """The demo catalog, already synced: starting a session then writes only session events."""
    catalog.view()
    return catalog


@pytest.fixture
def other_project(transactional_db, tmp_path):
    root = tmp_path / "other"
    root.mkdir()
    return project_ensure(root_path=root.resolve())


async def test_anonymous_socket_is_closed_with_4403(transactional_db):
    communicator = socket("/ws/events/?after=0")
    connected, _ = await communicator.connect()
    assert connected
    await assert_closed_with(communicator, 4403)
    await communicator.disconnect()


async def test_user_without_the_watch_permission_is_closed_with_4403(transactional_db):
    user = await database_sync_to_async(make_user)(username="outsider")
    cookie = await database_sync_to_async(session_cookie)(user)
    communicator = socket("/ws/events/?after=0", cookie)
    connected, _ = await communicator.connect()
    assert connected
    await assert_closed_with(communicator, 4403)
    await communicator.disconnect()


@pytest.mark.parametrize(
    "origin",
    [
        "http://evil.test",
        # Cookies ignore ports: a page on another port of this host is another site.
        "http://127.0.0.1:3000",
        "https://127.0.0.1",
        "http://localhost",
        "null",
        "",
    ],
)
async def test_a_page_from_another_origin_cannot_open_the_socket(watcher_cookie, origin):
    communicator = socket("/ws/events/", watcher_cookie, origin=(b"origin", origin.encode()))
    connected, _ = await communicator.connect()
    assert not connected


def test_the_origin_must_name_the_host_and_port_the_socket_was_opened_on(settings):
    assert origin_matches_host(origin="http://127.0.0.1:8000", host="127.0.0.1:8000", secure=False)
    assert origin_matches_host(origin="http://LOCALHOST", host="localhost:80", secure=False)
    assert origin_matches_host(origin="https://dw.example", host="dw.example", secure=True)
    assert not origin_matches_host(origin="http://dw.example", host="dw.example", secure=True)
    assert not origin_matches_host(
        origin="http://127.0.0.1:8001", host="127.0.0.1:8000", secure=False
    )
    assert not origin_matches_host(origin="http://127.0.0.1:x", host="127.0.0.1", secure=False)
    settings.CSRF_TRUSTED_ORIGINS = ["https://dash.example"]
    assert origin_matches_host(origin="https://dash.example", host="10.0.0.5:8000", secure=False)


BAD_QUERIES = [
    "after=abc",
    "after=-1",
    "after=1&after=2",
    "after=99999999999999999999",
    "project=0",
    "project=x",
    "session=not%20an%20id",
    "session=" + "a" * 33,
]


async def test_bad_parameters_close_with_4400(watcher_cookie):
    # One test for all of them: each socket test pays for a database flush.
    for query in BAD_QUERIES:
        communicator = socket(f"/ws/events/?{query}", watcher_cookie)
        connected, _ = await communicator.connect()
        assert connected, query
        await assert_closed_with(communicator, 4400)
        await communicator.disconnect()
    assert live.get_tailer().subscriber_count == 0


async def test_catch_up_sends_every_event_after_the_given_id_with_its_details(
    watcher_cookie, project, agent, synced_catalog
):
    before = await max_event_id()
    session_id = await start_session(project, agent, synced_catalog)
    expected = await database_sync_to_async(
        lambda: list(Event.objects.filter(id__gt=before).order_by("id"))
    )()
    assert [event.kind for event in expected] == ["session_started", "step_started"]

    communicator = await open_socket(f"/ws/events/?after={before}", watcher_cookie)
    events = await receive_events(communicator)

    assert events == [
        {
            "id": event.id,
            "kind": event.kind,
            "project_id": project.pk,
            "session_id": session_id,
            "agent_id": agent.agent_id,
            "payload": event.payload,
            "created_at": event.created_at.isoformat(),
        }
        for event in expected
    ]
    assert await communicator.receive_nothing()
    await communicator.disconnect()


async def test_without_after_only_live_events_are_sent(watcher_cookie, project):
    await add_event(project)
    communicator = await open_socket("/ws/events/", watcher_cookie)
    assert await communicator.receive_nothing()
    fresh = await add_event(project)
    assert [event["id"] for event in await receive_events(communicator)] == [fresh.id]
    await communicator.disconnect()


async def test_an_event_written_after_connecting_arrives_live(
    watcher_cookie, project, agent, synced_catalog
):
    communicator = await open_socket(f"/ws/events/?after={await max_event_id()}", watcher_cookie)
    assert await communicator.receive_nothing()

    session_id = await start_session(project, agent, synced_catalog)

    events = await receive_until(communicator, await max_event_id())
    assert [(event["kind"], event["session_id"]) for event in events] == [
        ("session_started", session_id),
        ("step_started", session_id),
    ]
    await communicator.disconnect()


async def test_project_filter_applies_to_catch_up_and_live(watcher_cookie, project, other_project):
    start = await max_event_id()
    mine = await add_event(project)
    await add_event(other_project)
    communicator = await open_socket(
        f"/ws/events/?after={start}&project={project.pk}", watcher_cookie
    )
    assert [event["id"] for event in await receive_events(communicator)] == [mine.id]

    await add_event(other_project)
    live_mine = await add_event(project)
    assert [event["id"] for event in await receive_events(communicator)] == [live_mine.id]
    await communicator.disconnect()


async def test_session_filter_applies_to_catch_up_and_live(
    watcher_cookie, project, agent, synced_catalog
):
    start = await max_event_id()
    watched = await start_session(project, agent, synced_catalog, goal="watched")
    other = await start_session(project, agent, synced_catalog, goal="nested on top")
    communicator = await open_socket(
        f"/ws/events/?after={start}&session={watched}&project=", watcher_cookie
    )
    caught_up = await receive_events(communicator)
    assert {event["session_id"] for event in caught_up} == {watched}
    assert [event["kind"] for event in caught_up] == ["session_started", "step_started"]

    await finish_first_step(project, agent, other)
    await add_event(project)
    await finish_first_step(project, agent, watched)
    newest = await max_event_id()
    events = await receive_events(communicator)
    assert {event["session_id"] for event in events} == {watched}
    assert events[-1]["id"] == newest
    await communicator.disconnect()


@pytest.mark.parametrize("tailer_reads_it_first", [True, False])
async def test_an_event_committed_during_catch_up_is_sent_once(
    watcher_cookie, project, monkeypatch, tailer_reads_it_first
):
    """An event committed after the socket subscribed but before its catch-up query is seen by
    both the catch-up and the tailer; the socket sends it once, then the live stream goes on."""
    start = await max_event_id()
    earlier = await add_event(project)
    during: list[Event] = []
    real_catch_up = live.catch_up

    async def catch_up_with_a_commit_in_between(**kwargs):
        during.append(await add_event(project))
        if tailer_reads_it_first:
            tailer = live.get_tailer()
            tailer.poke()
            for _ in range(200):
                if tailer.last_id >= during[0].id:
                    break
                await asyncio.sleep(0.01)
            assert tailer.last_id >= during[0].id
        return await real_catch_up(**kwargs)

    monkeypatch.setattr(live, "catch_up", catch_up_with_a_commit_in_between)
    communicator = await open_socket(f"/ws/events/?after={start}", watcher_cookie)
    later = await add_event(project)

    received = await receive_until(communicator, later.id)
    assert [event["id"] for event in received] == [earlier.id, during[0].id, later.id]
    assert await communicator.receive_nothing()
    await communicator.disconnect()


async def test_catch_up_sends_the_newest_events_when_too_many_are_missed(
    watcher_cookie, project, monkeypatch
):
    monkeypatch.setattr(live, "CATCH_UP_LIMIT", 3)
    start = await max_event_id()
    written = [await add_event(project) for _ in range(5)]
    communicator = await open_socket(f"/ws/events/?after={start}", watcher_cookie)
    assert [event["id"] for event in await receive_events(communicator)] == [
        event.id for event in written[-3:]
    ]
    fresh = await add_event(project)
    assert [event["id"] for event in await receive_events(communicator)] == [fresh.id]
    await communicator.disconnect()


async def test_live_delivery_survives_database_errors(watcher_cookie, project, monkeypatch):
    real_read = live.events_for_tail
    failures = {"left": 3, "calls": 0}

    def flaky_read(**kwargs):
        failures["calls"] += 1
        if failures["left"]:
            failures["left"] -= 1
            raise OperationalError("database is locked")
        return real_read(**kwargs)

    monkeypatch.setattr(live, "events_for_tail", flaky_read)
    communicator = await open_socket(f"/ws/events/?after={await max_event_id()}", watcher_cookie)
    fresh = await add_event(project)

    assert [event["id"] for event in await receive_events(communicator)] == [fresh.id]
    assert failures["left"] == 0
    assert failures["calls"] > 3
    await communicator.disconnect()


async def test_two_sockets_share_one_tailer_and_each_gets_its_own_events(
    watcher_cookie, project, other_project
):
    start = await max_event_id()
    everything = await open_socket(f"/ws/events/?after={start}", watcher_cookie)
    only_other = await open_socket(
        f"/ws/events/?after={start}&project={other_project.pk}", watcher_cookie
    )
    first = await add_event(project)
    second = await add_event(other_project)

    received = await receive_until(everything, second.id)
    assert [event["id"] for event in received] == [first.id, second.id]
    assert [event["id"] for event in await receive_events(only_other)] == [second.id]
    assert live.get_tailer().subscriber_count == 2

    await everything.disconnect()
    await only_other.disconnect()
    assert live.get_tailer().subscriber_count == 0


@pytest.mark.postgres
async def test_an_event_that_commits_after_a_newer_one_still_arrives(watcher_cookie, project):
    """On PostgreSQL ids are handed out at insert, not at commit: the writer that took the
    lower id may commit second. The tailer must not skip it."""
    if connection.vendor != "postgresql":
        pytest.skip("SQLite serializes writers, so ids always commit in order")
    communicator = await open_socket(f"/ws/events/?after={await max_event_id()}", watcher_cookie)
    inserted, release = threading.Event(), threading.Event()
    slow: list[Event] = []

    def slow_writer() -> None:
        try:
            with transaction.atomic():
                slow.append(
                    event_record(
                        project=project,
                        kind=Event.Kind.STEP_FINISHED,
                        payload={"step_id": "gather", "outputs": {}, "notes": None},
                    )
                )
                inserted.set()
                assert release.wait(10)
        finally:
            connection.close()

    writer = threading.Thread(target=slow_writer)
    writer.start()
    try:
        assert await asyncio.to_thread(inserted.wait, 10)
        fast = await add_event(project)
        assert fast.id > slow[0].id
        assert [event["id"] for event in await receive_events(communicator)] == [fast.id]
    finally:
        release.set()
        await asyncio.to_thread(writer.join, 10)
    assert [event["id"] for event in await receive_events(communicator)] == [slow[0].id]
    await communicator.disconnect()


async def test_a_write_in_the_web_process_itself_is_delivered_without_waiting_for_the_poll(
    watcher_cookie, project, settings
):
    """A change made from the dashboard pokes this process's tailer directly (no Redis)."""
    settings.DEEPWORK_OUTBOX_POLL_SECONDS = 30
    settings.REDIS_URL = ""
    communicator = await open_socket(f"/ws/events/?after={await max_event_id()}", watcher_cookie)
    assert live.get_tailer().poll_seconds == 30

    fresh = await add_event(project)

    # Far sooner than the 30 s poll (the receive gives up after 10 s).
    assert [event["id"] for event in await receive_events(communicator)] == [fresh.id]
    await communicator.disconnect()
