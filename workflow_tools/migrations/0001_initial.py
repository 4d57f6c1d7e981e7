"""The workflow tools' two models move here from ``workflows`` without touching a table.

The state is created as it stood after ``workflows`` 0016, with the table, constraint and index
names the tables already have, and no SQL runs; ``workflows`` 0017 then forgets the models. The
content type rows are relabelled, so the models' permissions, the groups granted them (the
Watchers' view permissions among them) and the admin's history stay attached to them instead
of being made afresh for a new label.
"""

import django.db.models.deletion
import django.utils.timezone
from django.db import migrations, models

MODELS = ("workflowtoolname", "workflowtoolfilter")


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
    _relabel(apps, schema_editor, "workflows", "workflow_tools")


def backwards(apps, schema_editor):
    _relabel(apps, schema_editor, "workflow_tools", "workflows")


class Migration(migrations.Migration):
    initial = True

    dependencies = [
        ("contenttypes", "0002_remove_content_type_name"),
        ("workflows", "0016_hand_over_tracker"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[],
            state_operations=[
                migrations.CreateModel(
                    name="WorkflowToolFilter",
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
                            "action",
                            models.CharField(
                                choices=[("include", "Include"), ("exclude", "Exclude")],
                                max_length=16,
                            ),
                        ),
                        (
                            "field",
                            models.CharField(
                                choices=[("name", "Name"), ("category", "Category")],
                                default="name",
                                max_length=16,
                            ),
                        ),
                        ("pattern", models.CharField(max_length=255)),
                        ("enabled", models.BooleanField(default=True)),
                        ("note", models.CharField(blank=True, default="", max_length=255)),
                        ("created_at", models.DateTimeField(default=django.utils.timezone.now)),
                    ],
                    options={
                        "db_table": "workflows_workflowtoolfilter",
                        "indexes": [
                            models.Index(
                                fields=["enabled", "id"], name="wf_toolfilter_enabled_idx"
                            )
                        ],
                        "constraints": [
                            models.UniqueConstraint(
                                fields=("action", "field", "pattern"),
                                name="wf_toolfilter_unique_rule",
                            ),
                            models.CheckConstraint(
                                condition=models.Q(("action__in", ["include", "exclude"])),
                                name="wf_toolfilter_action_valid",
                            ),
                            models.CheckConstraint(
                                condition=models.Q(("field__in", ["name", "category"])),
                                name="wf_toolfilter_field_valid",
                            ),
                        ],
                    },
                ),
                migrations.CreateModel(
                    name="WorkflowToolName",
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
                        ("workflow_key", models.CharField(max_length=512)),
                        ("tool_name", models.CharField(max_length=64)),
                        ("created_at", models.DateTimeField(default=django.utils.timezone.now)),
                        (
                            "project",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="workflow_tool_names",
                                to="workflows.project",
                            ),
                        ),
                    ],
                    options={
                        "db_table": "workflows_workflowtoolname",
                        "constraints": [
                            models.UniqueConstraint(
                                fields=("project", "workflow_key"), name="wf_toolname_unique_key"
                            ),
                            models.UniqueConstraint(
                                fields=("project", "tool_name"), name="wf_toolname_unique_name"
                            ),
                            models.CheckConstraint(
                                condition=models.Q(("tool_name__regex", "^[a-zA-Z0-9_-]{1,64}$")),
                                name="wf_toolname_name_valid",
                            ),
                        ],
                    },
                ),
            ],
        ),
        migrations.RunPython(forwards, backwards),
    ]
