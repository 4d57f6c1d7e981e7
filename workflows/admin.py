"""Admin: browse the catalog, agents, sessions and events. History is read-only here; changes
go through the services (the dashboard and API)."""

from __future__ import annotations

from django.contrib import admin

from workflows.models import Agent, Event, Job, JobLoadError, Project, StepRun, WorkflowSession


class ReadOnlyAdmin(admin.ModelAdmin):
    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False


@admin.register(Project)
class ProjectAdmin(ReadOnlyAdmin):
    list_display = ["name", "root_path", "created_at"]
    search_fields = ["name", "root_path"]


@admin.register(Agent)
class AgentAdmin(ReadOnlyAdmin):
    list_display = ["agent_id", "project", "explicit", "hostname", "pid", "heartbeat_at"]
    list_filter = ["explicit", "project"]
    list_select_related = ["project"]
    search_fields = ["agent_id", "hostname"]


@admin.register(Job)
class JobAdmin(ReadOnlyAdmin):
    list_display = ["name", "version", "source", "dir_name", "project", "is_current", "created_at"]
    list_filter = ["is_current", "source", "project"]
    list_select_related = ["project"]
    search_fields = ["name", "dir_name", "summary"]


@admin.register(JobLoadError)
class JobLoadErrorAdmin(ReadOnlyAdmin):
    list_display = ["dir_name", "project", "error", "detected_at"]
    list_select_related = ["project"]


class StepRunInline(admin.TabularInline):
    model = StepRun
    fields = ["step_id", "entry_index", "status", "outputs", "notes", "started_at", "completed_at"]
    readonly_fields = fields
    extra = 0
    can_delete = False

    def has_add_permission(self, request, obj=None) -> bool:
        return False


@admin.register(WorkflowSession)
class WorkflowSessionAdmin(ReadOnlyAdmin):
    list_display = [
        "session_id",
        "job_name",
        "workflow_name",
        "current_step_id",
        "status",
        "agent",
        "project",
        "started_at",
    ]
    list_filter = ["status", "project", "workflow_name"]
    list_select_related = ["agent", "project"]
    search_fields = ["session_id", "goal", "job_name", "instance_id"]
    date_hierarchy = "started_at"
    inlines = [StepRunInline]


@admin.register(Event)
class EventAdmin(ReadOnlyAdmin):
    list_display = ["id", "kind", "project", "session", "agent", "created_at"]
    list_filter = ["kind", "project"]
    list_select_related = ["project", "session", "agent"]
