"""The ASGI application: static files still served in-process, the lifespan protocol answered."""

from __future__ import annotations

import pytest
from asgiref.testing import ApplicationCommunicator

from dashboard import live
from deepwork_site.asgi import application
from tests.dashboard.live.conftest import open_socket


async def test_static_files_are_served_by_the_asgi_application():
    communicator = ApplicationCommunicator(
        application,
        {
            "type": "http",
            "http_version": "1.1",
            "method": "GET",
            "path": "/static/admin/css/base.css",
            "raw_path": b"/static/admin/css/base.css",
            "query_string": b"",
            "headers": [(b"host", b"127.0.0.1")],
        },
    )
    await communicator.send_input({"type": "http.request", "body": b""})
    start = await communicator.receive_output(timeout=10)
    assert start["type"] == "http.response.start"
    assert start["status"] == 200
    assert (b"content-type", b"text/css") in [
        (name.lower(), value.split(b";")[0]) for name, value in start["headers"]
    ]


@pytest.mark.django_db(transaction=True)
async def test_lifespan_starts_at_once_and_stops_the_tailer_on_shutdown(watcher_cookie):
    socket = await open_socket("/ws/events/", watcher_cookie)
    tailer = live.get_tailer()
    assert tailer.running

    lifespan = ApplicationCommunicator(
        application, {"type": "lifespan", "asgi": {"version": "3.0"}}
    )
    await lifespan.send_input({"type": "lifespan.startup"})
    assert await lifespan.receive_output(timeout=10) == {"type": "lifespan.startup.complete"}
    await lifespan.send_input({"type": "lifespan.shutdown"})
    assert await lifespan.receive_output(timeout=10) == {"type": "lifespan.shutdown.complete"}
    assert not tailer.running
    assert live.get_tailer() is not tailer
    await socket.disconnect()
