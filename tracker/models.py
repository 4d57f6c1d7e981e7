"""The tracker's tables: what an orchestrating agent says it did.

A tracked workflow has numbered phases; tasks (which may nest) belong to a workflow and
optionally a phase; decisions, issues and milestones are logged against a task. Every row
carries its project and the agent that wrote it, so lists filter without joins. Wire ids are
the primary keys as text. Enum values are stored in upper case, as the original's Prisma enums
hold them; the tools take lower-case wire values and map them.

The tables keep the names they had when these models were part of ``workflows``
(``workflows_task``, ``wf_task_running_idx``, …): the move to this app changed no table.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone

from tracker import scope
from workflows.models import Agent, Project


class TrackedWorkflow(models.Model):
    """One tracked piece of work (the original's ``Workflow``; named apart from the catalog's)."""

    class Status(models.TextChoices):
        PENDING = "PENDING", "Pending"
        IN_PROGRESS = "IN_PROGRESS", "In progress"
        COMPLETED = "COMPLETED", "Completed"
        FAILED = "FAILED", "Failed"
        # The original stores `partial` as FAILED; we keep what the agent said.
        PARTIAL = "PARTIAL", "Partially completed"
        BLOCKED = "BLOCKED", "Blocked"

    class Profile(models.TextChoices):
        SIMPLE = "SIMPLE", "Simple"
        STANDARD = "STANDARD", "Standard"
        COMPLEX = "COMPLEX", "Complex"

    project = models.ForeignKey(
        Project,
        on_delete=models.CASCADE,
        related_name="tracked_workflows",
        db_index=False,  # wf_tracked_project_idx leads with it
    )
    agent = models.ForeignKey(Agent, on_delete=models.PROTECT, related_name="tracked_workflows")
    name = models.CharField(max_length=200)
    objective = models.TextField(blank=True, default="")
    scope = models.TextField(blank=True, default="")
    constraints = models.TextField(blank=True, default="")
    profile = models.CharField(max_length=16, choices=Profile.choices, default=Profile.STANDARD)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.IN_PROGRESS)
    current_phase = models.IntegerField(default=0)
    total_phases = models.IntegerField(default=1)
    summary = models.TextField(blank=True, default="")
    achievements = models.JSONField(default=list, blank=True)
    limitations = models.JSONField(default=list, blank=True)
    total_duration_ms = models.BigIntegerField(
        default=0, help_text="Summed task time (parallel tasks count twice)."
    )
    total_tokens = models.BigIntegerField(default=0)
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)
    completed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "workflows_trackedworkflow"
        constraints = [
            models.CheckConstraint(
                condition=Q(
                    status__in=[
                        "PENDING",
                        "IN_PROGRESS",
                        "COMPLETED",
                        "FAILED",
                        "PARTIAL",
                        "BLOCKED",
                    ]
                ),
                name="wf_trackedworkflow_status_valid",
            ),
            models.CheckConstraint(
                condition=Q(profile__in=["SIMPLE", "STANDARD", "COMPLEX"]),
                name="wf_trackedworkflow_profile_valid",
            ),
            models.CheckConstraint(
                condition=Q(total_phases__gte=1, total_phases__lte=20),
                name="wf_trackedworkflow_total_phases_range",
            ),
        ]
        indexes = [
            # The project's tracked workflows, newest first (the list page, keyset).
            models.Index(fields=["project", "-id"], name="wf_tracked_project_idx"),
            # The same filtered by status.
            models.Index(fields=["project", "status", "-id"], name="wf_tracked_status_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.status})"


class Phase(models.Model):
    class Status(models.TextChoices):
        PENDING = "PENDING", "Pending"
        IN_PROGRESS = "IN_PROGRESS", "In progress"
        COMPLETED = "COMPLETED", "Completed"
        FAILED = "FAILED", "Failed"

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="phases")
    agent = models.ForeignKey(Agent, on_delete=models.PROTECT, related_name="phases")
    workflow = models.ForeignKey(
        TrackedWorkflow,
        on_delete=models.CASCADE,
        related_name="phases",
        db_index=False,  # wf_phase_unique_number_per_workflow leads with it
    )
    number = models.IntegerField()
    name = models.CharField(max_length=200)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.IN_PROGRESS)
    started_at = models.DateTimeField(null=True, blank=True)
    completed_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        db_table = "workflows_phase"
        constraints = [
            models.UniqueConstraint(
                fields=["workflow", "number"], name="wf_phase_unique_number_per_workflow"
            ),
            models.CheckConstraint(
                condition=Q(status__in=["PENDING", "IN_PROGRESS", "COMPLETED", "FAILED"]),
                name="wf_phase_status_valid",
            ),
            models.CheckConstraint(condition=Q(number__gte=1), name="wf_phase_number_positive"),
        ]

    def __str__(self) -> str:
        return f"Phase {self.number}: {self.name} ({self.status})"


class Task(models.Model):
    class Status(models.TextChoices):
        IN_PROGRESS = "IN_PROGRESS", "In progress"
        SUCCESS = "SUCCESS", "Success"
        PARTIAL_SUCCESS = "PARTIAL_SUCCESS", "Partial success"
        FAILED = "FAILED", "Failed"

    class CallerType(models.TextChoices):
        ORCHESTRATOR = "ORCHESTRATOR", "Orchestrator"
        SUBAGENT = "SUBAGENT", "Sub-agent"

    class TestsStatus(models.TextChoices):
        PASSED = "PASSED", "Passed"
        FAILED = "FAILED", "Failed"
        NOT_RUN = "NOT_RUN", "Not run"

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="tracked_tasks")
    agent = models.ForeignKey(Agent, on_delete=models.PROTECT, related_name="tracked_tasks")
    workflow = models.ForeignKey(
        TrackedWorkflow,
        on_delete=models.CASCADE,
        related_name="tasks",
        db_index=False,  # wf_task_workflow_idx leads with it
    )
    phase = models.ForeignKey(
        Phase, null=True, blank=True, on_delete=models.SET_NULL, related_name="tasks"
    )
    parent = models.ForeignKey(
        "self",
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="subtasks",
        db_index=False,  # wf_task_subtasks_idx leads with it
    )
    name = models.CharField(max_length=200)
    goal = models.TextField()
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.IN_PROGRESS)
    caller_type = models.CharField(
        max_length=16, choices=CallerType.choices, blank=True, default=""
    )
    agent_name = models.CharField(max_length=200, blank=True, default="")
    areas = models.JSONField(default=list, blank=True)
    snapshot = models.JSONField(
        null=True, blank=True, help_text="The project's state at start, to diff at completion."
    )
    files_changed = models.JSONField(default=dict, blank=True)
    scope_match = models.BooleanField(null=True, blank=True)
    unexpected_files = models.JSONField(default=list, blank=True)
    warnings = models.JSONField(default=list, blank=True)
    summary = models.TextField(blank=True, default="")
    achievements = models.JSONField(default=list, blank=True)
    limitations = models.JSONField(default=list, blank=True)
    next_steps = models.JSONField(default=list, blank=True)
    manual_review_needed = models.BooleanField(default=False)
    manual_review_reason = models.TextField(blank=True, default="")
    packages_added = models.JSONField(default=list, blank=True)
    packages_removed = models.JSONField(default=list, blank=True)
    commands_executed = models.JSONField(default=list, blank=True)
    tests_status = models.CharField(
        max_length=16, choices=TestsStatus.choices, blank=True, default=""
    )
    tokens_input = models.BigIntegerField(default=0)
    tokens_output = models.BigIntegerField(default=0)
    started_at = models.DateTimeField(default=timezone.now)
    completed_at = models.DateTimeField(null=True, blank=True)
    duration_ms = models.BigIntegerField(null=True, blank=True)

    class Meta:
        db_table = "workflows_task"
        constraints = [
            models.CheckConstraint(
                condition=Q(status__in=["IN_PROGRESS", "SUCCESS", "PARTIAL_SUCCESS", "FAILED"]),
                name="wf_task_status_valid",
            ),
            models.CheckConstraint(
                condition=Q(status="IN_PROGRESS", completed_at__isnull=True)
                | ~Q(status="IN_PROGRESS") & Q(completed_at__isnull=False),
                name="wf_task_completed_at_matches_status",
            ),
            models.CheckConstraint(
                condition=Q(caller_type__in=["", "ORCHESTRATOR", "SUBAGENT"]),
                name="wf_task_caller_type_valid",
            ),
            models.CheckConstraint(
                condition=Q(tests_status__in=["", "PASSED", "FAILED", "NOT_RUN"]),
                name="wf_task_tests_status_valid",
            ),
        ]
        indexes = [
            # get_context's task list and filters: a workflow's tasks, newest first.
            models.Index(fields=["workflow", "-id"], name="wf_task_workflow_idx"),
            # Running tasks of a workflow (complete_workflow's check, the concurrency warning).
            models.Index(
                fields=["workflow", "id"],
                condition=Q(status="IN_PROGRESS"),
                name="wf_task_running_idx",
            ),
            # Running sub-tasks of a task (complete_task's check).
            models.Index(fields=["parent", "status"], name="wf_task_subtasks_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.status})"

    @property
    def warnings_besides_areas(self) -> list[str]:
        """The warnings a page shows beside its own list of the files outside the task's areas
        (the warning about those files would say the same again)."""
        if not self.unexpected_files:
            return list(self.warnings)
        return [warning for warning in self.warnings if scope.OUTSIDE_AREAS not in warning]


class Decision(models.Model):
    class Category(models.TextChoices):
        ARCHITECTURE = "ARCHITECTURE", "Architecture"
        LIBRARY_CHOICE = "LIBRARY_CHOICE", "Library choice"
        TRADE_OFF = "TRADE_OFF", "Trade-off"
        WORKAROUND = "WORKAROUND", "Workaround"
        OTHER = "OTHER", "Other"

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="decisions")
    agent = models.ForeignKey(Agent, on_delete=models.PROTECT, related_name="decisions")
    workflow = models.ForeignKey(
        TrackedWorkflow,
        on_delete=models.CASCADE,
        related_name="decisions",
        db_index=False,  # wf_decision_workflow_idx leads with it
    )
    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="decisions")
    category = models.CharField(max_length=16, choices=Category.choices)
    question = models.TextField()
    options_considered = models.JSONField(default=list, blank=True)
    chosen = models.TextField()
    reasoning = models.TextField()
    trade_offs = models.TextField(blank=True, default="")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        db_table = "workflows_decision"
        constraints = [
            models.CheckConstraint(
                condition=Q(
                    category__in=[
                        "ARCHITECTURE",
                        "LIBRARY_CHOICE",
                        "TRADE_OFF",
                        "WORKAROUND",
                        "OTHER",
                    ]
                ),
                name="wf_decision_category_valid",
            ),
        ]
        indexes = [
            # get_context's decisions, newest first, one keyset page at a time.
            models.Index(fields=["workflow", "-id"], name="wf_decision_workflow_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.category}: {self.question[:60]}"


class Issue(models.Model):
    class Type(models.TextChoices):
        DOC_GAP = "DOC_GAP", "Documentation gap"
        BUG = "BUG", "Bug encountered"
        DEPENDENCY_CONFLICT = "DEPENDENCY_CONFLICT", "Dependency conflict"
        UNCLEAR_REQUIREMENT = "UNCLEAR_REQUIREMENT", "Unclear requirement"
        OTHER = "OTHER", "Other"

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="issues")
    agent = models.ForeignKey(Agent, on_delete=models.PROTECT, related_name="issues")
    workflow = models.ForeignKey(
        TrackedWorkflow,
        on_delete=models.CASCADE,
        related_name="issues",
        db_index=False,  # wf_issue_workflow_idx leads with it
    )
    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="issues")
    type = models.CharField(max_length=24, choices=Type.choices)
    description = models.TextField()
    resolution = models.TextField(help_text="What the agent did about it.")
    requires_human_review = models.BooleanField(default=False)
    human_resolution = models.TextField(
        blank=True, default="", help_text="A person's written answer to a blocker."
    )
    resolved_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="resolved_issues",
    )
    resolved_at = models.DateTimeField(null=True, blank=True)
    # The credential the person answered through: the dashboard, or which API token.
    resolved_via = models.CharField(max_length=160, blank=True, default="")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        db_table = "workflows_issue"
        # Answering a blocker unblocks an agent's work on the tracker, not a review ruling, so
        # it is granted on its own.
        permissions = [("resolve_blocker", "Can resolve a blocker an agent raised")]
        constraints = [
            models.CheckConstraint(
                condition=Q(
                    type__in=[
                        "DOC_GAP",
                        "BUG",
                        "DEPENDENCY_CONFLICT",
                        "UNCLEAR_REQUIREMENT",
                        "OTHER",
                    ]
                ),
                name="wf_issue_type_valid",
            ),
        ]
        indexes = [
            models.Index(fields=["workflow", "-id"], name="wf_issue_workflow_idx"),
            # Blockers: issues awaiting a person, a small part of the table.
            models.Index(
                fields=["workflow", "-id"],
                condition=Q(requires_human_review=True, resolved_at__isnull=True),
                name="wf_issue_blocker_idx",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.type}: {self.description[:60]}"


class Milestone(models.Model):
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="milestones")
    agent = models.ForeignKey(Agent, on_delete=models.PROTECT, related_name="milestones")
    workflow = models.ForeignKey(
        TrackedWorkflow,
        on_delete=models.CASCADE,
        related_name="milestones",
        db_index=False,  # wf_milestone_workflow_idx leads with it
    )
    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="milestones")
    message = models.CharField(max_length=500)
    progress = models.FloatField(null=True, blank=True)
    metadata = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        db_table = "workflows_milestone"
        constraints = [
            models.CheckConstraint(
                condition=Q(progress__isnull=True) | Q(progress__gte=0, progress__lte=100),
                name="wf_milestone_progress_range",
            ),
        ]
        indexes = [
            models.Index(fields=["workflow", "-id"], name="wf_milestone_workflow_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.message[:60]} ({self.progress})"
