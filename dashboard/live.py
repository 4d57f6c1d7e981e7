"""Live updates: one tailer of the ``Event`` outbox per web process, fanned out in-process.

Any process may write events (every ``mcpserve``, the web process itself). The outbox table
is the only channel between them that works on every topology, SQLite included, so each web
process reads ``Event`` rows with an id above the last one it has seen and hands them to the
sockets that want them. With ``REDIS_URL``, writers also announce each commit over the
channel layer (``workflows.outbox``) and the tailer reads at once instead of at its next poll.

Ids are increasing but, on PostgreSQL, need not commit in order: a transaction that took id
10 may commit after one that took id 11. The tailer therefore remembers the ids it has not
seen below its high-water mark and asks for them again for ``GAP_SECONDS`` (a rolled-back
insert leaves a hole that never fills). SQLite serializes writers, so it never has holes.

The tailer runs while at least one socket is subscribed and pauses, without touching the
database, while none is.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Collection, Iterable
from typing import Any

from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from django.conf import settings

from workflows import outbox
from workflows.selectors import events as reads

logger = logging.getLogger(__name__)

# Most rows one outbox read returns; a full batch is followed by another read at once.
BATCH_SIZE = 500
# Most events a reconnecting socket is sent to catch up (the newest ones).
CATCH_UP_LIMIT = 500
# How long an id missing below the high-water mark may still turn up (a slow commit).
GAP_SECONDS = 30.0
# Most missing ids remembered; a wider hole (a PostgreSQL sequence jump) is not tracked.
MAX_GAPS = 1000
# How many recent ids the tailer looks at when it starts, to spot holes already open.
START_WINDOW = 200
# Longest pause between retries while the database is unreachable.
RETRY_MAX_SECONDS = 5.0
# How long the first subscriber may wait for the tailer to join the announcement group; after
# that the poll delivers until it has.
JOIN_TIMEOUT_SECONDS = 2.0
# Longest a new socket waits for the tailer to find its place in the outbox (database down).
SUBSCRIBE_TIMEOUT_SECONDS = 10.0
# Group membership on the Redis layer expires (a day by default); renew it well before.
GROUP_RENEW_SECONDS = 3600.0
# Events queued for one socket that has stopped reading before it is disconnected.
MAX_PENDING = 5000

LiveEvent = dict[str, Any]


def _live(row: reads.EventRow) -> LiveEvent:
    """An event as the socket sends it (JSON: the time as ISO 8601)."""
    return {**row, "created_at": row["created_at"].isoformat()}


async def catch_up(
    *, after: int, project_id: int | None, session_id: str | None
) -> tuple[list[LiveEvent], bool]:
    """The newest ``CATCH_UP_LIMIT`` matching events above ``after``, oldest first, and
    whether older matching ones were left out: a socket's one read of its own."""
    rows, truncated = await database_sync_to_async(reads.events_after)(
        after=after,
        project_id=project_id,
        session_id=session_id,
        limit=CATCH_UP_LIMIT,
        keep="newest",
    )
    return [_live(row) for row in rows], truncated


def events_for_tail(*, after: int, missing: Collection[int], limit: int) -> list[LiveEvent]:
    """The tailer's read (``reads.events_for_tail``), shaped for the sockets."""
    return [_live(row) for row in reads.events_for_tail(after=after, missing=missing, limit=limit)]


class SubscriberTooSlow(Exception):
    """A socket stopped reading while events kept coming."""


class Subscription:
    """One socket's interest (its filters) and the live events waiting to be sent to it."""

    def __init__(self, *, project_id: int | None = None, session_id: str | None = None) -> None:
        self.project_id = project_id
        self.session_id = session_id
        self._pending: list[LiveEvent] = []
        self._has_pending = asyncio.Event()
        self._sent_ids: frozenset[int] = frozenset()
        self._skip_between: tuple[int, int] | None = None
        self._overflowed = False

    def matches(self, event: LiveEvent) -> bool:
        if self.project_id is not None and event["project_id"] != self.project_id:
            return False
        return self.session_id is None or event["session_id"] == self.session_id

    def _wanted(self, event: LiveEvent) -> bool:
        if not self.matches(event) or event["id"] in self._sent_ids:
            return False
        if self._skip_between is not None:
            low, high = self._skip_between
            return not low < event["id"] < high
        return True

    def offer(self, events: list[LiveEvent]) -> None:
        """Queue the events this socket wants (called by the tailer, never blocks)."""
        self._pending.extend(event for event in events if self._wanted(event))
        if len(self._pending) > MAX_PENDING:
            self._overflowed = True
        if self._pending or self._overflowed:
            self._has_pending.set()

    def caught_up(self, *, events: list[LiveEvent], after: int, truncated: bool) -> None:
        """Record what the catch-up sent, so the live stream does not repeat it.

        The tailer may hand over an event the catch-up also read (committed between
        subscribing and the catch-up query); it is dropped here and from then on. When the
        catch-up left older events out, those stay out of the live stream too.
        """
        self._sent_ids = frozenset(event["id"] for event in events)
        if truncated and events:
            self._skip_between = (after, events[0]["id"])
        self._pending = [event for event in self._pending if self._wanted(event)]
        if not self._pending:
            self._has_pending.clear()

    async def take(self) -> list[LiveEvent]:
        """Wait for live events and return all that are queued, in the order they arrived."""
        await self._has_pending.wait()
        self._has_pending.clear()
        if self._overflowed:
            raise SubscriberTooSlow(f"more than {MAX_PENDING} events queued for one socket")
        events, self._pending = self._pending, []
        return events


class OutboxMark:
    """How far a tailer has read the outbox: the highest id handed over, and the ids below it
    not seen yet, each awaited for ``GAP_SECONDS`` after it was first missed."""

    def __init__(self, *, last_id: int = 0, missing: Iterable[int] = ()) -> None:
        self._last_id = last_id
        self._gaps = dict.fromkeys(missing, time.monotonic())

    @property
    def last_id(self) -> int:
        return self._last_id

    @property
    def missing(self) -> tuple[int, ...]:
        """The ids still awaited, in order: the next read asks for them again."""
        return tuple(sorted(self._gaps))

    def advance(self, rows: list[LiveEvent]) -> list[LiveEvent]:
        """Move the mark over ``rows`` (in id order); return the ones not yet handed over."""
        now = time.monotonic()
        if self._gaps:
            self._gaps = {i: seen for i, seen in self._gaps.items() if now - seen < GAP_SECONDS}
        fresh = []
        for row in rows:
            event_id = row["id"]
            if self._gaps.pop(event_id, None) is not None:
                fresh.append(row)
                continue
            if event_id <= self._last_id:
                continue
            # Ids skipped over may still be in flight. After a long jump (PostgreSQL burns
            # sequence values on every rolled-back insert) the ones just below are the likely
            # ones, so the nearest MAX_GAPS are kept, not none.
            for missing in range(max(self._last_id + 1, event_id - MAX_GAPS), event_id):
                self._gaps[missing] = now
            self._last_id = event_id
            fresh.append(row)
        if len(self._gaps) > MAX_GAPS:
            self._gaps = dict(sorted(self._gaps.items())[-MAX_GAPS:])
        return fresh


class OutboxTailer:
    """Reads new outbox rows and offers them to every subscription; one per event loop."""

    def __init__(self, *, poll_seconds: float, batch_size: int = BATCH_SIZE) -> None:
        self.loop = asyncio.get_running_loop()
        self.poll_seconds = poll_seconds
        self.batch_size = batch_size
        self._subscribers: set[Subscription] = set()
        self._wanted = asyncio.Event()
        self._wake = asyncio.Event()
        self._ready: asyncio.Future[None] | None = None
        self._task: asyncio.Task[None] | None = None
        self._mark = OutboxMark()
        self._listener = self._poke_from_any_thread

    @property
    def running(self) -> bool:
        """Whether the tailer's task is alive (it idles without subscribers, until stopped)."""
        return self._task is not None and not self._task.done()

    @property
    def last_id(self) -> int:
        """The highest outbox id handed to the subscriptions."""
        return self._mark.last_id

    @property
    def subscriber_count(self) -> int:
        """How many subscriptions are being offered events; a closed socket leaves none behind."""
        return len(self._subscribers)

    async def subscribe(self, subscription: Subscription) -> None:
        """Start offering live events to ``subscription``; returns once the tailer is reading,
        so every event committed after this returns reaches the subscription."""
        self._subscribers.add(subscription)
        if self._ready is None:
            self._ready = self.loop.create_future()
            self._wanted.set()
        if self._task is None or self._task.done():
            outbox.remove_local_listener(self._listener)
            outbox.add_local_listener(self._listener)
            self._task = self.loop.create_task(self._main(), name="deepwork-outbox-tailer")
        try:
            await asyncio.wait_for(asyncio.shield(self._ready), SUBSCRIBE_TIMEOUT_SECONDS)
        except BaseException:
            self.unsubscribe(subscription)
            raise

    def unsubscribe(self, subscription: Subscription) -> None:
        self._subscribers.discard(subscription)
        if not self._subscribers:
            self._wake.set()

    def poke(self) -> None:
        """Read the outbox now instead of at the next poll."""
        self._wake.set()

    def _poke_from_any_thread(self) -> None:
        if not self.loop.is_closed():
            self.loop.call_soon_threadsafe(self._wake.set)

    async def stop(self) -> None:
        outbox.remove_local_listener(self._listener)
        task, self._task = self._task, None
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _main(self) -> None:
        while True:
            await self._wanted.wait()
            try:
                await self._tail_while_wanted()
            except asyncio.CancelledError:
                raise
            except Exception:  # a bug, not the database (retried inside): keep serving
                logger.exception("The outbox tailer failed; restarting it")
                await asyncio.sleep(RETRY_MAX_SECONDS)
                if self._subscribers and self._ready is None:
                    self._ready = self.loop.create_future()
                    self._wanted.set()

    async def _tail_while_wanted(self) -> None:
        ready = self._ready
        assert ready is not None
        listener: asyncio.Task[None] | None = None
        try:
            if not await self._find_position():
                return
            if outbox.announces_over_channel_layer():
                joined: asyncio.Future[None] = self.loop.create_future()
                listener = self.loop.create_task(self._listen(joined), name="deepwork-outbox-ear")
                await asyncio.wait([joined], timeout=JOIN_TIMEOUT_SECONDS)
            if not ready.done():
                ready.set_result(None)
            await self._tail()
        finally:
            # No await from the last subscriber check to here: a subscriber that arrives after
            # it finds the tailer idle and wakes it again.
            if not ready.done():
                if self._subscribers:
                    ready.set_exception(RuntimeError("the outbox tailer stopped"))
                else:
                    ready.cancel()
            self._ready = None
            self._wanted.clear()
            if listener is not None:
                listener.cancel()
                await asyncio.gather(listener, return_exceptions=True)

    async def _find_position(self) -> bool:
        failures = 0
        while self._subscribers:
            try:
                last_id, missing = await database_sync_to_async(reads.outbox_position)(
                    window=START_WINDOW
                )
            except Exception:
                failures += 1
                await self._after_failure(failures, "find the outbox position")
                continue
            self._mark = OutboxMark(last_id=last_id, missing=missing)
            return True
        return False

    async def _tail(self) -> None:
        failures = 0
        while self._subscribers:
            # Cleared before the read, so a poke that arrives during it causes another read.
            self._wake.clear()
            try:
                rows = await database_sync_to_async(events_for_tail)(
                    after=self._mark.last_id, missing=self._mark.missing, limit=self.batch_size
                )
            except Exception:
                failures += 1
                await self._after_failure(failures, "read the outbox")
                continue
            if failures:
                logger.info("Reading the outbox for live updates works again")
            failures = 0
            fresh = self._mark.advance(rows)
            if fresh:
                for subscription in tuple(self._subscribers):
                    subscription.offer(fresh)
            if len(rows) < self.batch_size:
                await self._sleep(self.poll_seconds)

    async def _after_failure(self, failures: int, doing: str) -> None:
        # Once per outage with the traceback; the connection is reopened on the next try
        # (database_sync_to_async closes broken ones).
        if failures == 1:
            logger.warning("Could not %s for live updates; retrying", doing, exc_info=True)
        await self._sleep(min(RETRY_MAX_SECONDS, self.poll_seconds * 2**failures))

    async def _sleep(self, seconds: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._wake.wait(), seconds)

    async def _listen(self, joined: asyncio.Future[None]) -> None:
        """Poke the tailer whenever another process announces an outbox write."""
        layer = get_channel_layer()
        channel = None
        failures = 0
        try:
            while True:
                try:
                    channel = await layer.new_channel()
                    await layer.group_add(outbox.OUTBOX_GROUP, channel)
                    if not joined.done():
                        joined.set_result(None)
                    if failures:
                        logger.info("Listening for outbox announcements again")
                    failures = 0
                    while True:
                        try:
                            await asyncio.wait_for(layer.receive(channel), GROUP_RENEW_SECONDS)
                        except TimeoutError:
                            await layer.group_add(outbox.OUTBOX_GROUP, channel)
                        else:
                            self._wake.set()
                except asyncio.CancelledError:
                    raise
                except Exception:
                    failures += 1
                    if failures == 1:
                        logger.warning(
                            "Lost the outbox announcements on the channel layer; live updates "
                            "poll every %ss until they are back",
                            self.poll_seconds,
                            exc_info=True,
                        )
                    await asyncio.sleep(min(RETRY_MAX_SECONDS, 0.5 * 2**failures))
        finally:
            if channel is not None:
                try:
                    await layer.group_discard(outbox.OUTBOX_GROUP, channel)
                except Exception:  # membership expires on its own
                    logger.debug("Could not leave the outbox group", exc_info=True)


_tailer: OutboxTailer | None = None


def get_tailer() -> OutboxTailer:
    """This process's tailer, on the running event loop."""
    global _tailer
    loop = asyncio.get_running_loop()
    if _tailer is None or _tailer.loop is not loop:
        if _tailer is not None:
            # A previous loop (tests run one per test) took its tasks with it.
            outbox.remove_local_listener(_tailer._listener)
        _tailer = OutboxTailer(poll_seconds=settings.DEEPWORK_OUTBOX_POLL_SECONDS)
    return _tailer


async def shutdown() -> None:
    """Stop this process's tailer (ASGI lifespan shutdown, and between tests)."""
    global _tailer
    tailer, _tailer = _tailer, None
    if tailer is not None and tailer.loop is asyncio.get_running_loop():
        await tailer.stop()
    elif tailer is not None:
        outbox.remove_local_listener(tailer._listener)


async def lifespan(
    scope: dict[str, Any],
    receive: Callable[[], Awaitable[dict[str, Any]]],
    send: Callable[[dict[str, Any]], Awaitable[None]],
) -> None:
    """ASGI lifespan: nothing to start (the tailer starts with its first subscriber); stop
    the tailer on shutdown."""
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await shutdown()
            await send({"type": "lifespan.shutdown.complete"})
            return
