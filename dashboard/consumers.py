"""The dashboard's live socket: ``/ws/events/?after=<id>&project=<pk>&session=<session_id>``.

It sends ``{"type": "events", "events": [...]}`` batches: first every matching event with an
id above ``after`` (at most ``live.CATCH_UP_LIMIT``, the newest), then live ones as this
process's outbox tailer reads them. Refusals close the socket after accepting it, so that the
page sees the code.

Close codes (the page stops retrying on 44xx):
- 4400: bad parameters.
- 4401: the login behind an open socket is over (logged out, session expired, password
  changed, account deactivated or deleted).
- 4403: not allowed to watch (no ``workflows.view_workflowsession``), at connect or later.
- 1011: the socket could not start; 1013: it fell too far behind (the page reconnects).

An open socket re-checks its right every ``RECHECK_SECONDS``, and before sending a batch when
the last check is at least ``RECHECK_MIN_SECONDS`` old, so a lost right stops the stream within
that much time of busy delivery, and an idle socket closes within ``RECHECK_SECONDS``.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from dataclasses import dataclass
from urllib.parse import parse_qs

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from dashboard import access, live
from dashboard.access import WatchRight

logger = logging.getLogger(__name__)

CLOSE_LOGGED_OUT = 4401
CLOSE_FORBIDDEN = 4403
CLOSE_BAD_REQUEST = 4400
CLOSE_INTERNAL_ERROR = 1011
# The socket fell too far behind; the page reconnects and catches up from its newest id.
CLOSE_TRY_AGAIN_LATER = 1013

SESSION_ID = re.compile(r"[A-Za-z0-9_-]{1,32}")
MAX_ID = 2**63 - 1

# How often an open socket checks that its user may still watch, even with nothing to send.
RECHECK_SECONDS = 30.0
# The least time between two checks made because a batch is about to be sent: a busy socket
# costs a few queries every few seconds, not a few per batch.
RECHECK_MIN_SECONDS = 5.0
# After a check that failed (the database unreachable), the periodic one comes this much later.
RECHECK_RETRY_SECONDS = 5.0


class BadParameters(ValueError):
    pass


@dataclass(frozen=True)
class LiveQuery:
    after: int | None
    project_id: int | None
    session_id: str | None

    @classmethod
    def parse(cls, query_string: bytes) -> LiveQuery:
        """Read the socket's query string; an empty value counts as absent."""
        try:
            params = parse_qs(query_string.decode("ascii"), strict_parsing=False)
        except UnicodeDecodeError:
            raise BadParameters("the query string is not ASCII") from None
        values = {}
        for name in ("after", "project", "session"):
            given = params.get(name, [])
            if len(given) > 1:
                raise BadParameters(f"{name} is given more than once")
            values[name] = given[0].strip() if given and given[0].strip() else None
        return cls(
            after=_whole_number("after", values["after"], minimum=0),
            project_id=_whole_number("project", values["project"], minimum=1),
            session_id=_session_id(values["session"]),
        )


def _whole_number(name: str, value: str | None, *, minimum: int) -> int | None:
    if value is None:
        return None
    if not value.isascii() or not value.isdigit() or not minimum <= int(value) <= MAX_ID:
        raise BadParameters(f"{name} must be a whole number of at least {minimum}")
    return int(value)


def _session_id(value: str | None) -> str | None:
    if value is not None and not SESSION_ID.fullmatch(value):
        raise BadParameters("session must be a session id")
    return value


_may_watch = database_sync_to_async(access.may_watch)

CLOSE_CODES = {WatchRight.LOGGED_OUT: CLOSE_LOGGED_OUT, WatchRight.FORBIDDEN: CLOSE_FORBIDDEN}


class EventsConsumer(AsyncJsonWebsocketConsumer):
    # Events reach sockets in-process from the tailer (dashboard.live), never over the channel
    # layer, so a socket needs no channel of its own (with Redis that saves a blocking receive
    # per socket). An alias that is not configured gives no layer.
    channel_layer_alias = "dashboard.live.none"

    tailer: live.OutboxTailer | None = None
    subscription: live.Subscription | None = None
    pump: asyncio.Task[None] | None = None
    session_key: str | None = None
    user_id: object = None
    checked_at = 0.0
    check_failures = 0

    async def connect(self) -> None:
        user = self.scope.get("user")
        if not await _may_watch(user):
            await self._refuse(CLOSE_FORBIDDEN)
            return
        session = self.scope.get("session")
        self.session_key = session.session_key if session is not None else None
        self.user_id = user.pk
        self.checked_at = time.monotonic()
        try:
            query = LiveQuery.parse(self.scope.get("query_string", b""))
        except BadParameters as error:
            await self._refuse(CLOSE_BAD_REQUEST, str(error))
            return

        # Subscribe first, then catch up: an event committed in between comes both ways and
        # the subscription drops the repeat; subscribing second could miss it.
        subscription = live.Subscription(project_id=query.project_id, session_id=query.session_id)
        self.tailer = live.get_tailer()
        try:
            await self.tailer.subscribe(subscription)
            self.subscription = subscription
            caught_up: list[live.LiveEvent] = []
            if query.after is not None:
                caught_up, truncated = await live.catch_up(
                    after=query.after, project_id=query.project_id, session_id=query.session_id
                )
                subscription.caught_up(events=caught_up, after=query.after, truncated=truncated)
        except Exception:
            logger.warning("Could not start a live socket", exc_info=True)
            await self._refuse(CLOSE_INTERNAL_ERROR)
            return

        # Accepted only now, so that everything committed after the page sees the socket open
        # is sure to reach it.
        await self.accept()
        if caught_up:
            await self.send_json({"type": "events", "events": caught_up})
        self.pump = asyncio.create_task(self._send_live(), name="deepwork-live-socket")

    async def _send_live(self) -> None:
        subscription = self.subscription
        assert subscription is not None
        # One take() at a time, kept across the periodic checks, so no batch is dropped.
        taking: asyncio.Task[list[live.LiveEvent]] | None = None
        try:
            while True:
                if taking is None:
                    taking = asyncio.ensure_future(subscription.take())
                wait = self.checked_at + RECHECK_SECONDS - time.monotonic()
                done, _ = await asyncio.wait({taking}, timeout=max(wait, 0))
                events: list[live.LiveEvent] = []
                if taking in done:
                    events, taking = taking.result(), None
                since_check = time.monotonic() - self.checked_at
                if since_check >= RECHECK_SECONDS or (
                    events and since_check >= RECHECK_MIN_SECONDS
                ):
                    code = await self._lost_right()
                    if code is not None:
                        self._unsubscribe()
                        await self.close(code=code)
                        return
                if events:
                    await self.send_json({"type": "events", "events": events})
        except live.SubscriberTooSlow:
            await self.close(code=CLOSE_TRY_AGAIN_LATER)
        except asyncio.CancelledError:
            raise
        except Exception:  # the socket went away under us; disconnect() cleans up
            logger.debug("Live socket send failed", exc_info=True)
        finally:
            if taking is not None:
                taking.cancel()

    async def _lost_right(self) -> int | None:
        """The close code if the user may no longer watch; None while they may (or when the
        check itself failed: the database being down is no reason to cut every socket)."""
        try:
            right = await database_sync_to_async(access.watch_right)(
                session_key=self.session_key, user_id=self.user_id
            )
        except Exception:
            # Once per outage with the traceback: every open socket retries on its own.
            self.check_failures += 1
            log = logger.warning if self.check_failures == 1 else logger.debug
            log("Could not re-check a live socket's right; retrying", exc_info=True)
            self.checked_at = time.monotonic() - RECHECK_SECONDS + RECHECK_RETRY_SECONDS
            return None
        self.check_failures = 0
        self.checked_at = time.monotonic()
        return CLOSE_CODES.get(right)

    async def _refuse(self, code: int, reason: str | None = None) -> None:
        self._unsubscribe()
        await self.accept()
        await self.close(code=code, reason=reason)

    async def disconnect(self, code: int) -> None:
        if self.pump is not None:
            self.pump.cancel()
            self.pump = None
        self._unsubscribe()

    def _unsubscribe(self) -> None:
        if self.tailer is not None and self.subscription is not None:
            self.tailer.unsubscribe(self.subscription)
        self.subscription = None

    async def receive(
        self, text_data: str | None = None, bytes_data: bytes | None = None, **kwargs: object
    ) -> None:
        """The page only listens; anything it sends is ignored (not even decoded)."""
