"""Dashboard pages: thin views over the shared selectors (``workflows.selectors``), the view
models of ``dashboard.selectors`` and the decision services.

Every page needs a login and ``workflows.view_workflowsession``. Every page has one ``#live``
region; a request with ``X-Live-Fragment: 1`` gets only that region's inner template, built
by the same view from the same selectors, which the page's script swaps in on live events.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required, permission_required
from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils.cache import add_never_cache_headers, patch_vary_headers
from django.views.decorators.http import require_POST, require_safe

from accounts.identity import ADD_PROJECT
from accounts.people import signed_in_user
from dashboard import selectors
from dashboard.forms import (
    AbortForm,
    ChangesForm,
    OverrideForm,
    ProjectFilterForm,
    SessionFilterForm,
    first_error,
)
from reviews.models import HumanDecision
from reviews.rulings import review_override, review_request_changes
from tracker.selectors import tracked_workflows_in_progress
from workflows.errors import Forbidden, InvalidInput, NotFound, WorkflowError
from workflows.events import VIA_DASHBOARD
from workflows.models import StepRun, WorkflowSession
from workflows.selectors.catalog import job_names, project_catalogs, project_list
from workflows.selectors.events import newest_event_id
from workflows.selectors.sessions import session_get, session_page, step_run_for_decision
from workflows.services.sessions import session_abort

VIEW_PERMISSION = "workflows.view_workflowsession"
DECIDE_PERMISSION = "reviews.decide_review"
ABORT_PERMISSION = "workflows.abort_session"
FRAGMENT_HEADER = "X-Live-Fragment"
OVERVIEW_TRACKED = 20


def watcher_required(view: Callable) -> Callable:
    """Anonymous visitors go to the login page; people without the watch permission get 403."""
    return login_required(permission_required(VIEW_PERMISSION, raise_exception=True)(view))


def _require(request: HttpRequest, permission: str) -> None:
    if not request.user.has_perm(permission):
        raise PermissionDenied(f"You need the permission {permission}")


def _live_page(
    request: HttpRequest,
    name: str,
    context: dict,
    *,
    live_after: int,
    session_id: str | None = None,
    project_id: int | None = None,
    status: int = 200,
) -> HttpResponse:
    """Render ``dashboard/<name>.html``, or only ``dashboard/<name>_live.html`` for a live
    refresh. ``session_id``/``project_id`` narrow the events the page listens to."""
    context = {
        **context,
        "live_after": live_after,
        "live_session": session_id or "",
        "live_project": project_id or "",
        "can_decide": request.user.has_perm(DECIDE_PERMISSION),
        "can_abort": request.user.has_perm(ABORT_PERMISSION),
    }
    fragment = request.headers.get(FRAGMENT_HEADER) == "1"
    template = f"dashboard/{name}_live.html" if fragment else f"dashboard/{name}.html"
    response = render(request, template, context, status=status)
    if fragment:
        # The script swaps in only answers that say they are fragments: a login page that a
        # redirect produced must never land inside the region.
        response[FRAGMENT_HEADER] = "1"
    patch_vary_headers(response, [FRAGMENT_HEADER])
    add_never_cache_headers(response)
    return response


@require_safe
@watcher_required
def overview(request: HttpRequest) -> HttpResponse:
    live_after = newest_event_id()
    context = {
        "overview": selectors.overview(),
        # Tracked workflows in progress, beside the session stacks.
        "tracked": tracked_workflows_in_progress(limit=OVERVIEW_TRACKED),
    }
    return _live_page(request, "overview", context, live_after=live_after)


def _session_or_404(session_id: str) -> WorkflowSession:
    try:
        return session_get(session_id=session_id)
    except NotFound as exc:
        raise Http404(str(exc)) from None


@require_safe
@watcher_required
def session_detail(request: HttpRequest, session_id: str) -> HttpResponse:
    live_after = newest_event_id()
    try:
        detail = selectors.session_detail(session_id=session_id)
    except NotFound as exc:
        raise Http404(str(exc)) from None
    return _live_page(
        request, "session", {"detail": detail}, live_after=live_after, session_id=session_id
    )


@require_safe
@watcher_required
def session_file(request: HttpRequest, session_id: str) -> HttpResponse:
    live_after = newest_event_id()
    session = _session_or_404(session_id)
    path = request.GET.get("path", "")
    context: dict = {"session": session, "path": path, "limit": selectors.FILE_VIEW_BYTES}
    status = 200
    try:
        context["file"] = selectors.session_output_file(
            session=session,
            path=path,
            # A person who may host the project sees what hosting it would show anyway.
            unhosted=request.user.has_perm(ADD_PROJECT),
        )
    except InvalidInput as exc:
        context["error"], status = str(exc), 400
    except Forbidden as exc:
        context["error"], status = str(exc), 403
    except NotFound as exc:
        context["error"], status = str(exc), 404
    return _live_page(
        request, "file", context, live_after=live_after, session_id=session_id, status=status
    )


def _decide(
    request: HttpRequest,
    session_id: str,
    *,
    permission: str,
    form_class: type,
    decide: Callable[[WorkflowSession, dict], str],
) -> HttpResponse:
    """One decision from the session page: check the permission, validate the form, run it,
    report how it went as a flash message, and go back to the page."""
    _require(request, permission)
    session = _session_or_404(session_id)
    form = form_class(request.POST)
    if not form.is_valid():
        messages.error(request, first_error(form))
    else:
        try:
            messages.success(request, decide(session, form.cleaned_data))
        except WorkflowError as exc:
            messages.error(request, str(exc))
    return redirect("dashboard:session", session_id=session_id)


@dataclass(frozen=True)
class Ruling:
    """One kind of ruling on a step's review: its form, how it is applied to the run (from the
    form's data, by whom), and the success message (``{step_id}`` is filled in)."""

    form_class: type[forms.Form]
    apply: Callable[[StepRun, dict[str, Any], User], HumanDecision]
    done: str


OVERRIDE = Ruling(
    OverrideForm,
    lambda run, data, user: review_override(
        step_run=run, reason=data["reason"], by=user, via=VIA_DASHBOARD
    ),
    "Review of step '{step_id}' overridden: the agent's next finished_step passes it",
)
REQUEST_CHANGES = Ruling(
    ChangesForm,
    lambda run, data, user: review_request_changes(
        step_run=run, feedback=data["feedback"], by=user, via=VIA_DASHBOARD
    ),
    "Changes requested on step '{step_id}': the agent gets your feedback on its next finished_step",
)


def _rule(request: HttpRequest, session_id: str, ruling: Ruling) -> HttpResponse:
    """A ruling on the run ``step_run_for_decision`` picks (REST and the admin rule on the same
    one, and are refused with the same message)."""

    def decide(session: WorkflowSession, data: dict) -> str:
        run = step_run_for_decision(session=session, step_id=data["step_id"])
        ruling.apply(run, data, signed_in_user(request))
        return ruling.done.format(step_id=data["step_id"])

    return _decide(
        request,
        session_id,
        permission=DECIDE_PERMISSION,
        form_class=ruling.form_class,
        decide=decide,
    )


@require_POST
@watcher_required
def session_override(request: HttpRequest, session_id: str) -> HttpResponse:
    return _rule(request, session_id, OVERRIDE)


@require_POST
@watcher_required
def session_request_changes(request: HttpRequest, session_id: str) -> HttpResponse:
    return _rule(request, session_id, REQUEST_CHANGES)


@require_POST
@watcher_required
def session_abort_view(request: HttpRequest, session_id: str) -> HttpResponse:
    def abort(session: WorkflowSession, data: dict) -> str:
        session_abort(
            project=session.project,
            agent=session.agent,
            explanation=data["reason"],
            session_id=session.session_id,
            by=signed_in_user(request),
            via=VIA_DASHBOARD,
        )
        return f"Session '{session_id}' aborted"

    return _decide(
        request, session_id, permission=ABORT_PERMISSION, form_class=AbortForm, decide=abort
    )


@require_safe
@watcher_required
def jobs(request: HttpRequest) -> HttpResponse:
    live_after = newest_event_id()
    projects = project_list()
    form = ProjectFilterForm(request.GET, projects=projects)
    # A bad filter is shown and left out: the page lists every project's catalog.
    project_id = form.cleaned_data.get("project") if form.is_valid() else None
    shown = [project for project in projects if project_id in (None, project.pk)]
    context = {
        "form": form,
        "project_id": project_id,
        "projects": projects,
        "catalogs": [
            selectors.catalog_view(catalog) for catalog in project_catalogs(projects=shown)
        ],
    }
    return _live_page(request, "jobs", context, live_after=live_after, project_id=project_id)


@require_safe
@watcher_required
def sessions(request: HttpRequest) -> HttpResponse:
    live_after = newest_event_id()
    form = SessionFilterForm(request.GET)
    form.is_valid()  # errors are shown; the valid filters still apply
    filters = form.filters()
    chosen = getattr(form, "cleaned_data", {})
    page = session_page(
        filters=filters,
        limit=selectors.SESSIONS_PER_PAGE,
        before=chosen.get("before") or None,
        after=chosen.get("after") or None,
    )
    context = {
        "form": form,
        "chosen": chosen,
        "page": page,
        "projects": project_list(),
        "job_names": job_names(),
    }
    return _live_page(
        request, "sessions", context, live_after=live_after, project_id=filters.project_id
    )
