"""WebSocket routes of the dashboard (mounted by ``deepwork_site.asgi``)."""

from django.urls import path

from dashboard.consumers import EventsConsumer

websocket_urlpatterns = [
    path("ws/events/", EventsConsumer.as_asgi(), name="live-events"),
]
