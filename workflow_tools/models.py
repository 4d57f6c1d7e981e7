"""Tables of the workflow tools: the tool name each workflow is served under, and the
filters a person sets on which workflows become tools.

Written only by ``workflow_tools.services``. The tables kept the names they had when these
models lived in ``workflows``.
"""

from __future__ import annotations

from django.db import models
from django.db.models import Q
from django.utils import timezone

# What every MCP client accepts as a tool name (some refuse dots and slashes).
TOOL_NAME_REGEX = r"^[a-zA-Z0-9_-]{1,64}$"


def workflow_key(source_key: str, workflow_id: str) -> str:
    """What ``WorkflowToolName.workflow_key`` holds for a source's workflow."""
    return f"{source_key}:{workflow_id}"


class WorkflowToolName(models.Model):
    """The tool name a workflow is served under in a project, chosen once and kept.

    ``workflow_key`` is ``<source key>:<workflow id>``. A name is never reassigned while its
    row exists: a workflow renamed at its source keeps its tool name, and one that disappears
    and comes back gets the same name again.
    """

    project = models.ForeignKey(
        "workflows.Project",
        on_delete=models.CASCADE,
        related_name="workflow_tool_names",
        db_index=False,  # wf_toolname_unique_key leads with it
    )
    workflow_key = models.CharField(max_length=512)
    tool_name = models.CharField(max_length=64)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        db_table = "workflows_workflowtoolname"
        constraints = [
            # Also the index of the one listing query: all names of a project.
            models.UniqueConstraint(
                fields=["project", "workflow_key"], name="wf_toolname_unique_key"
            ),
            models.UniqueConstraint(
                fields=["project", "tool_name"], name="wf_toolname_unique_name"
            ),
            models.CheckConstraint(
                condition=Q(tool_name__regex=TOOL_NAME_REGEX), name="wf_toolname_name_valid"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.tool_name} <- {self.workflow_key}"


class WorkflowToolFilter(models.Model):
    """One include or exclude glob on the workflows served as tools, by every server.

    With any enabled include filter, a workflow must match one of them; it must match no
    enabled exclude filter. ``name`` filters match the tool name, the workflow's name or its
    id; ``category`` filters its category. Globs are case-insensitive (``*``, ``?``, ``[..]``).
    """

    class Action(models.TextChoices):
        INCLUDE = "include", "Include"
        EXCLUDE = "exclude", "Exclude"

    class Field(models.TextChoices):
        NAME = "name", "Name"
        CATEGORY = "category", "Category"

    action = models.CharField(max_length=16, choices=Action.choices)
    field = models.CharField(max_length=16, choices=Field.choices, default=Field.NAME)
    pattern = models.CharField(max_length=255)
    enabled = models.BooleanField(default=True)
    note = models.CharField(max_length=255, blank=True, default="")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        db_table = "workflows_workflowtoolfilter"
        constraints = [
            models.UniqueConstraint(
                fields=["action", "field", "pattern"], name="wf_toolfilter_unique_rule"
            ),
            models.CheckConstraint(
                condition=Q(action__in=["include", "exclude"]), name="wf_toolfilter_action_valid"
            ),
            models.CheckConstraint(
                condition=Q(field__in=["name", "category"]), name="wf_toolfilter_field_valid"
            ),
        ]
        indexes = [
            # The one filter query per listing: the enabled rules.
            models.Index(fields=["enabled", "id"], name="wf_toolfilter_enabled_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.action} {self.field} {self.pattern}"
