"""The insight tallies' three models move here from ``workflows`` without touching a table.

The state is created as it stood after ``workflows`` 0016, with the table, constraint and index
names the tables already have, and no SQL runs; ``workflows`` 0017 then forgets the models. The
content type rows are relabelled, so the models' permissions, the groups granted them (the
Watchers' view permissions among them) and the admin's history stay attached to them instead
of being made afresh for a new label.
"""

import django.db.models.deletion
from django.db import migrations, models

MODELS = ("sessiontally", "agenttally", "steptimetally")


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
    _relabel(apps, schema_editor, "workflows", "insights")


def backwards(apps, schema_editor):
    _relabel(apps, schema_editor, "insights", "workflows")


PERIODS = [("day", "Day"), ("month", "Month")]


def _id():
    return models.BigAutoField(
        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
    )


def _copied_from_session():
    """The fields of ``workflows.models.CopiedFromSession``, as they stood."""
    return [
        ("generation", models.CharField(max_length=8)),
        ("job_name", models.CharField(max_length=255)),
        ("workflow_name", models.CharField(max_length=255)),
        (
            "job",
            models.ForeignKey(
                on_delete=django.db.models.deletion.CASCADE,
                related_name="+",
                to="workflows.job",
            ),
        ),
        (
            "project",
            models.ForeignKey(
                on_delete=django.db.models.deletion.CASCADE,
                related_name="+",
                to="workflows.project",
            ),
        ),
    ]


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
                    name="SessionTally",
                    fields=[
                        ("id", _id()),
                        *_copied_from_session(),
                        ("day", models.DateField()),
                        ("started", models.IntegerField(db_default=0, default=0)),
                        ("completed", models.IntegerField(db_default=0, default=0)),
                        ("aborted", models.IntegerField(db_default=0, default=0)),
                    ],
                    options={
                        "db_table": "workflows_sessiontally",
                        "constraints": [
                            models.UniqueConstraint(
                                fields=(
                                    "day",
                                    "project",
                                    "generation",
                                    "job",
                                    "job_name",
                                    "workflow_name",
                                ),
                                name="wf_sessiontally_key",
                            )
                        ],
                    },
                ),
                migrations.CreateModel(
                    name="AgentTally",
                    fields=[
                        ("id", _id()),
                        *_copied_from_session(),
                        ("period", models.CharField(choices=PERIODS, max_length=8)),
                        ("period_start", models.DateField()),
                        ("steps_finished", models.IntegerField(db_default=0, default=0)),
                        ("reviews_failed", models.IntegerField(db_default=0, default=0)),
                        ("sessions_aborted", models.IntegerField(db_default=0, default=0)),
                        (
                            "agent",
                            models.ForeignKey(
                                blank=True,
                                null=True,
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="+",
                                to="workflows.agent",
                            ),
                        ),
                    ],
                    options={
                        "db_table": "workflows_agenttally",
                        "indexes": [
                            models.Index(
                                fields=["period", "agent", "period_start"],
                                name="wf_agenttally_agent_idx",
                            )
                        ],
                        "constraints": [
                            models.CheckConstraint(
                                condition=models.Q(("period__in", ["day", "month"])),
                                name="wf_agenttally_period_valid",
                            ),
                            models.UniqueConstraint(
                                fields=(
                                    "period",
                                    "period_start",
                                    "project",
                                    "agent",
                                    "generation",
                                    "job",
                                    "job_name",
                                    "workflow_name",
                                ),
                                name="wf_agenttally_key",
                            ),
                        ],
                    },
                ),
                migrations.CreateModel(
                    name="StepTimeTally",
                    fields=[
                        ("id", _id()),
                        *_copied_from_session(),
                        ("period", models.CharField(choices=PERIODS, max_length=8)),
                        ("period_start", models.DateField()),
                        ("step_id", models.CharField(max_length=255)),
                        ("entry_index", models.IntegerField()),
                        ("bucket", models.IntegerField()),
                        ("runs", models.IntegerField(db_default=0, default=0)),
                    ],
                    options={
                        "db_table": "workflows_steptimetally",
                        "constraints": [
                            models.CheckConstraint(
                                condition=models.Q(("period__in", ["day", "month"])),
                                name="wf_steptimetally_period_valid",
                            ),
                            models.UniqueConstraint(
                                fields=(
                                    "period",
                                    "period_start",
                                    "project",
                                    "generation",
                                    "job",
                                    "job_name",
                                    "workflow_name",
                                    "step_id",
                                    "entry_index",
                                    "bucket",
                                ),
                                name="wf_steptimetally_key",
                            ),
                        ],
                    },
                ),
            ],
        ),
        migrations.RunPython(forwards, backwards),
    ]
