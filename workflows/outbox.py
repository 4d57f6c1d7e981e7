"""Tell live listeners that the ``Event`` outbox has new rows.

The outbox table is the source of truth: every web process tails it. Announcements only make
a web process read it sooner, so they carry no event data: a lost or doubled announcement can
never lose or double an event. Two kinds of listener:

- other processes, over the channel layer, when ``REDIS_URL`` is set (group ``deepwork.outbox``,
  message ``{"type": "outbox.changed"}``);
- this process's own outbox tailer, if it runs one (the web process), called directly, so a
  change made from the dashboard shows without waiting for the next poll even without Redis.

Announcing must never slow down or break a transition: ``announce`` runs after commit, calls
the local listeners (which only schedule work) and hands the channel-layer send to one daemon
thread per process through a queue.
"""

from __future__ import annotations

import asyncio
import atexit
import logging
import queue
import threading
from collections.abc import Callable

from django.conf import settings

logger = logging.getLogger(__name__)

OUTBOX_GROUP = "deepwork.outbox"
ANNOUNCE_MESSAGE = {"type": "outbox.changed"}

# How long a process that exits waits for its last announcements to go out.
EXIT_FLUSH_SECONDS = 1.0

# Items are True ("send one announcement") or a threading.Event set once everything queued
# before it has been sent (see ``flush``).
_pending: queue.SimpleQueue[bool | threading.Event] = queue.SimpleQueue()
_sender: threading.Thread | None = None
_sender_lock = threading.Lock()
_local_listeners: tuple[Callable[[], None], ...] = ()
_listeners_lock = threading.Lock()


def announces_over_channel_layer() -> bool:
    """Only a layer that crosses processes (Redis) is worth a send per commit."""
    return bool(getattr(settings, "REDIS_URL", ""))


def announcer_enabled() -> bool:
    """Whether a committed outbox write should be announced at all."""
    return bool(_local_listeners) or announces_over_channel_layer()


def add_local_listener(listener: Callable[[], None]) -> None:
    """Call ``listener`` after every committed outbox write in this process.

    It runs on the committing thread, so it must be quick and thread-safe (for an asyncio
    consumer: ``loop.call_soon_threadsafe(...)``).
    """
    global _local_listeners
    with _listeners_lock:
        _local_listeners = (*_local_listeners, listener)


def remove_local_listener(listener: Callable[[], None]) -> None:
    global _local_listeners
    with _listeners_lock:
        _local_listeners = tuple(item for item in _local_listeners if item is not listener)


def announce() -> None:
    """Tell every listener to look at the outbox now; returns at once."""
    for listener in _local_listeners:
        try:
            listener()
        except Exception:  # a listener's trouble must never reach the committing service
            logger.warning("Outbox listener %r failed", listener, exc_info=True)
    if announces_over_channel_layer():
        _ensure_sender()
        _pending.put(True)


def flush(timeout: float) -> bool:
    """Wait until every announcement queued so far has been handed to the channel layer.

    Returns False if that took longer than ``timeout`` seconds.
    """
    if _sender is None or not _sender.is_alive():
        return True
    done = threading.Event()
    _pending.put(done)
    return done.wait(timeout)


def _ensure_sender() -> None:
    global _sender
    if _sender is not None and _sender.is_alive():
        return
    with _sender_lock:
        if _sender is None or not _sender.is_alive():
            _sender = threading.Thread(target=_send_forever, name="outbox-announcer", daemon=True)
            _sender.start()
            # An mcpserve that exits right after a commit would otherwise drop its last
            # announcement with the daemon thread; the poll would still deliver, just later.
            atexit.register(flush, EXIT_FLUSH_SECONDS)


def _send_forever() -> None:
    from channels.layers import get_channel_layer

    # One event loop for the thread's lifetime: the Redis layer keeps its connection pool per
    # loop, so a fresh loop per send (async_to_sync) would reconnect every time.
    loop = asyncio.new_event_loop()
    failing = False
    while True:
        items = [_pending.get()]
        # Several commits in a burst need only one "look now".
        while True:
            try:
                items.append(_pending.get_nowait())
            except queue.Empty:
                break
        if any(item is True for item in items):
            try:
                layer = get_channel_layer()
                loop.run_until_complete(layer.group_send(OUTBOX_GROUP, dict(ANNOUNCE_MESSAGE)))
            except Exception:  # the outbox poll still delivers; never let the thread die
                # Once per outage, not once per commit.
                if not failing:
                    logger.warning(
                        "Could not announce outbox changes over the channel layer; live "
                        "updates fall back to polling",
                        exc_info=True,
                    )
                failing = True
            else:
                if failing:
                    logger.info("Outbox announcements over the channel layer work again")
                failing = False
        for item in items:
            if isinstance(item, threading.Event):
                item.set()
