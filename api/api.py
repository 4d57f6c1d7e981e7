"""The REST API: one NinjaAPI mounted at /api/."""

from ninja import NinjaAPI

api = NinjaAPI(title="deepwork-server", version="1", urls_namespace="api")
