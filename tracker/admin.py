"""Admin: the tracker's workflows, phases, tasks and logs, read-only.

Every row is what an agent said it did, written by the tracker's services; a person answers a
blocker on the dashboard or over the API, never by editing a row here. So every model is
view-only, for superusers too. The lists are long-lived history: none counts its whole table,
and every related cell is joined into the page's one query.
"""

from __future__ import annotations

from django.contrib import admin
from django.db.models import QuerySet
from django.forms.models import BaseInlineFormSet
from django.http import HttpRequest
from django.utils.text import Truncator

from tracker.models import Decision, Issue, Milestone, Phase, Task, TrackedWorkflow
from workflows.admin_base import (
    ReadOnlyAdmin,
    ReadOnlyInline,
    admin_link,
    compact_json,
    related_changelists,
)

# An inline shows the first rows only: a workflow can hold thousands of tasks or logs, and the
# page links to the full, filtered list of each (the "history" field).
INLINE_LIMIT = 50


class CappedFormSet(BaseInlineFormSet):
    """An inline formset over the first ``limit`` related rows.

    The inline's own queryset cannot be sliced: the formset filters it by the parent afterwards.
    """

    limit = INLINE_LIMIT

    def get_queryset(self) -> QuerySet:
        if not hasattr(self, "_capped"):
            self._capped = super().get_queryset()[: self.limit]
        return self._capped


class CappedInline(ReadOnlyInline):
    formset = CappedFormSet


def short(text: str, limit: int = 80) -> str:
    return Truncator(text).chars(limit)


# Workflows and phases ---------------------------------------------------------------------------


class PhaseInline(CappedInline):
    model = Phase
    fields = ["number", "name", "status", "started_at", "completed_at"]
    ordering = ["number"]
    verbose_name_plural = f"phases (first {INLINE_LIMIT})"


class WorkflowTaskInline(CappedInline):
    model = Task
    fk_name = "workflow"
    fields = ["name", "phase", "parent", "status", "agent_name", "started_at", "completed_at"]
    ordering = ["id"]
    # Each row shows its phase and parent task by name.
    select_related = ("phase", "parent")
    verbose_name_plural = f"tasks (first {INLINE_LIMIT})"


@admin.register(TrackedWorkflow)
class TrackedWorkflowAdmin(ReadOnlyAdmin):
    change_select_related = ("project", "agent")
    list_display = [
        "id",
        "name",
        "status",
        "profile",
        "phases",
        "agent",
        "project",
        "created_at",
        "completed_at",
    ]
    list_display_links = ["id", "name"]
    list_filter = ["status", "profile", "project", "agent", "created_at"]
    list_select_related = ["project", "agent"]
    search_fields = ["=id", "name", "objective", "summary"]
    search_help_text = "A workflow id (exactly), or words of its name, objective or summary."
    ordering = ["-id"]
    show_full_result_count = False
    readonly_fields = ["history"]
    inlines = [PhaseInline, WorkflowTaskInline]

    @admin.display(description="phase")
    def phases(self, obj: TrackedWorkflow) -> str:
        return f"{obj.current_phase} / {obj.total_phases}"

    @admin.display(description="history")
    def history(self, obj: TrackedWorkflow) -> str:
        return related_changelists(self.admin_site, obj)


def workflow_column(obj: Phase | Task | Decision | Issue | Milestone) -> str:
    return admin_link(obj.workflow, obj.workflow.name)


@admin.register(Phase)
class PhaseAdmin(ReadOnlyAdmin):
    change_select_related = ("project", "agent", "workflow")
    list_display = [
        "__str__",
        "workflow_link",
        "number",
        "status",
        "agent",
        "project",
        "started_at",
        "completed_at",
    ]
    list_filter = ["status", "project", "agent", "created_at"]
    list_select_related = ["project", "agent", "workflow"]
    search_fields = ["=workflow__id", "name", "workflow__name"]
    search_help_text = "A workflow id (exactly), or words of the phase's or workflow's name."
    ordering = ["-id"]
    show_full_result_count = False
    readonly_fields = ["history"]

    @admin.display(description="workflow", ordering="workflow")
    def workflow_link(self, obj: Phase) -> str:
        return workflow_column(obj)

    @admin.display(description="history")
    def history(self, obj: Phase) -> str:
        return related_changelists(self.admin_site, obj)


# Tasks and what they logged ----------------------------------------------------------------------


class SubtaskInline(CappedInline):
    model = Task
    fk_name = "parent"
    fields = ["name", "status", "agent_name", "started_at", "completed_at"]
    ordering = ["id"]
    verbose_name = "sub-task"
    verbose_name_plural = f"sub-tasks (first {INLINE_LIMIT})"


class DecisionInline(CappedInline):
    model = Decision
    fields = ["category", "question", "chosen", "created_at"]
    ordering = ["id"]
    verbose_name_plural = f"decisions (first {INLINE_LIMIT})"


class IssueInline(CappedInline):
    model = Issue
    fields = ["type", "description", "requires_human_review", "resolved_by", "resolved_at"]
    ordering = ["id"]
    select_related = ("resolved_by",)
    verbose_name_plural = f"issues (first {INLINE_LIMIT})"


class MilestoneInline(CappedInline):
    model = Milestone
    fields = ["message", "progress", "created_at"]
    ordering = ["id"]
    verbose_name_plural = f"milestones (first {INLINE_LIMIT})"


@admin.register(Task)
class TaskAdmin(ReadOnlyAdmin):
    change_select_related = ("project", "agent", "workflow", "phase", "parent")
    list_display = [
        "id",
        "name",
        "workflow_link",
        "phase_link",
        "parent_link",
        "status",
        "caller_type",
        "agent",
        "project",
        "started_at",
        "duration_ms",
    ]
    list_display_links = ["id", "name"]
    list_filter = [
        "status",
        "caller_type",
        "tests_status",
        "manual_review_needed",
        "project",
        "agent",
        "started_at",
    ]
    list_select_related = ["project", "agent", "workflow", "phase", "parent"]
    search_fields = ["=id", "=workflow__id", "name", "goal", "agent_name"]
    search_help_text = "A task or workflow id (exactly), or words of the name, goal or agent name."
    ordering = ["-id"]
    show_full_result_count = False
    readonly_fields = ["history"]
    inlines = [SubtaskInline, DecisionInline, IssueInline, MilestoneInline]

    @admin.display(description="workflow", ordering="workflow")
    def workflow_link(self, obj: Task) -> str:
        return workflow_column(obj)

    @admin.display(description="phase", ordering="phase")
    def phase_link(self, obj: Task) -> str:
        return admin_link(obj.phase, f"{obj.phase.number}: {obj.phase.name}" if obj.phase else "")

    @admin.display(description="parent task", ordering="parent")
    def parent_link(self, obj: Task) -> str:
        return admin_link(obj.parent, obj.parent.name if obj.parent else "")

    @admin.display(description="history")
    def history(self, obj: Task) -> str:
        return related_changelists(self.admin_site, obj)


class LogAdmin(ReadOnlyAdmin):
    """What an agent logged against a task: linked to its workflow and task."""

    change_select_related: tuple[str, ...] = ("project", "agent", "workflow", "task")
    list_select_related = ["project", "agent", "workflow", "task"]
    ordering = ["-id"]
    show_full_result_count = False

    @admin.display(description="workflow", ordering="workflow")
    def workflow_link(self, obj: Decision | Issue | Milestone) -> str:
        return workflow_column(obj)

    @admin.display(description="task", ordering="task")
    def task_link(self, obj: Decision | Issue | Milestone) -> str:
        return admin_link(obj.task, obj.task.name)


@admin.register(Decision)
class DecisionAdmin(LogAdmin):
    list_display = [
        "id",
        "category",
        "short_question",
        "chosen_option",
        "workflow_link",
        "task_link",
        "agent",
        "project",
        "created_at",
    ]
    list_display_links = ["id"]
    list_filter = ["category", "project", "agent", "created_at"]
    search_fields = ["=workflow__id", "=task__id", "question", "chosen", "reasoning"]
    search_help_text = "A workflow or task id (exactly), or words of the question, choice or why."

    @admin.display(description="question")
    def short_question(self, obj: Decision) -> str:
        return short(obj.question)

    @admin.display(description="chosen")
    def chosen_option(self, obj: Decision) -> str:
        return short(obj.chosen, 60)


class ResolvedFilter(admin.SimpleListFilter):
    title = "resolved"
    parameter_name = "resolved"

    def lookups(self, request: HttpRequest, model_admin: admin.ModelAdmin) -> list[tuple[str, str]]:
        return [("yes", "Resolved by a person"), ("no", "Not resolved")]

    def queryset(self, request: HttpRequest, queryset: QuerySet) -> QuerySet:
        if self.value() == "yes":
            return queryset.filter(resolved_at__isnull=False)
        if self.value() == "no":
            return queryset.filter(resolved_at__isnull=True)
        return queryset


@admin.register(Issue)
class IssueAdmin(LogAdmin):
    change_select_related = (*LogAdmin.change_select_related, "resolved_by")
    list_display = [
        "id",
        "type",
        "short_description",
        "requires_human_review",
        "workflow_link",
        "task_link",
        "agent",
        "project",
        "created_at",
        "resolved_by",
        "resolved_at",
    ]
    list_display_links = ["id"]
    list_filter = [
        "type",
        "requires_human_review",
        ResolvedFilter,
        "project",
        "agent",
        "created_at",
    ]
    list_select_related = [*LogAdmin.list_select_related, "resolved_by"]
    search_fields = [
        "=workflow__id",
        "=task__id",
        "description",
        "resolution",
        "human_resolution",
    ]
    search_help_text = "A workflow or task id (exactly), or words of the issue or a resolution."

    @admin.display(description="description")
    def short_description(self, obj: Issue) -> str:
        return short(obj.description)


@admin.register(Milestone)
class MilestoneAdmin(LogAdmin):
    list_display = [
        "id",
        "short_message",
        "progress",
        "workflow_link",
        "task_link",
        "agent",
        "project",
        "short_metadata",
        "created_at",
    ]
    list_display_links = ["id"]
    list_filter = ["project", "agent", "created_at"]
    search_fields = ["=workflow__id", "=task__id", "message"]
    search_help_text = "A workflow or task id (exactly), or words of the message."

    @admin.display(description="message")
    def short_message(self, obj: Milestone) -> str:
        return short(obj.message)

    @admin.display(description="metadata")
    def short_metadata(self, obj: Milestone) -> str:
        return compact_json(obj.metadata)
