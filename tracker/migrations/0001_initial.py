"""The tracker's six models move here from ``workflows`` without touching a table.

The state is created as it stood after ``workflows`` 0015, with the table, constraint and index
names the tables already have, and no SQL runs; ``workflows`` 0016 then forgets the models. The
content type rows are relabelled, so the models' permissions, the groups granted them (the
Watchers' view permissions among them) and the admin's history stay attached to them instead
of being made afresh for a new label.
"""

import django.db.models.deletion
import django.utils.timezone
from django.conf import settings
from django.db import migrations, models

MODELS = ("trackedworkflow", "phase", "task", "decision", "issue", "milestone")


def _relabel(apps, schema_editor, old, new):
    content_types = apps.get_model("contenttypes", "ContentType").objects.using(
        schema_editor.connection.alias
    )
    # A label already present (a server that ran post_migrate between the two) keeps its
    # row; only the old rows of the other models move.
    taken = set(
        content_types.filter(app_label=new, model__in=MODELS).values_list("model", flat=True)
    )
    content_types.filter(app_label=old, model__in=set(MODELS) - taken).update(app_label=new)


def forwards(apps, schema_editor):
    _relabel(apps, schema_editor, "workflows", "tracker")


def backwards(apps, schema_editor):
    _relabel(apps, schema_editor, "tracker", "workflows")


class Migration(migrations.Migration):
    initial = True

    dependencies = [
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
        ("contenttypes", "0002_remove_content_type_name"),
        ("workflows", "0015_agent_lease"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[],
            state_operations=[
                migrations.CreateModel(
                    name="Phase",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True,
                                primary_key=True,
                                serialize=False,
                                verbose_name="ID",
                            ),
                        ),
                        ("number", models.IntegerField()),
                        ("name", models.CharField(max_length=200)),
                        (
                            "status",
                            models.CharField(
                                choices=[
                                    ("PENDING", "Pending"),
                                    ("IN_PROGRESS", "In progress"),
                                    ("COMPLETED", "Completed"),
                                    ("FAILED", "Failed"),
                                ],
                                default="IN_PROGRESS",
                                max_length=16,
                            ),
                        ),
                        ("started_at", models.DateTimeField(blank=True, null=True)),
                        ("completed_at", models.DateTimeField(blank=True, null=True)),
                        ("created_at", models.DateTimeField(default=django.utils.timezone.now)),
                        (
                            "agent",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.PROTECT,
                                related_name="phases",
                                to="workflows.agent",
                            ),
                        ),
                        (
                            "project",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="phases",
                                to="workflows.project",
                            ),
                        ),
                    ],
                    options={
                        "db_table": "workflows_phase",
                    },
                ),
                migrations.CreateModel(
                    name="TrackedWorkflow",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True,
                                primary_key=True,
                                serialize=False,
                                verbose_name="ID",
                            ),
                        ),
                        ("name", models.CharField(max_length=200)),
                        ("objective", models.TextField(blank=True, default="")),
                        ("scope", models.TextField(blank=True, default="")),
                        ("constraints", models.TextField(blank=True, default="")),
                        (
                            "profile",
                            models.CharField(
                                choices=[
                                    ("SIMPLE", "Simple"),
                                    ("STANDARD", "Standard"),
                                    ("COMPLEX", "Complex"),
                                ],
                                default="STANDARD",
                                max_length=16,
                            ),
                        ),
                        (
                            "status",
                            models.CharField(
                                choices=[
                                    ("PENDING", "Pending"),
                                    ("IN_PROGRESS", "In progress"),
                                    ("COMPLETED", "Completed"),
                                    ("FAILED", "Failed"),
                                    ("PARTIAL", "Partially completed"),
                                    ("BLOCKED", "Blocked"),
                                ],
                                default="IN_PROGRESS",
                                max_length=16,
                            ),
                        ),
                        ("current_phase", models.IntegerField(default=0)),
                        ("total_phases", models.IntegerField(default=1)),
                        ("summary", models.TextField(blank=True, default="")),
                        ("achievements", models.JSONField(blank=True, default=list)),
                        ("limitations", models.JSONField(blank=True, default=list)),
                        (
                            "total_duration_ms",
                            models.BigIntegerField(
                                default=0,
                                help_text="Summed task time (parallel tasks count twice).",
                            ),
                        ),
                        ("total_tokens", models.BigIntegerField(default=0)),
                        ("created_at", models.DateTimeField(default=django.utils.timezone.now)),
                        ("updated_at", models.DateTimeField(default=django.utils.timezone.now)),
                        ("completed_at", models.DateTimeField(blank=True, null=True)),
                        (
                            "agent",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.PROTECT,
                                related_name="tracked_workflows",
                                to="workflows.agent",
                            ),
                        ),
                        (
                            "project",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="tracked_workflows",
                                to="workflows.project",
                            ),
                        ),
                    ],
                    options={
                        "db_table": "workflows_trackedworkflow",
                    },
                ),
                migrations.CreateModel(
                    name="Task",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True,
                                primary_key=True,
                                serialize=False,
                                verbose_name="ID",
                            ),
                        ),
                        ("name", models.CharField(max_length=200)),
                        ("goal", models.TextField()),
                        (
                            "status",
                            models.CharField(
                                choices=[
                                    ("IN_PROGRESS", "In progress"),
                                    ("SUCCESS", "Success"),
                                    ("PARTIAL_SUCCESS", "Partial success"),
                                    ("FAILED", "Failed"),
                                ],
                                default="IN_PROGRESS",
                                max_length=16,
                            ),
                        ),
                        (
                            "caller_type",
                            models.CharField(
                                blank=True,
                                choices=[
                                    ("ORCHESTRATOR", "Orchestrator"),
                                    ("SUBAGENT", "Sub-agent"),
                                ],
                                default="",
                                max_length=16,
                            ),
                        ),
                        ("agent_name", models.CharField(blank=True, default="", max_length=200)),
                        ("areas", models.JSONField(blank=True, default=list)),
                        (
                            "snapshot",
                            models.JSONField(
                                blank=True,
                                help_text="The project's state at start, to diff at completion.",
                                null=True,
                            ),
                        ),
                        ("files_changed", models.JSONField(blank=True, default=dict)),
                        ("scope_match", models.BooleanField(blank=True, null=True)),
                        ("unexpected_files", models.JSONField(blank=True, default=list)),
                        ("warnings", models.JSONField(blank=True, default=list)),
                        ("summary", models.TextField(blank=True, default="")),
                        ("achievements", models.JSONField(blank=True, default=list)),
                        ("limitations", models.JSONField(blank=True, default=list)),
                        ("next_steps", models.JSONField(blank=True, default=list)),
                        ("manual_review_needed", models.BooleanField(default=False)),
                        ("manual_review_reason", models.TextField(blank=True, default="")),
                        ("packages_added", models.JSONField(blank=True, default=list)),
                        ("packages_removed", models.JSONField(blank=True, default=list)),
                        ("commands_executed", models.JSONField(blank=True, default=list)),
                        (
                            "tests_status",
                            models.CharField(
                                blank=True,
                                choices=[
                                    ("PASSED", "Passed"),
                                    ("FAILED", "Failed"),
                                    ("NOT_RUN", "Not run"),
                                ],
                                default="",
                                max_length=16,
                            ),
                        ),
                        ("tokens_input", models.BigIntegerField(default=0)),
                        ("tokens_output", models.BigIntegerField(default=0)),
                        ("started_at", models.DateTimeField(default=django.utils.timezone.now)),
                        ("completed_at", models.DateTimeField(blank=True, null=True)),
                        ("duration_ms", models.BigIntegerField(blank=True, null=True)),
                        (
                            "agent",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.PROTECT,
                                related_name="tracked_tasks",
                                to="workflows.agent",
                            ),
                        ),
                        (
                            "parent",
                            models.ForeignKey(
                                blank=True,
                                null=True,
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="subtasks",
                                to="tracker.task",
                            ),
                        ),
                        (
                            "phase",
                            models.ForeignKey(
                                blank=True,
                                null=True,
                                on_delete=django.db.models.deletion.SET_NULL,
                                related_name="tasks",
                                to="tracker.phase",
                            ),
                        ),
                        (
                            "project",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="tracked_tasks",
                                to="workflows.project",
                            ),
                        ),
                        (
                            "workflow",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="tasks",
                                to="tracker.trackedworkflow",
                            ),
                        ),
                    ],
                    options={
                        "db_table": "workflows_task",
                    },
                ),
                migrations.AddField(
                    model_name="phase",
                    name="workflow",
                    field=models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="phases",
                        to="tracker.trackedworkflow",
                    ),
                ),
                migrations.CreateModel(
                    name="Milestone",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True,
                                primary_key=True,
                                serialize=False,
                                verbose_name="ID",
                            ),
                        ),
                        ("message", models.CharField(max_length=500)),
                        ("progress", models.FloatField(blank=True, null=True)),
                        ("metadata", models.JSONField(blank=True, default=dict)),
                        ("created_at", models.DateTimeField(default=django.utils.timezone.now)),
                        (
                            "agent",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.PROTECT,
                                related_name="milestones",
                                to="workflows.agent",
                            ),
                        ),
                        (
                            "project",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="milestones",
                                to="workflows.project",
                            ),
                        ),
                        (
                            "task",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="milestones",
                                to="tracker.task",
                            ),
                        ),
                        (
                            "workflow",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="milestones",
                                to="tracker.trackedworkflow",
                            ),
                        ),
                    ],
                    options={
                        "db_table": "workflows_milestone",
                    },
                ),
                migrations.CreateModel(
                    name="Issue",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True,
                                primary_key=True,
                                serialize=False,
                                verbose_name="ID",
                            ),
                        ),
                        (
                            "type",
                            models.CharField(
                                choices=[
                                    ("DOC_GAP", "Documentation gap"),
                                    ("BUG", "Bug encountered"),
                                    ("DEPENDENCY_CONFLICT", "Dependency conflict"),
                                    ("UNCLEAR_REQUIREMENT", "Unclear requirement"),
                                    ("OTHER", "Other"),
                                ],
                                max_length=24,
                            ),
                        ),
                        ("description", models.TextField()),
                        ("resolution", models.TextField(help_text="What the agent did about it.")),
                        ("requires_human_review", models.BooleanField(default=False)),
                        (
                            "human_resolution",
                            models.TextField(
                                blank=True,
                                default="",
                                help_text="A person's written answer to a blocker.",
                            ),
                        ),
                        ("resolved_at", models.DateTimeField(blank=True, null=True)),
                        ("created_at", models.DateTimeField(default=django.utils.timezone.now)),
                        (
                            "agent",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.PROTECT,
                                related_name="issues",
                                to="workflows.agent",
                            ),
                        ),
                        (
                            "project",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="issues",
                                to="workflows.project",
                            ),
                        ),
                        (
                            "resolved_by",
                            models.ForeignKey(
                                blank=True,
                                null=True,
                                on_delete=django.db.models.deletion.SET_NULL,
                                related_name="resolved_issues",
                                to=settings.AUTH_USER_MODEL,
                            ),
                        ),
                        (
                            "task",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="issues",
                                to="tracker.task",
                            ),
                        ),
                        (
                            "workflow",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="issues",
                                to="tracker.trackedworkflow",
                            ),
                        ),
                    ],
                    options={
                        "db_table": "workflows_issue",
                    },
                ),
                migrations.CreateModel(
                    name="Decision",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True,
                                primary_key=True,
                                serialize=False,
                                verbose_name="ID",
                            ),
                        ),
                        (
                            "category",
                            models.CharField(
                                choices=[
                                    ("ARCHITECTURE", "Architecture"),
                                    ("LIBRARY_CHOICE", "Library choice"),
                                    ("TRADE_OFF", "Trade-off"),
                                    ("WORKAROUND", "Workaround"),
                                    ("OTHER", "Other"),
                                ],
                                max_length=16,
                            ),
                        ),
                        ("question", models.TextField()),
                        ("options_considered", models.JSONField(blank=True, default=list)),
                        ("chosen", models.TextField()),
                        ("reasoning", models.TextField()),
                        ("trade_offs", models.TextField(blank=True, default="")),
                        ("created_at", models.DateTimeField(default=django.utils.timezone.now)),
                        (
                            "agent",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.PROTECT,
                                related_name="decisions",
                                to="workflows.agent",
                            ),
                        ),
                        (
                            "project",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="decisions",
                                to="workflows.project",
                            ),
                        ),
                        (
                            "task",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="decisions",
                                to="tracker.task",
                            ),
                        ),
                        (
                            "workflow",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="decisions",
                                to="tracker.trackedworkflow",
                            ),
                        ),
                    ],
                    options={
                        "db_table": "workflows_decision",
                    },
                ),
                migrations.AddIndex(
                    model_name="trackedworkflow",
                    index=models.Index(fields=["project", "-id"], name="wf_tracked_project_idx"),
                ),
                migrations.AddIndex(
                    model_name="trackedworkflow",
                    index=models.Index(
                        fields=["project", "status", "-id"], name="wf_tracked_status_idx"
                    ),
                ),
                migrations.AddConstraint(
                    model_name="trackedworkflow",
                    constraint=models.CheckConstraint(
                        condition=models.Q(
                            (
                                "status__in",
                                [
                                    "PENDING",
                                    "IN_PROGRESS",
                                    "COMPLETED",
                                    "FAILED",
                                    "PARTIAL",
                                    "BLOCKED",
                                ],
                            )
                        ),
                        name="wf_trackedworkflow_status_valid",
                    ),
                ),
                migrations.AddConstraint(
                    model_name="trackedworkflow",
                    constraint=models.CheckConstraint(
                        condition=models.Q(("profile__in", ["SIMPLE", "STANDARD", "COMPLEX"])),
                        name="wf_trackedworkflow_profile_valid",
                    ),
                ),
                migrations.AddConstraint(
                    model_name="trackedworkflow",
                    constraint=models.CheckConstraint(
                        condition=models.Q(("total_phases__gte", 1), ("total_phases__lte", 20)),
                        name="wf_trackedworkflow_total_phases_range",
                    ),
                ),
                migrations.AddIndex(
                    model_name="task",
                    index=models.Index(fields=["workflow", "-id"], name="wf_task_workflow_idx"),
                ),
                migrations.AddIndex(
                    model_name="task",
                    index=models.Index(
                        condition=models.Q(("status", "IN_PROGRESS")),
                        fields=["workflow", "id"],
                        name="wf_task_running_idx",
                    ),
                ),
                migrations.AddIndex(
                    model_name="task",
                    index=models.Index(fields=["parent", "status"], name="wf_task_subtasks_idx"),
                ),
                migrations.AddConstraint(
                    model_name="task",
                    constraint=models.CheckConstraint(
                        condition=models.Q(
                            ("status__in", ["IN_PROGRESS", "SUCCESS", "PARTIAL_SUCCESS", "FAILED"])
                        ),
                        name="wf_task_status_valid",
                    ),
                ),
                migrations.AddConstraint(
                    model_name="task",
                    constraint=models.CheckConstraint(
                        condition=models.Q(
                            models.Q(("completed_at__isnull", True), ("status", "IN_PROGRESS")),
                            models.Q(
                                models.Q(("status", "IN_PROGRESS"), _negated=True),
                                ("completed_at__isnull", False),
                            ),
                            _connector="OR",
                        ),
                        name="wf_task_completed_at_matches_status",
                    ),
                ),
                migrations.AddConstraint(
                    model_name="task",
                    constraint=models.CheckConstraint(
                        condition=models.Q(("caller_type__in", ["", "ORCHESTRATOR", "SUBAGENT"])),
                        name="wf_task_caller_type_valid",
                    ),
                ),
                migrations.AddConstraint(
                    model_name="task",
                    constraint=models.CheckConstraint(
                        condition=models.Q(
                            ("tests_status__in", ["", "PASSED", "FAILED", "NOT_RUN"])
                        ),
                        name="wf_task_tests_status_valid",
                    ),
                ),
                migrations.AddConstraint(
                    model_name="phase",
                    constraint=models.UniqueConstraint(
                        fields=("workflow", "number"), name="wf_phase_unique_number_per_workflow"
                    ),
                ),
                migrations.AddConstraint(
                    model_name="phase",
                    constraint=models.CheckConstraint(
                        condition=models.Q(
                            ("status__in", ["PENDING", "IN_PROGRESS", "COMPLETED", "FAILED"])
                        ),
                        name="wf_phase_status_valid",
                    ),
                ),
                migrations.AddConstraint(
                    model_name="phase",
                    constraint=models.CheckConstraint(
                        condition=models.Q(("number__gte", 1)), name="wf_phase_number_positive"
                    ),
                ),
                migrations.AddIndex(
                    model_name="milestone",
                    index=models.Index(
                        fields=["workflow", "-id"], name="wf_milestone_workflow_idx"
                    ),
                ),
                migrations.AddConstraint(
                    model_name="milestone",
                    constraint=models.CheckConstraint(
                        condition=models.Q(
                            ("progress__isnull", True),
                            models.Q(("progress__gte", 0), ("progress__lte", 100)),
                            _connector="OR",
                        ),
                        name="wf_milestone_progress_range",
                    ),
                ),
                migrations.AddIndex(
                    model_name="issue",
                    index=models.Index(fields=["workflow", "-id"], name="wf_issue_workflow_idx"),
                ),
                migrations.AddIndex(
                    model_name="issue",
                    index=models.Index(
                        condition=models.Q(
                            ("requires_human_review", True), ("resolved_at__isnull", True)
                        ),
                        fields=["workflow", "-id"],
                        name="wf_issue_blocker_idx",
                    ),
                ),
                migrations.AddConstraint(
                    model_name="issue",
                    constraint=models.CheckConstraint(
                        condition=models.Q(
                            (
                                "type__in",
                                [
                                    "DOC_GAP",
                                    "BUG",
                                    "DEPENDENCY_CONFLICT",
                                    "UNCLEAR_REQUIREMENT",
                                    "OTHER",
                                ],
                            )
                        ),
                        name="wf_issue_type_valid",
                    ),
                ),
                migrations.AddIndex(
                    model_name="decision",
                    index=models.Index(fields=["workflow", "-id"], name="wf_decision_workflow_idx"),
                ),
                migrations.AddConstraint(
                    model_name="decision",
                    constraint=models.CheckConstraint(
                        condition=models.Q(
                            (
                                "category__in",
                                [
                                    "ARCHITECTURE",
                                    "LIBRARY_CHOICE",
                                    "TRADE_OFF",
                                    "WORKAROUND",
                                    "OTHER",
                                ],
                            )
                        ),
                        name="wf_decision_category_valid",
                    ),
                ),
            ],
        ),
        migrations.RunPython(forwards, backwards),
    ]
