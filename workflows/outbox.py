"""Tell live listeners that the ``Event`` outbox has new rows.

The outbox table is the source of truth: every web process tails it. With ``REDIS_URL`` set,
each committed write also sends a tiny "look now" message over the channel layer so a web
process reads the outbox at once instead of at its next poll. The message carries no event
data, so a lost or doubled announcement can never lose or double an event.

Announcing must never slow down or break a transition: it is handed to one daemon thread per
process through a queue and sent from there.
"""

from __future__ import annotations

import logging
import queue
import threading

from django.conf import settings

logger = logging.getLogger(__name__)

OUTBOX_GROUP = "deepwork.outbox"
ANNOUNCE_MESSAGE = {"type": "outbox.changed"}

_pending: queue.SimpleQueue[bool] = queue.SimpleQueue()
_sender: threading.Thread | None = None
_sender_lock = threading.Lock()


def announcer_enabled() -> bool:
    """Announcements only help when the channel layer crosses processes (Redis)."""
    return bool(getattr(settings, "REDIS_URL", ""))


def announce() -> None:
    """Queue one announcement; returns at once."""
    _ensure_sender()
    _pending.put(True)


def _ensure_sender() -> None:
    global _sender
    if _sender is not None and _sender.is_alive():
        return
    with _sender_lock:
        if _sender is None or not _sender.is_alive():
            _sender = threading.Thread(target=_send_forever, name="outbox-announcer", daemon=True)
            _sender.start()


def _send_forever() -> None:
    from asgiref.sync import async_to_sync
    from channels.layers import get_channel_layer

    layer = get_channel_layer()
    send = async_to_sync(layer.group_send)
    while True:
        _pending.get()
        # Several commits in a burst need only one "look now".
        while True:
            try:
                _pending.get_nowait()
            except queue.Empty:
                break
        try:
            send(OUTBOX_GROUP, ANNOUNCE_MESSAGE)
        except Exception:  # the outbox poll still delivers; never let the thread die
            logger.warning(
                "Could not announce outbox changes over the channel layer", exc_info=True
            )
