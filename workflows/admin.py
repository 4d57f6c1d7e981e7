"""Admin: browse the catalog, agents, sessions, step runs and events; abort sessions and rule on
reviews through the services.

Everything here is history or catalog that the services write, so every model is read-only in
the admin, for superusers too. The only changes an admin user can make go through the actions,
and each action calls one service per selected object.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass

from django import forms
from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.core.exceptions import ValidationError
from django.db.models import QuerySet
from django.http import HttpRequest
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.html import format_html, format_html_join
from django.utils.http import urlencode
from django.utils.text import Truncator

from reviews.models import HumanDecision, ReviewResult
from reviews.services import review_override, review_request_changes
from workflows.errors import WorkflowError
from workflows.models import (
    Agent,
    Event,
    Job,
    JobLoadError,
    Project,
    Step,
    StepRun,
    Workflow,
    WorkflowSession,
    WorkflowStep,
)
from workflows.services.sessions import session_abort

# How many selected objects the reason page names, and how many failures get a message each;
# a "select all" over a large table is summed up beyond these.
PREVIEW_LIMIT = 50
ERROR_MESSAGE_LIMIT = 20


class ReadOnlyAdmin(admin.ModelAdmin):
    """History and catalog rows are written only by the services: view, never add/change/delete."""

    # The related rows the change page links to, loaded with the object in one query.
    change_select_related: tuple[str, ...] = ()

    def get_object(self, request, object_id, from_field=None):
        queryset = self.get_queryset(request).select_related(*self.change_select_related)
        field = self.opts.pk if from_field is None else self.opts.get_field(from_field)
        try:
            return queryset.get(**{field.name: field.to_python(object_id)})
        except (self.model.DoesNotExist, ValidationError, ValueError):
            return None

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False


class ReadOnlyInline(admin.TabularInline):
    extra = 0
    can_delete = False
    show_change_link = True

    def get_readonly_fields(self, request, obj=None):
        return self.fields

    def has_add_permission(self, request, obj=None) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False


class SessionSearch:
    """The search box finds a session's rows by its id through the session index first.

    Django's search ORs a case-insensitive match over every search field, which no index can
    answer: over a million events that is a full scan for every search. A session id is the
    common search, so it is resolved exactly; any other term falls back to ``search_fields``.
    """

    session_lookup = "session_id"  # the lookup from the model to its session's primary key

    def get_search_results(self, request, queryset, search_term):
        term = search_term.strip()
        if term:
            found = WorkflowSession.objects.filter(session_id=term).values_list("pk", flat=True)
            if pks := list(found):
                return queryset.filter(**{self.session_lookup: pks[0]}), False
        return super().get_search_results(request, queryset, search_term)


def admin_link(obj, text: str | None = None) -> str:
    """A link to ``obj``'s admin page; builds a URL only, no query."""
    if obj is None:
        return "-"
    url = reverse(f"admin:{obj._meta.app_label}_{obj._meta.model_name}_change", args=[obj.pk])
    return format_html('<a href="{}">{}</a>', url, text if text is not None else str(obj))


def changelist_link(model, text: str, **filters) -> str:
    opts = model._meta
    url = reverse(f"admin:{opts.app_label}_{opts.model_name}_changelist")
    return format_html('<a href="{}?{}">{}</a>', url, urlencode(filters), text)


def compact_json(value, limit: int = 80) -> str:
    return Truncator(json.dumps(value, ensure_ascii=False, sort_keys=True)).chars(limit)


# Actions that need a reason -------------------------------------------------------------------


class ReasonForm(forms.Form):
    reason = forms.CharField(widget=forms.Textarea(attrs={"rows": 5, "cols": 80}))

    def __init__(self, *args, label: str, help_text: str, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["reason"].label = label
        self.fields["reason"].help_text = help_text


@dataclass(frozen=True)
class ReasonPage:
    """The wording of one action's intermediate page."""

    action: str  # the action's name, posted back with the reason
    title: str
    intro: str
    label: str
    help_text: str
    submit: str


def ask_reason(
    modeladmin: admin.ModelAdmin,
    request: HttpRequest,
    queryset: QuerySet,
    page: ReasonPage,
) -> str | TemplateResponse:
    """The reason the person gave on the intermediate page, or the page to (re)show.

    The page posts the selection back to the changelist with the same action, the way Django's
    delete confirmation does; ``apply`` marks the second round.
    """
    label, help_text = page.label, page.help_text
    if "apply" in request.POST:
        form = ReasonForm(request.POST, label=label, help_text=help_text)
        if form.is_valid():
            return form.cleaned_data["reason"]
    else:
        form = ReasonForm(label=label, help_text=help_text)
    count = queryset.count()
    context = {
        **modeladmin.admin_site.each_context(request),
        "title": page.title,
        "intro": page.intro,
        "submit": page.submit,
        "action": page.action,
        "opts": modeladmin.model._meta,
        "form": form,
        "objects": list(queryset[:PREVIEW_LIMIT]),
        "more": max(count - PREVIEW_LIMIT, 0),
        "count": count,
        "selected": request.POST.getlist(helpers.ACTION_CHECKBOX_NAME),
        "select_across": request.POST.get("select_across", "0"),
        "action_checkbox_name": helpers.ACTION_CHECKBOX_NAME,
    }
    return TemplateResponse(request, "admin/deepwork/action_reason.html", context)


def apply_each(
    modeladmin: admin.ModelAdmin,
    request: HttpRequest,
    objects,
    call: Callable[[object], object],
    *,
    name: Callable[[object], str],
    done: Callable[[int], str],
) -> None:
    """Call one service per object; a refusal is that object's error, never the whole page's."""
    succeeded = 0
    failures: list[str] = []
    for obj in objects:
        try:
            call(obj)
        except WorkflowError as exc:
            failures.append(f"{name(obj)}: {exc}")
        else:
            succeeded += 1
    for failure in failures[:ERROR_MESSAGE_LIMIT]:
        modeladmin.message_user(request, failure, messages.ERROR)
    if len(failures) > ERROR_MESSAGE_LIMIT:
        modeladmin.message_user(
            request, f"… and {len(failures) - ERROR_MESSAGE_LIMIT} more failed.", messages.ERROR
        )
    if succeeded:
        modeladmin.message_user(request, done(succeeded), messages.SUCCESS)


def plural(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


class ReviewDecisionActions:
    """Rule on step runs' reviews: override (pass) or request changes. The agent gets the ruling
    on its next ``finished_step``. The admin maps its selection to step runs."""

    def step_runs_of(self, queryset: QuerySet) -> QuerySet[StepRun]:
        raise NotImplementedError

    def has_decide_review_permission(self, request) -> bool:
        return request.user.has_perm("reviews.decide_review")

    @admin.action(
        description="Override the review of the selected step runs (pass them)…",
        permissions=["decide_review"],
    )
    def override_reviews(self, request, queryset):
        reason = ask_reason(
            self,
            request,
            queryset,
            ReasonPage(
                action="override_reviews",
                title="Override reviews",
                intro="The selected step runs (or the step runs of the selected reviews) pass "
                "their quality review on the agent's next finished_step, whatever the reviewers "
                "said.",
                label="Reason",
                help_text="Why the step passes; the agent and the team see this.",
                submit="Override the reviews",
            ),
        )
        if not isinstance(reason, str):
            return reason
        apply_each(
            self,
            request,
            self.step_runs_of(queryset),
            lambda run: review_override(step_run=run, reason=reason, by=request.user),
            name=lambda run: str(run),
            done=lambda n: f"Overrode the review of {plural(n, 'step run')}.",
        )
        return None

    @admin.action(
        description="Request changes on the selected step runs…",
        permissions=["decide_review"],
    )
    def request_changes(self, request, queryset):
        feedback = ask_reason(
            self,
            request,
            queryset,
            ReasonPage(
                action="request_changes",
                title="Request changes",
                intro="The agent's next finished_step on the selected step runs (or the step "
                "runs of the selected reviews) answers needs_work with this feedback.",
                label="Feedback",
                help_text="What the agent must change.",
                submit="Request changes",
            ),
        )
        if not isinstance(feedback, str):
            return feedback
        apply_each(
            self,
            request,
            self.step_runs_of(queryset),
            lambda run: review_request_changes(step_run=run, feedback=feedback, by=request.user),
            name=lambda run: str(run),
            done=lambda n: f"Requested changes on {plural(n, 'step run')}.",
        )
        return None


# Catalog ----------------------------------------------------------------------------------------


@admin.register(Project)
class ProjectAdmin(ReadOnlyAdmin):
    list_display = ["name", "root_path", "created_at"]
    search_fields = ["name", "root_path"]
    ordering = ["name"]


@admin.register(Agent)
class AgentAdmin(ReadOnlyAdmin):
    change_select_related = ("project",)
    list_display = ["agent_id", "project", "explicit", "holder", "hostname", "pid", "heartbeat_at"]
    list_filter = ["explicit", "project"]
    list_select_related = ["project"]
    search_fields = ["agent_id", "hostname", "holder"]
    ordering = ["-id"]


class WorkflowInline(ReadOnlyInline):
    model = Workflow
    fields = ["name", "summary", "position"]
    ordering = ["position"]

    def get_queryset(self, request):
        return super().get_queryset(request).select_related("job")


class StepInline(ReadOnlyInline):
    model = Step
    fields = ["step_id", "name", "instructions_file", "position"]
    ordering = ["position"]


@admin.register(Job)
class JobAdmin(ReadOnlyAdmin):
    change_select_related = ("project",)
    list_display = ["name", "version", "source", "dir_name", "project", "is_current", "created_at"]
    list_filter = ["is_current", "source", "project"]
    list_select_related = ["project"]
    search_fields = ["name", "dir_name", "summary"]
    ordering = ["-id"]
    inlines = [WorkflowInline, StepInline]

    def get_queryset(self, request):
        # The parsed definition can be large and the list never shows it.
        queryset = super().get_queryset(request)
        if request.resolver_match and request.resolver_match.url_name.endswith("_changelist"):
            queryset = queryset.defer("definition", "common_info")
        return queryset


class WorkflowStepInline(ReadOnlyInline):
    model = WorkflowStep
    fields = ["entry_index", "position_in_entry", "step", "is_concurrent"]
    ordering = ["entry_index", "position_in_entry"]

    def get_queryset(self, request):
        return super().get_queryset(request).select_related("workflow__job", "step")


@admin.register(Workflow)
class WorkflowAdmin(ReadOnlyAdmin):
    change_select_related = ("job",)
    list_display = ["name", "job", "summary", "position"]
    list_filter = ["job__project", "job__is_current"]
    list_select_related = ["job"]
    search_fields = ["name", "summary", "job__name", "job__dir_name"]
    ordering = ["-id"]
    inlines = [WorkflowStepInline]


@admin.register(Step)
class StepAdmin(ReadOnlyAdmin):
    change_select_related = ("job",)
    list_display = ["step_id", "name", "job", "instructions_file", "position"]
    list_filter = ["job__project", "job__is_current"]
    list_select_related = ["job"]
    search_fields = ["step_id", "name", "description", "job__name", "job__dir_name"]
    ordering = ["-id"]


@admin.register(WorkflowStep)
class WorkflowStepAdmin(ReadOnlyAdmin):
    change_select_related = ("workflow__job", "step")
    list_display = ["__str__", "workflow", "step", "entry_index", "position_in_entry"]
    list_filter = ["is_concurrent", "workflow__job__project"]
    list_select_related = ["workflow__job", "step"]
    search_fields = ["step__step_id", "workflow__name", "workflow__job__name"]
    ordering = ["-id"]
    # The default widget would label every dependency with a query of its own.
    exclude = ["depends_on"]
    readonly_fields = ["dependencies"]

    @admin.display(description="depends on")
    def dependencies(self, obj: WorkflowStep) -> str:
        nodes = obj.depends_on.select_related("workflow__job", "step").order_by("entry_index")
        return ", ".join(str(node) for node in nodes) or "-"


@admin.register(JobLoadError)
class JobLoadErrorAdmin(ReadOnlyAdmin):
    change_select_related = ("project",)
    list_display = ["dir_name", "project", "short_error", "detected_at"]
    list_filter = ["project"]
    list_select_related = ["project"]
    search_fields = ["dir_name", "job_dir", "error"]
    ordering = ["-detected_at"]

    @admin.display(description="error")
    def short_error(self, obj: JobLoadError) -> str:
        return Truncator(obj.error).chars(120)


# Sessions and their history ----------------------------------------------------------------------


class StepRunInline(ReadOnlyInline):
    model = StepRun
    fields = [
        "step_id",
        "entry_index",
        "status",
        "quality_attempts",
        "outputs",
        "notes",
        "started_at",
        "completed_at",
    ]
    ordering = ["id"]

    def get_queryset(self, request):
        # Each row is labelled with str(run), which reads its session.
        return super().get_queryset(request).select_related("session")


@admin.register(WorkflowSession)
class WorkflowSessionAdmin(SessionSearch, ReadOnlyAdmin):
    change_select_related = ("project", "agent", "parent", "job", "workflow__job")
    list_display = [
        "session_id",
        "job_name",
        "workflow_name",
        "current_step_id",
        "status",
        "agent",
        "project",
        "started_at",
        "aborted_by",
    ]
    session_lookup = "pk"
    # A date filter rather than a date hierarchy: the hierarchy scans every row for its dates.
    list_filter = ["status", "project", "started_at"]
    list_select_related = ["agent", "project"]
    search_fields = ["instance_id__exact", "agent__agent_id__exact", "job_name", "goal"]
    search_help_text = "A session id, instance id or agent id (exactly), or words of the goal."
    ordering = ["-id"]
    show_full_result_count = False
    readonly_fields = ["history"]
    inlines = [StepRunInline]
    actions = ["abort_sessions"]

    @admin.display(description="history")
    def history(self, obj: WorkflowSession) -> str:
        links = [
            changelist_link(Event, "events", session__id__exact=obj.pk),
            changelist_link(StepRun, "step runs", session__id__exact=obj.pk),
            changelist_link(ReviewResult, "reviews", session__id__exact=obj.pk),
        ]
        return format_html_join(" · ", "{}", ((link,) for link in links))

    def has_abort_session_permission(self, request) -> bool:
        return request.user.has_perm("workflows.abort_session")

    @admin.action(description="Abort the selected sessions…", permissions=["abort_session"])
    def abort_sessions(self, request, queryset):
        reason = ask_reason(
            self,
            request,
            queryset,
            ReasonPage(
                action="abort_sessions",
                title="Abort sessions",
                intro="These sessions will stop; their agents resume the workflow below each "
                "on their stack.",
                label="Reason",
                help_text="Why the sessions stop; the agent and the team see this.",
                submit="Abort the sessions",
            ),
        )
        if not isinstance(reason, str):
            return reason
        apply_each(
            self,
            request,
            queryset,
            lambda session: session_abort(
                project=session.project,
                agent=session.agent,
                session_id=session.session_id,
                explanation=reason,
                by=request.user,
            ),
            name=lambda session: f"Session {session.session_id}",
            done=lambda n: f"Aborted {plural(n, 'session')}.",
        )
        return None


class ReviewResultInline(ReadOnlyInline):
    model = ReviewResult
    fields = [
        "attempt",
        "run_each",
        "target_file",
        "passed",
        "reviewer_kind",
        "reviewer",
        "feedback",
        "criteria_results",
        "override_reason",
        "error",
        "created_at",
    ]
    ordering = ["id"]

    def get_queryset(self, request):
        return super().get_queryset(request).select_related("step_run__session")


class HumanDecisionInline(ReadOnlyInline):
    model = HumanDecision
    fields = ["kind", "decided_by_name", "reason", "created_at", "consumed_at"]
    ordering = ["id"]

    def get_queryset(self, request):
        return super().get_queryset(request).select_related("step_run__session")


@admin.register(StepRun)
class StepRunAdmin(SessionSearch, ReviewDecisionActions, ReadOnlyAdmin):
    change_select_related = ("session", "step_def")
    list_display = [
        "__str__",
        "session_link",
        "step_id",
        "entry_index",
        "status",
        "quality_attempts",
        "started_at",
        "completed_at",
    ]
    list_filter = ["status", "session__project"]
    list_select_related = ["session"]
    search_fields = ["step_id__exact"]
    search_help_text = "A session id or a step id, exactly."
    ordering = ["-id"]
    show_full_result_count = False
    inlines = [ReviewResultInline, HumanDecisionInline]
    actions = ["override_reviews", "request_changes"]

    @admin.display(description="session", ordering="session")
    def session_link(self, obj: StepRun) -> str:
        return admin_link(obj.session, obj.session.session_id)

    def step_runs_of(self, queryset: QuerySet) -> QuerySet[StepRun]:
        return queryset


@admin.register(Event)
class EventAdmin(SessionSearch, ReadOnlyAdmin):
    change_select_related = ("project", "session", "agent")
    list_display = ["id", "kind", "project", "session_link", "agent", "short_payload", "created_at"]
    list_filter = ["kind", "project", "created_at"]
    list_select_related = ["project", "session", "agent"]
    search_fields = ["agent__agent_id__exact"]
    search_help_text = "A session id or an agent id, exactly."
    ordering = ["-id"]
    show_full_result_count = False

    @admin.display(description="session", ordering="session")
    def session_link(self, obj: Event) -> str:
        return admin_link(obj.session, obj.session.session_id) if obj.session else "-"

    @admin.display(description="payload")
    def short_payload(self, obj: Event) -> str:
        return compact_json(obj.payload)
