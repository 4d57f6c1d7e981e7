"""Admin: browse the catalog, agents, sessions and events; abort sessions through the services.

Everything here is history or catalog that the services write, so every model is read-only in
the admin, for superusers too. The only changes an admin user can make go through the actions,
and each action calls one service per selected object; adding a project is a page of its own
that calls ``project_add``, as the command line and the REST API do (its Host action too). A
step run's page, where a human rules on its review, is registered by ``reviews/admin.py``.
"""

from __future__ import annotations

from django import forms
from django.contrib import admin, messages
from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import reverse
from django.utils.text import Truncator

from workflows.admin_base import (
    ReadOnlyAdmin,
    ReadOnlyInline,
    ReasonPage,
    SessionSearch,
    admin_link,
    admin_page,
    apply_each,
    changelist_link,
    compact_json,
    plural,
    reason_action,
    related_changelists,
    session_column,
)
from workflows.errors import WorkflowError
from workflows.events import VIA_ADMIN
from workflows.models import (
    Agent,
    Event,
    Job,
    JobLoadError,
    Project,
    SessionJob,
    Step,
    StepRun,
    Workflow,
    WorkflowSession,
    WorkflowStep,
)
from workflows.services.projects import project_add, project_remove, project_review_commands_set
from workflows.services.sessions import session_abort

ABORT = ReasonPage(
    title="Abort the selected sessions",
    intro="These sessions stop; their agents resume the workflow below each on their stack.",
    help_text="Why the sessions stop; the agent and the team see this.",
    submit="Abort the sessions",
)


# Catalog ----------------------------------------------------------------------------------------


class ProjectAddForm(forms.Form):
    # Only the service judges the path, so that the admin, the command line and the REST
    # API refuse the same paths with the same words; the length here only bounds the field.
    root_path = forms.CharField(
        label="Folder on the server",
        max_length=4096,
        strip=False,
        help_text="Its absolute path, e.g. /srv/projects/site.",
        widget=forms.TextInput(attrs={"size": 80}),
    )


@admin.register(Project)
class ProjectAdmin(ReadOnlyAdmin):
    list_display = ["name", "root_path", "hosted", "removed_at", "review_commands", "created_at"]
    list_filter = ["hosted", "review_commands_allowed"]
    search_fields = ["name", "root_path"]
    ordering = ["name"]
    readonly_fields = ["review_commands"]
    actions = [
        "host_projects",
        "remove_projects",
        "allow_review_commands",
        "disallow_review_commands",
    ]
    add_template = "admin/workflows/project/add.html"

    def has_add_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm("workflows.add_project")

    def add_view(
        self, request: HttpRequest, form_url: str = "", extra_context: dict | None = None
    ) -> HttpResponse:
        # Not the model form: a project is added by the service that checks the path and the
        # folder, which says what it found; the form only carries the path.
        if not self.has_add_permission(request):
            raise PermissionDenied
        form = ProjectAddForm(request.POST if request.method == "POST" else None)
        if form.is_valid():
            try:
                added = project_add(root_path=form.cleaned_data["root_path"])
            except WorkflowError as exc:
                form.add_error("root_path", exc.message)
            else:
                project = added.project
                verb = (
                    "Added"
                    if added.created
                    else "Already a project:"
                    if added.hosted_before
                    else "Hosted"
                )
                self.message_user(
                    request, f"{verb} project {project.pk} at {project.root_path}", messages.SUCCESS
                )
                for warning in added.warnings:
                    self.message_user(request, warning, messages.WARNING)
                if added.created:
                    self.log_addition(request, project, [{"added": {}}])
                return HttpResponseRedirect(
                    reverse("admin:workflows_project_change", args=[project.pk])
                )
        return admin_page(self, request, self.add_template, "Add a project", form=form)

    def has_host_projects_permission(self, request: HttpRequest) -> bool:
        return self.has_add_permission(request)

    @admin.action(
        description="Host the selected projects (served to tokens; brings back removed ones)",
        permissions=["host_projects"],
    )
    def host_projects(self, request: HttpRequest, queryset: QuerySet[Project]) -> None:
        # The same service as adding the folder: the same checks of the path, the same answer.
        apply_each(
            self,
            request,
            queryset,
            lambda project: project_add(root_path=project.root_path),
            name=str,
            done=lambda n: f"Hosted {plural(n, 'project')}.",
        )

    @admin.action(
        description="Remove the selected projects (served nowhere; sessions kept, read-only)",
        permissions=["host_projects"],
    )
    def remove_projects(self, request: HttpRequest, queryset: QuerySet[Project]) -> None:
        by = f"user {request.user.get_username()!r} (admin)"
        apply_each(
            self,
            request,
            queryset,
            lambda project: project_remove(project=project, by=by),
            name=str,
            done=lambda n: f"Removed {plural(n, 'project')}.",
        )

    @admin.display(description="review commands on the web server")
    def review_commands(self, obj: Project) -> str:
        state = "allowed" if obj.review_commands_allowed else "not allowed"
        if obj.review_commands_changed_at is None:
            return state
        when = obj.review_commands_changed_at.strftime("%Y-%m-%d %H:%M UTC")
        return f"{state} (by {obj.review_commands_changed_by_name or 'unknown'}, {when})"

    def has_allow_review_commands_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm("workflows.allow_review_commands")

    def _review_commands_set(
        self, request: HttpRequest, queryset: QuerySet[Project], allowed: bool
    ) -> None:
        assert isinstance(request.user, User)
        user = request.user
        verb = "Allowed" if allowed else "Disallowed"
        apply_each(
            self,
            request,
            queryset,
            lambda project: project_review_commands_set(project=project, allowed=allowed, by=user),
            name=str,
            done=lambda n: f"{verb} review commands for {plural(n, 'project')}.",
        )

    @admin.action(
        description="Allow review commands (the web server runs their precompute commands)",
        permissions=["allow_review_commands"],
    )
    def allow_review_commands(self, request: HttpRequest, queryset: QuerySet[Project]) -> None:
        self._review_commands_set(request, queryset, allowed=True)

    @admin.action(description="Disallow review commands", permissions=["allow_review_commands"])
    def disallow_review_commands(self, request: HttpRequest, queryset: QuerySet[Project]) -> None:
        self._review_commands_set(request, queryset, allowed=False)


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
    select_related = ("job",)


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

    def get_queryset(self, request: HttpRequest) -> QuerySet[Job]:
        # The parsed definition can be large and the list never shows it.
        queryset = super().get_queryset(request)
        match = request.resolver_match
        if match and match.url_name and match.url_name.endswith("_changelist"):
            queryset = queryset.defer("definition", "common_info")
        return queryset


class WorkflowStepInline(ReadOnlyInline):
    model = WorkflowStep
    fields = ["entry_index", "position_in_entry", "step", "is_concurrent"]
    ordering = ["entry_index", "position_in_entry"]
    select_related = ("workflow__job", "step")


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


class SessionJobValidity(admin.SimpleListFilter):
    title = "definition"
    parameter_name = "valid"

    def lookups(self, request: HttpRequest, model_admin: admin.ModelAdmin) -> list[tuple[str, str]]:
        return [("yes", "Loads"), ("no", "Fails to load")]

    def queryset(self, request: HttpRequest, queryset: QuerySet) -> QuerySet:
        if self.value() in ("yes", "no"):
            return queryset.filter(job__isnull=self.value() == "no")
        return queryset


@admin.register(SessionJob)
class SessionJobAdmin(ReadOnlyAdmin):
    """Jobs a DeepWork 0.14 conversation registered for itself (``register_session_job``)."""

    change_select_related = ("project", "job")
    list_display = [
        "job_name",
        "conversation_id",
        "project",
        "loads",
        "short_error",
        "registered_at",
    ]
    list_filter = [SessionJobValidity, "project", "registered_at"]
    list_select_related = ["project", "job"]
    search_fields = ["job_name", "conversation_id__exact", "yaml_text"]
    search_help_text = "A job name, a conversation id (exactly), or words of the job.yml."
    ordering = ["-registered_at", "-id"]
    fields = [
        "project",
        "conversation_id",
        "job_name",
        "registered_at",
        "parsed_job",
        "error",
        "sessions",
        "yaml_text",
    ]
    readonly_fields = ["parsed_job", "sessions"]

    @admin.display(description="loads", boolean=True)
    def loads(self, obj: SessionJob) -> bool:
        return obj.job_id is not None

    @admin.display(description="error")
    def short_error(self, obj: SessionJob) -> str:
        return Truncator(obj.error).chars(120) or "-"

    @admin.display(description="parsed job")
    def parsed_job(self, obj: SessionJob) -> str:
        return admin_link(obj.job)

    @admin.display(description="sessions")
    def sessions(self, obj: SessionJob) -> str:
        # The conversation's runs of this job, wherever they are on its stacks.
        return changelist_link(
            WorkflowSession,
            "sessions of this conversation running it",
            project__id__exact=obj.project_id,
            conversation_id__exact=obj.conversation_id,
            job_name__exact=obj.job_name,
        )


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
    # Each row is labelled with str(run), which reads its session.
    select_related = ("session",)


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
        "generation",
    ]
    session_lookup = "pk"
    # A date filter rather than a date hierarchy: the hierarchy scans every row for its dates.
    list_filter = ["status", "generation", "project", "started_at"]
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
        # Events, step runs, reviews, nested sessions: whatever the installed apps record.
        return related_changelists(self.admin_site, obj)

    def has_abort_session_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm("workflows.abort_session")

    @reason_action(
        ABORT,
        permission="abort_session",
        name=lambda session: f"Session {session.session_id}",
        done=lambda n: f"Aborted {plural(n, 'session')}.",
    )
    def abort_sessions(self, session: WorkflowSession, reason: str, by: User) -> None:
        session_abort(
            project=session.project,
            agent=session.agent,
            session_id=session.session_id,
            explanation=reason,
            by=by,
            via=VIA_ADMIN,
        )


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
    session_link = session_column()

    @admin.display(description="payload")
    def short_payload(self, obj: Event) -> str:
        return compact_json(obj.payload)
