"""The REST API: one NinjaAPI mounted at /api/.

Every operation needs ``Authorization: Bearer <token>`` (see ``api.auth``); the OpenAPI
document (/api/openapi.json) and its Swagger page (/api/docs) are public, as they hold no
data. Reads need ``workflows.view_workflowsession``; the actions need the permission named on
each. Finishing a step with ``override_reason`` skips its review, so it also needs
``reviews.decide_review``. Actions call the same services as the MCP tools and answer with the
same wire models, rendered by the same DeepWork dialect.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any

from django.http import HttpRequest, HttpResponse, HttpResponseNotAllowed
from django.urls import URLPattern, URLResolver, path
from django.views.decorators.csrf import csrf_exempt
from ninja import NinjaAPI
from ninja.operation import Operation

from api import errors
from api.auth import VIEW, TokenAuth
from api.errors import error_body
from api.routers.dag import router as dag_router
from api.routers.events import router as events_router
from api.routers.insights import router as insights_router
from api.routers.projects import router as projects_router
from api.routers.published_workflows import router as published_workflows_router
from api.routers.sessions import router as sessions_router
from api.routers.tracker import router as tracker_router


class DeepworkAPI(NinjaAPI):
    """NinjaAPI whose every answer under /api/, including an unknown path or method, is JSON
    in the one error shape."""

    def _get_urls(self) -> list[URLResolver | URLPattern]:
        urls = super()._get_urls()
        for pattern in urls:
            if isinstance(pattern, URLPattern):
                if pattern.name == "api-root":
                    pattern.callback = _unknown_path
                else:
                    pattern.callback = _json_not_allowed(pattern.callback)
        # Last, so it only catches what no operation matched.
        urls.append(path("<path:unknown>", _unknown_path))
        return urls

    def get_openapi_operation_id(self, operation: Operation) -> str:
        return operation.view_func.__name__


def _error_response(request: HttpRequest, status: int, code: str, message: str) -> HttpResponse:
    return HttpResponse(
        api.renderer.render(request, error_body(status, code, message), response_status=status),
        status=status,
        content_type=api.get_content_type(),
    )


@csrf_exempt
def _unknown_path(request: HttpRequest, **kwargs: object) -> HttpResponse:
    return _error_response(
        request, 404, "not_found", f"No API operation at {request.path}; see /api/docs"
    )


def _json_not_allowed(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    @wraps(view)
    def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        response = view(request, *args, **kwargs)
        if isinstance(response, HttpResponseNotAllowed):
            allowed = response["Allow"]
            response = _error_response(
                request,
                405,
                "method_not_allowed",
                f"{request.method} is not allowed here; use {allowed}",
            )
            response["Allow"] = allowed
        return response

    return wrapper


api = DeepworkAPI(
    title="deepwork-server",
    version="1",
    urls_namespace="api",
    description=__doc__,
    # Each operation names its permission; an operation that forgets to is still not public.
    auth=TokenAuth(VIEW),
)
errors.install(api)
# Each context's operations in a router of its own. Two routers must not share a path (the
# first one's would answer 405 to the other's methods); the order is the order of the docs.
api.add_router("/projects", projects_router)
api.add_router("/sessions", sessions_router)
api.add_router("/events", events_router)
api.add_router("/projects", published_workflows_router)
api.add_router("/insights", insights_router)
api.add_router("/tracker", tracker_router)
api.add_router("/dag", dag_router)
