"""The outbox reads behind the live socket: one query each however many rows, the newest
catch-up window, and the tailer's mark of ids that commit out of order."""

from __future__ import annotations

import pytest

from dashboard import live
from workflows.models import Event
from workflows.selectors import events as reads
from workflows.services.agents import agent_ensure
from workflows.services.projects import project_ensure

FIELDS = {"id", "kind", "project_id", "session_id", "agent_id", "payload", "created_at"}


def write_events(project, count: int, **fields) -> list[Event]:
    return [
        Event.objects.create(project=project, kind=Event.Kind.CATALOG_SYNCED, **fields)
        for _ in range(count)
    ]


@pytest.fixture
def other_project(db, tmp_path):
    root = tmp_path / "other"
    root.mkdir()
    return project_ensure(root_path=root.resolve())


@pytest.mark.django_db
@pytest.mark.parametrize("rows", [2, 40])
def test_catch_up_is_one_query_however_many_rows(
    project, other_project, rows, django_assert_num_queries
):
    agent = agent_ensure(project=project, agent_id="reader")
    start = Event.objects.order_by("-id").values_list("id", flat=True).first() or 0
    write_events(project, rows, agent=agent)
    write_events(other_project, rows)

    # One query: events joined to their session and agent for the two id strings.
    with django_assert_num_queries(1):
        events, truncated = reads.events_after(
            after=start, project_id=project.pk, limit=live.CATCH_UP_LIMIT, keep="newest"
        )
    assert len(events) == rows
    assert not truncated
    assert {event["agent_id"] for event in events} == {"reader"}
    assert all(set(event) == FIELDS for event in events)

    with django_assert_num_queries(1):
        events, _ = reads.events_after(
            after=start, session_id="deadbeef", limit=live.CATCH_UP_LIMIT, keep="newest"
        )
    assert events == []


@pytest.mark.django_db
def test_catch_up_keeps_the_newest_events_when_it_must_leave_some_out(project):
    written = write_events(project, 5)
    events, truncated = reads.events_after(after=written[0].id - 1, limit=3, keep="newest")
    assert [event["id"] for event in events] == [event.id for event in written[-3:]]
    assert truncated
    # A feed read page by page keeps the oldest instead.
    events, more = reads.events_after(after=written[0].id - 1, limit=3)
    assert [event["id"] for event in events] == [event.id for event in written[:3]]
    assert more


@pytest.mark.django_db
@pytest.mark.parametrize("rows", [3, 30])
def test_tail_read_is_one_query_however_many_rows(project, rows, django_assert_num_queries):
    written = write_events(project, rows)
    missing = [written[0].id, written[1].id]

    # One query: new rows and the remembered missing ones, in id order.
    with django_assert_num_queries(1):
        events = live.events_for_tail(after=written[2].id, missing=missing, limit=500)
    assert [event["id"] for event in events] == [
        written[0].id,
        written[1].id,
        *(event.id for event in written[3:]),
    ]

    with django_assert_num_queries(1):
        assert len(live.events_for_tail(after=0, missing=(), limit=2)) == 2


@pytest.mark.django_db
def test_outbox_position_reports_the_newest_id_and_recent_holes(project, django_assert_num_queries):
    with django_assert_num_queries(1):
        assert reads.outbox_position(window=10) == (0, [])
    written = write_events(project, 5)
    Event.objects.filter(pk__in=[written[1].pk, written[3].pk]).delete()

    with django_assert_num_queries(1):
        newest, missing = reads.outbox_position(window=10)
    assert newest == written[-1].id
    assert missing == [written[1].id, written[3].id]


def rows(*ids: int) -> list[dict]:
    return [{"id": event_id} for event_id in ids]


async def test_the_mark_hands_over_an_id_that_commits_after_a_higher_one():
    mark = live.OutboxMark(last_id=10)

    # 12 committed before 11: 11 is remembered and asked for again.
    assert mark.advance(rows(12)) == rows(12)
    assert mark.missing == (11,)
    assert mark.advance(rows(11, 13)) == rows(11, 13)
    assert mark.missing == ()
    # Nothing is handed over twice.
    assert mark.advance(rows(11, 12, 13)) == []
    assert mark.last_id == 13


async def test_the_mark_forgets_holes_that_never_fill(monkeypatch):
    mark = live.OutboxMark(last_id=1)
    mark.advance(rows(4))
    assert mark.missing == (2, 3)

    monkeypatch.setattr(live, "GAP_SECONDS", 0)
    assert mark.advance(rows(5)) == rows(5)
    assert mark.missing == ()
    # A hole forgotten is not handed over if it fills after all.
    assert mark.advance(rows(2)) == []


async def test_the_mark_starts_from_the_holes_found_at_startup():
    newest, missing = 9, [4, 7]
    mark = live.OutboxMark(last_id=newest, missing=missing)
    assert mark.missing == (4, 7)
    assert mark.advance(rows(7, 10)) == rows(7, 10)
    assert (mark.missing, mark.last_id) == ((4,), 10)


async def test_after_a_hole_wider_than_its_limit_the_mark_tracks_the_nearest_ids():
    """PostgreSQL burns sequence values on rolled-back inserts: a long jump is normal, and the
    ids just below the new one are those most likely still in flight."""
    mark = live.OutboxMark(last_id=1)
    newest = live.MAX_GAPS + 10
    assert mark.advance(rows(newest)) == rows(newest)
    assert mark.missing == tuple(range(newest - live.MAX_GAPS, newest))


async def test_a_subscription_that_stops_reading_is_cut_off(monkeypatch):
    monkeypatch.setattr(live, "MAX_PENDING", 3)
    subscription = live.Subscription()
    event = {"id": 1, "project_id": 1, "session_id": None}
    subscription.offer([event, event])
    assert await subscription.take() == [event, event]
    subscription.offer([event] * 4)
    with pytest.raises(live.SubscriberTooSlow):
        await subscription.take()
