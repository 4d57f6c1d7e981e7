"""One shape for every error the API answers:

    {"error": {"status": 404, "code": "not_found", "message": "...", "details": null}}

``details`` is a list (which request fields were wrong, and why) or null. The engine's errors
keep their exact messages, the same an agent reads over MCP.
"""

from __future__ import annotations

import logging
from typing import Any

from django.conf import settings
from django.core.exceptions import RequestDataTooBig, SuspiciousOperation, TooManyFieldsSent
from django.db import OperationalError
from django.http import Http404, HttpRequest, HttpResponse
from ninja import NinjaAPI
from ninja.errors import AuthenticationError, AuthorizationError, HttpError, ValidationError

from reviews.services import GateFailed
from workflows.db import BUSY_MESSAGE, is_busy
from workflows.errors import (
    Conflict,
    Forbidden,
    InvalidInput,
    JobBroken,
    NotFound,
    ProjectUnavailable,
    WorkflowError,
)

logger = logging.getLogger("deepwork.api")


class ApiError(Exception):
    """An answer the API refuses with, raised by endpoints and authentication."""

    def __init__(self, status: int, code: str, message: str, details: list[Any] | None = None):
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.details = details


# Checked in order: subclasses before their bases.
WORKFLOW_ERRORS: list[tuple[type[WorkflowError], int, str]] = [
    (NotFound, 404, "not_found"),
    (Forbidden, 403, "forbidden"),
    (InvalidInput, 400, "invalid_input"),
    # The request was sound; the job's files on the server are not. Fixing them and retrying
    # succeeds, which is what 409 promises (a lost race is told apart by its code).
    (JobBroken, 409, "job_broken"),
    (Conflict, 409, "conflict"),
    # Served by a machine without the project's folder; retrying where it is succeeds.
    (ProjectUnavailable, 409, "project_unavailable"),
    # The reviews failed too often, or the reviewer broke: the step cannot pass as handed in.
    (GateFailed, 409, "gate_failed"),
]

HTTP_CODES = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    409: "conflict",
    413: "payload_too_large",
    429: "throttled",
    503: "database_busy",
}


def error_body(
    status: int, code: str, message: str, details: list[Any] | None = None
) -> dict[str, Any]:
    return {"error": {"status": status, "code": code, "message": message, "details": details}}


def classify(exc: WorkflowError) -> tuple[int, str]:
    for cls, status, code in WORKFLOW_ERRORS:
        if isinstance(exc, cls):
            return status, code
    return 400, "invalid_input"


def _validation_details(errors: list[dict[str, Any]]) -> list[dict[str, Any]]:
    # ninja's error dicts may carry the raising exception in ``ctx``; keep what is readable.
    return [
        {
            "loc": [str(part) for part in error.get("loc", ())],
            "msg": str(error.get("msg", "")),
            "type": str(error.get("type", "")),
        }
        for error in errors
    ]


def _security_log(exc: SuspiciousOperation) -> None:
    logging.getLogger(f"django.security.{exc.__class__.__name__}").error(str(exc))


def install(api: NinjaAPI) -> None:
    """Answer every exception an endpoint (or ninja itself) raises in the one error shape."""

    def answer(
        request: HttpRequest, status: int, code: str, message: str, details: list[Any] | None = None
    ) -> HttpResponse:
        return api.create_response(
            request, error_body(status, code, message, details), status=status
        )

    @api.exception_handler(ApiError)
    def api_error(request: HttpRequest, exc: ApiError) -> HttpResponse:
        return answer(request, exc.status, exc.code, exc.message, exc.details)

    @api.exception_handler(WorkflowError)
    def workflow_error(request: HttpRequest, exc: WorkflowError) -> HttpResponse:
        status, code = classify(exc)
        return answer(request, status, code, exc.message)

    @api.exception_handler(ValidationError)
    def validation_error(request: HttpRequest, exc: ValidationError) -> HttpResponse:
        # ninja answers 422; a malformed request is a 400 here like any other bad input.
        return answer(
            request,
            400,
            "invalid_request",
            "The request does not match the operation's parameters",
            _validation_details(exc.errors),
        )

    @api.exception_handler(AuthenticationError)
    def authentication_error(request: HttpRequest, exc: AuthenticationError) -> HttpResponse:
        response = answer(
            request,
            401,
            "unauthorized",
            "Authentication required: send 'Authorization: Bearer <token>' with a valid, "
            "unrevoked API token",
        )
        response["WWW-Authenticate"] = "Bearer"
        return response

    @api.exception_handler(AuthorizationError)
    def authorization_error(request: HttpRequest, exc: AuthorizationError) -> HttpResponse:
        return answer(request, 403, "forbidden", str(exc.message))

    @api.exception_handler(HttpError)
    def http_error(request: HttpRequest, exc: HttpError) -> HttpResponse:
        status = exc.status_code
        return answer(request, status, HTTP_CODES.get(status, "error"), str(exc.message))

    @api.exception_handler(Http404)
    def http_404(request: HttpRequest, exc: Http404) -> HttpResponse:
        return answer(request, 404, "not_found", "Not found")

    # Django raises these while reading the request (the body, the query string), so inside the
    # operation, where the catch-all below would turn them into a 500. Logged where Django's own
    # handler logs them, so security logging sees them.
    @api.exception_handler(RequestDataTooBig)
    def request_too_big(request: HttpRequest, exc: RequestDataTooBig) -> HttpResponse:
        _security_log(exc)
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        return answer(
            request,
            413,
            "payload_too_large",
            f"The request body is larger than this server accepts ({limit} bytes)",
        )

    @api.exception_handler(SuspiciousOperation)
    def suspicious(request: HttpRequest, exc: SuspiciousOperation) -> HttpResponse:
        _security_log(exc)
        if isinstance(exc, TooManyFieldsSent):
            limit = settings.DATA_UPLOAD_MAX_NUMBER_FIELDS
            message = f"Too many query or form parameters (this server accepts {limit})"
        else:
            # Django's wording can name server paths: the client gets a fixed message.
            message = "The request was refused as malformed"
        return answer(request, 400, "bad_request", message)

    @api.exception_handler(OperationalError)
    def database_error(request: HttpRequest, exc: OperationalError) -> HttpResponse:
        # Other writers held the lock past the database's own wait: the transaction rolled
        # back, so the same request later is safe; say so instead of a bare 500.
        if is_busy(exc):
            logger.warning("Database busy in %s %s: %s", request.method, request.path, exc)
            response = answer(request, 503, "database_busy", BUSY_MESSAGE)
            response["Retry-After"] = "2"
            return response
        logger.exception("Database error in %s %s", request.method, request.path)
        return answer(request, 500, "internal_error", "Internal server error")

    @api.exception_handler(Exception)
    def unexpected(request: HttpRequest, exc: Exception) -> HttpResponse:
        logger.exception("Unhandled error in %s %s", request.method, request.path)
        return answer(request, 500, "internal_error", "Internal server error")
