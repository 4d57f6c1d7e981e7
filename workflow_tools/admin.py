"""Admin: which workflows become MCP tools (include/exclude globs, editable) and the tool name
each workflow was given (read-only: a name, once chosen, stays)."""

from __future__ import annotations

from django.contrib import admin

from workflow_tools.models import WorkflowToolFilter, WorkflowToolName
from workflows.admin_base import ReadOnlyAdmin


@admin.register(WorkflowToolFilter)
class WorkflowToolFilterAdmin(admin.ModelAdmin):
    """Every server applies the enabled rules on its next tools listing, with no restart."""

    list_display = ["action", "field", "pattern", "enabled", "note", "created_at"]
    list_editable = ["enabled"]
    list_filter = ["action", "field", "enabled"]
    search_fields = ["pattern", "note"]
    ordering = ["id"]
    fields = ["action", "field", "pattern", "enabled", "note"]


@admin.register(WorkflowToolName)
class WorkflowToolNameAdmin(ReadOnlyAdmin):
    list_display = ["tool_name", "workflow_key", "project", "created_at"]
    list_select_related = ["project"]
    search_fields = ["=tool_name", "workflow_key"]
    ordering = ["tool_name"]
    show_full_result_count = False
