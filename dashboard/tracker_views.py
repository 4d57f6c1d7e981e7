"""Dashboard pages of the tracker: the list of tracked workflows and one workflow's
page (phase timeline, task tree with each task's files changed, decisions, milestones,
issues, and the blockers a person answers in writing).

Built like the session pages: the same login and watch permission, one ``#live`` region
refreshed by ``live.js`` when events arrive, keyset pages, bad filters shown and left out.
Every page costs a constant number of queries whatever the number of rows (one per level of
task nesting, not per task).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django import forms
from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.views.decorators.http import require_POST, require_safe

from accounts.people import signed_in_user
from dashboard.forms import MAX_ID
from dashboard.views import _live_page, _require, watcher_required
from tracker.models import Decision, Issue, Milestone, Phase, TrackedWorkflow
from tracker.selectors import (
    WORKFLOW_PROFILES,
    WORKFLOW_STATUSES,
    TrackedWorkflowFilter,
    issue_page,
    log_page,
    task_subtree,
    task_tree_page,
    tracked_workflow_detail,
    tracked_workflow_window,
)
from tracker.services import blocker_resolve
from workflows import limits
from workflows.errors import NotFound, WorkflowError
from workflows.events import VIA_DASHBOARD
from workflows.selectors.catalog import project_list
from workflows.selectors.events import newest_event_id

RESOLVE_BLOCKER_PERMISSION = "tracker.resolve_blocker"
WORKFLOWS_PER_PAGE = 50
TASKS_PER_PAGE = 20
SUBTASKS_PER_TASK = 20
LOGS_PER_PAGE = 25
RESOLUTION_REQUIRED = "A written resolution is required so the agent knows what to do"


STATUSES = WORKFLOW_STATUSES.items()
PROFILES = WORKFLOW_PROFILES.items()


def _cursor_field() -> forms.IntegerField:
    return forms.IntegerField(
        required=False, min_value=1, max_value=MAX_ID, widget=forms.HiddenInput
    )


class TrackedWorkflowFilterForm(forms.Form):
    """The list's filters; status and profile take the tracker tools' lower-case wire values."""

    project = forms.IntegerField(required=False, min_value=1, max_value=MAX_ID)
    status = forms.ChoiceField(
        required=False,
        choices=[
            ("", "Any status"),
            *((wire, TrackedWorkflow.Status(value).label) for wire, value in STATUSES),
        ],
    )
    profile = forms.ChoiceField(
        required=False,
        choices=[
            ("", "Any profile"),
            *((wire, TrackedWorkflow.Profile(value).label) for wire, value in PROFILES),
        ],
    )
    agent = forms.CharField(required=False, max_length=128, strip=True)
    # Page cursors, as the pager hands them out.
    before = _cursor_field()
    after = _cursor_field()

    def filters(self) -> TrackedWorkflowFilter:
        """The valid filters; an invalid field is reported on the page and left out."""
        data = getattr(self, "cleaned_data", {})
        return TrackedWorkflowFilter(
            project_id=data.get("project"),
            status=WORKFLOW_STATUSES.get(data.get("status") or ""),
            profile=WORKFLOW_PROFILES.get(data.get("profile") or ""),
            agent_id=data.get("agent") or None,
        )


# The workflow page's lists, each paged on its own by a query parameter of its name (the
# ``next`` cursor of that list).
LISTS = ("tasks", "blockers", "decisions", "milestones", "issues")


class WorkflowPagesForm(forms.Form):
    tasks = _cursor_field()
    blockers = _cursor_field()
    decisions = _cursor_field()
    milestones = _cursor_field()
    issues = _cursor_field()


class SubtaskPageForm(forms.Form):
    after = _cursor_field()


class ResolveForm(forms.Form):
    # The service's limit, so the page and REST accept the same answers; it also checks the
    # characters, once more inside its transaction.
    resolution = forms.CharField(
        strip=True,
        max_length=limits.TRACKER_TEXT.max_chars,
        error_messages={"required": RESOLUTION_REQUIRED},
    )


@dataclass(frozen=True)
class Listed:
    """One page of a list on the workflow page; ``older`` is the cursor of the next page."""

    rows: list[Any]
    older: int | None


@dataclass(frozen=True)
class WorkflowView:
    workflow: TrackedWorkflow  # with its counts, latest progress and phases
    phases: list[Phase]
    tasks: Listed
    blockers: Listed
    decisions: Listed
    milestones: Listed
    issues: Listed
    paged: bool  # whether any list is past its first page


@require_safe
@watcher_required
def tracked_workflows(request: HttpRequest) -> HttpResponse:
    live_after = newest_event_id()
    form = TrackedWorkflowFilterForm(request.GET)
    form.is_valid()  # errors are shown; the valid filters still apply
    filters = form.filters()
    chosen = getattr(form, "cleaned_data", {})
    page = tracked_workflow_window(
        filters=filters,
        limit=WORKFLOWS_PER_PAGE,
        before=chosen.get("before"),
        after=chosen.get("after"),
    )
    context = {"form": form, "chosen": chosen, "page": page, "projects": project_list()}
    return _live_page(
        request, "tracker_workflows", context, live_after=live_after, project_id=filters.project_id
    )


def _workflow_or_404(workflow_id: int) -> TrackedWorkflow:
    if workflow_id > MAX_ID:
        raise Http404(f"workflow {workflow_id}: no such tracked workflow")
    try:
        return tracked_workflow_detail(workflow_id=workflow_id)
    except NotFound as exc:
        raise Http404(str(exc)) from None


@require_safe
@watcher_required
def tracked_workflow(request: HttpRequest, workflow_id: int) -> HttpResponse:
    live_after = newest_event_id()
    workflow = _workflow_or_404(workflow_id)
    form = WorkflowPagesForm(request.GET)
    form.is_valid()  # a bad cursor is shown and that list starts from its first page
    cursors = getattr(form, "cleaned_data", {})

    def logs(model: type[Decision] | type[Milestone], name: str) -> Listed:
        return Listed(
            *log_page(workflow=workflow, model=model, limit=LOGS_PER_PAGE, before=cursors.get(name))
        )

    tasks, tasks_older = task_tree_page(
        workflow=workflow,
        limit=TASKS_PER_PAGE,
        before=cursors.get("tasks"),
        subtask_limit=SUBTASKS_PER_TASK,
    )
    view = WorkflowView(
        workflow=workflow,
        phases=list(workflow.phases.all()),
        tasks=Listed(tasks, tasks_older),
        blockers=Listed(
            *issue_page(
                workflow=workflow,
                limit=LOGS_PER_PAGE,
                before=cursors.get("blockers"),
                blockers="open",
            )
        ),
        decisions=logs(Decision, "decisions"),
        milestones=logs(Milestone, "milestones"),
        issues=Listed(
            *issue_page(workflow=workflow, limit=LOGS_PER_PAGE, before=cursors.get("issues"))
        ),
        paged=any(cursors.get(name) for name in LISTS),
    )
    return _live_page(
        request,
        "tracker_workflow",
        {
            "view": view,
            "form": form,
            "can_resolve_blocker": request.user.has_perm(RESOLVE_BLOCKER_PERMISSION),
        },
        live_after=live_after,
        project_id=workflow.project_id,
    )


@require_safe
@watcher_required
def tracked_task(request: HttpRequest, workflow_id: int, task_id: int) -> HttpResponse:
    """One task with its sub-tasks page by page (oldest first), for a task with more than
    the workflow page shows."""
    live_after = newest_event_id()
    form = SubtaskPageForm(request.GET)
    form.is_valid()  # a bad cursor is shown and the first page is shown
    if workflow_id > MAX_ID or task_id > MAX_ID:
        raise Http404("no such task")
    try:
        node = task_subtree(
            workflow_id=workflow_id,
            task_id=task_id,
            limit=SUBTASKS_PER_TASK,
            after=getattr(form, "cleaned_data", {}).get("after"),
        )
    except NotFound as exc:
        raise Http404(str(exc)) from None
    return _live_page(
        request,
        "tracker_subtasks",
        {"node": node, "form": form},
        live_after=live_after,
        project_id=node.task.project_id,
    )


@require_POST
@watcher_required
def tracked_blocker_resolve(request: HttpRequest, workflow_id: int, issue_id: int) -> HttpResponse:
    """A person answers one of the workflow's blockers in writing, through the service REST
    uses; the agent's next ``get_context`` lists it resolved, with who and when."""
    _require(request, RESOLVE_BLOCKER_PERMISSION)
    if workflow_id > MAX_ID or issue_id > MAX_ID:
        raise Http404("no such blocker")
    if not Issue.objects.filter(pk=issue_id, workflow_id=workflow_id).exists():
        raise Http404(f"issue {issue_id}: no such issue in workflow {workflow_id}")
    form = ResolveForm(request.POST)
    if not form.is_valid():
        messages.error(request, _first_error(form))
    else:
        try:
            blocker_resolve(
                issue_id=issue_id,
                by=signed_in_user(request),
                via=VIA_DASHBOARD,
                resolution=form.cleaned_data["resolution"],
            )
            messages.success(
                request,
                f"Blocker {issue_id} resolved: the agent's next get_context shows your answer",
            )
        except WorkflowError as exc:
            messages.error(request, str(exc))
    return redirect(reverse("dashboard:tracker_workflow", args=[workflow_id]) + "#blockers")


def _first_error(form: forms.Form) -> str:
    for name, errors in form.errors.items():
        first = str(errors[0])
        return first if first == RESOLUTION_REQUIRED else f"{name}: {first}"
    return "The form is not valid"
