"""Dashboard pages of multi-agent DAG workflows: the list, one workflow's DAG with
its steps' status, agent and timing, people completing or failing human steps, and agents."""

from __future__ import annotations

import json
from typing import Any

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.views.decorators.http import require_POST, require_safe

from accounts.people import signed_in_user
from dag import selectors, services
from dashboard.views import _live_page, _require, watcher_required
from workflows.errors import NotFound, WorkflowError
from workflows.events import VIA_DASHBOARD
from workflows.liveness import process_lease_seconds, responsive_seconds
from workflows.models import Project
from workflows.selectors.events import newest_event_id

# Completing or failing a step assigned to people: the DAG scheduler's own permission.
HUMAN_STEP_PERMISSION = "dag.decide_human_step"
MAX_TEXT = 20_000


@require_safe
@watcher_required
def dag_list(request: HttpRequest) -> HttpResponse:
    live_after = newest_event_id()
    projects = {p.pk: p for p in Project.objects.order_by("name", "id")}
    rows = selectors.dag_summaries(project=None, with_project=True)
    for row in rows:
        row["project"] = projects.get(row["project_id"])
    return _live_page(request, "dag_list", {"workflows": rows}, live_after=live_after)


def _columns(steps: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """Steps by level, left to right: a fan-out is a tall column, a fan-in the one after."""
    columns: dict[int, list[dict[str, Any]]] = {}
    for step in steps:
        step["human"] = services.is_human_step(step)
        columns.setdefault(step["level"], []).append(step)
    return [columns[level] for level in sorted(columns)]


@require_safe
@watcher_required
def dag_detail(request: HttpRequest, workflow_id: str) -> HttpResponse:
    live_after = newest_event_id()
    try:
        job = selectors.dag_job_by_id(workflow_id)
    except NotFound as exc:
        raise Http404(str(exc)) from None
    details = selectors.dag_details(job=job)
    context = {
        "workflow": details,
        "columns": _columns(details["steps"]),
        "project": job.project,
        "can_decide_human_step": request.user.has_perm(HUMAN_STEP_PERMISSION),
    }
    return _live_page(request, "dag", context, live_after=live_after, session_id=workflow_id)


def _person_report(
    request: HttpRequest, workflow_id: str, step_id: str, *, failing: bool
) -> HttpResponse:
    _require(request, HUMAN_STEP_PERMISSION)
    text = request.POST.get("error_message" if failing else "result", "").strip()
    if len(text) > MAX_TEXT:
        messages.error(request, f"At most {MAX_TEXT:,} characters, please")
        return redirect("dashboard:dag", workflow_id=workflow_id)
    try:
        if failing:
            report = services.dag_person_report(
                workflow_id=workflow_id,
                step_id=step_id,
                by=signed_in_user(request),
                via=VIA_DASHBOARD,
                error_message=text,
            )
        else:
            # A result that reads as JSON is stored as that value, anything else as text.
            try:
                result: Any = json.loads(text) if text else None
            except ValueError:
                result = text
            report = services.dag_person_report(
                workflow_id=workflow_id,
                step_id=step_id,
                by=signed_in_user(request),
                via=VIA_DASHBOARD,
                result=result,
            )
    except NotFound as exc:
        raise Http404(str(exc)) from None
    except WorkflowError as exc:
        messages.error(request, exc.message)
    else:
        verb = "failed" if failing else "completed"
        messages.success(
            request, report.note or f"Step '{step_id}' {verb}; the workflow is {report.status}"
        )
    return redirect("dashboard:dag", workflow_id=workflow_id)


@require_POST
@watcher_required
def dag_step_complete(request: HttpRequest, workflow_id: str, step_id: str) -> HttpResponse:
    return _person_report(request, workflow_id, step_id, failing=False)


@require_POST
@watcher_required
def dag_step_fail(request: HttpRequest, workflow_id: str, step_id: str) -> HttpResponse:
    return _person_report(request, workflow_id, step_id, failing=True)


@require_safe
@watcher_required
def agents(request: HttpRequest) -> HttpResponse:
    live_after = newest_event_id()
    context = {
        "agents": selectors.dag_agents(project=None),
        "responsive_seconds": responsive_seconds(),
        "lease_seconds": process_lease_seconds(),
    }
    return _live_page(request, "agents", context, live_after=live_after)
