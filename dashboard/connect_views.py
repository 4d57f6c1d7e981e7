"""The Connect page: how a person points an agent at this server.

Everyone who may watch sees the stdio configuration of each client, and their own live tokens
(name, when made and last used, what it is bound to), each of which they may revoke there. A
person who may make API tokens (``accounts.add_apitoken``, what the admin asks) and drive
sessions (what ``/mcp`` asks of a token's user) gets, with one POST, a new MCP token of their
own bound to the project they pick, and each client's hosted configuration with it: the
secret in that one response, never stored and never shown again.
"""

from __future__ import annotations

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.cache import add_never_cache_headers
from django.views.decorators.http import require_http_methods, require_POST

from accounts.people import signed_in_user
from accounts.selectors import api_token_list_own, api_token_own
from accounts.services import api_token_create, api_token_revoke
from dashboard.forms import MAX_ID, ConnectTokenForm, first_error
from dashboard.views import watcher_required
from deepwork_site.connect import (
    CLONE_COMMAND,
    MCP_PATH,
    STDIO_COMMAND,
    TOKEN_ENV,
    hosted_configs,
    stdio_configs,
)
from workflows.errors import NotFound, WorkflowError
from workflows.selectors.catalog import project_list

MAKE_TOKEN = "accounts.add_apitoken"
DRIVE = "workflows.drive_session"


def _missing_permissions(request: HttpRequest) -> list[str]:
    return [perm for perm in (MAKE_TOKEN, DRIVE) if not request.user.has_perm(perm)]


@require_http_methods(["GET", "HEAD", "POST"])
@watcher_required
def connect(request: HttpRequest) -> HttpResponse:
    projects = project_list()
    missing = _missing_permissions(request)
    made = None
    form = ConnectTokenForm(projects=projects)
    if request.method == "POST":
        if missing:
            raise PermissionDenied(f"You need the permission {missing[0]}")
        form = ConnectTokenForm(request.POST, projects=projects)
        if form.is_valid():
            user = signed_in_user(request)
            project = form.cleaned_data["project"]
            name = form.cleaned_data["name"] or f"dashboard {timezone.now():%Y-%m-%d %H:%M:%S}"
            try:
                token, secret = api_token_create(
                    user=user, name=name, by=user, mcp=True, mcp_project=project
                )
            except WorkflowError as exc:
                messages.error(request, exc.message)
            else:
                url = request.build_absolute_uri(MCP_PATH)
                made = {
                    "token": token,
                    "project": project,
                    "url": url,
                    "clients": hosted_configs(url=url, token=secret),
                }
        else:
            messages.error(request, first_error(form))
    response = render(
        request,
        "dashboard/connect.html",
        {
            "projects": projects,
            "tokens": api_token_list_own(user=signed_in_user(request)),
            "form": form,
            "missing": missing,
            "made": made,
            "stdio_clients": stdio_configs(),
            "stdio_command": " ".join(STDIO_COMMAND),
            "clone_command": CLONE_COMMAND,
            "mcp_url": request.build_absolute_uri(MCP_PATH),
            "token_env": TOKEN_ENV,
        },
    )
    if made is not None:
        # The secret is in this page alone: no cache may keep a copy.
        add_never_cache_headers(response)
    return response


@require_POST
@watcher_required
def connect_token_revoke(request: HttpRequest, token_id: int) -> HttpResponse:
    """Revoke one of the person's own tokens, at once; no permission beyond watching is
    needed to give up a credential of one's own."""
    user = signed_in_user(request)
    if token_id > MAX_ID:
        raise Http404(f"You have no live API token with the id {token_id}")
    try:
        token = api_token_own(user=user, token_id=token_id)
    except NotFound as exc:
        raise Http404(exc.message) from None
    api_token_revoke(token=token, by=user)
    messages.success(request, f"Token {token.prefix}… “{token.name}” revoked: it works no more")
    return redirect(reverse("dashboard:connect") + "#connect-tokens")
