"""``ApiToken`` moves here from ``api`` without touching its table.

The state is created as it stood after ``api`` 0003, with the table, constraint and index
names it already has, and no SQL runs; ``api`` 0004 then forgets the model. The content type
row is relabelled, so the model's permissions, the groups granted them and the admin's history
stay attached to it instead of being made afresh for a new label.
"""

import django.db.models.deletion
import django.utils.timezone
from django.conf import settings
from django.db import migrations, models

MODEL = "apitoken"


def _relabel(apps, schema_editor, old, new):
    content_types = apps.get_model("contenttypes", "ContentType").objects.using(
        schema_editor.connection.alias
    )
    # A label already present (a server that ran post_migrate between the two) keeps its
    # row; only the old row moves.
    if not content_types.filter(app_label=new, model=MODEL).exists():
        content_types.filter(app_label=old, model=MODEL).update(app_label=new)


def forwards(apps, schema_editor):
    _relabel(apps, schema_editor, "api", "accounts")


def backwards(apps, schema_editor):
    _relabel(apps, schema_editor, "accounts", "api")


class Migration(migrations.Migration):
    initial = True

    dependencies = [
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
        ("contenttypes", "0002_remove_content_type_name"),
        ("workflows", "0008_dw014"),
        ("api", "0003_hosted15"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[],
            state_operations=[
                migrations.CreateModel(
                    name="ApiToken",
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
                            "name",
                            models.CharField(
                                help_text="What the token is for, e.g. 'ci'.", max_length=100
                            ),
                        ),
                        ("prefix", models.CharField(editable=False, max_length=16)),
                        ("key_hash", models.CharField(editable=False, max_length=64)),
                        (
                            "created_at",
                            models.DateTimeField(
                                default=django.utils.timezone.now, editable=False
                            ),
                        ),
                        (
                            "last_used_at",
                            models.DateTimeField(blank=True, editable=False, null=True),
                        ),
                        (
                            "revoked_at",
                            models.DateTimeField(blank=True, editable=False, null=True),
                        ),
                        (
                            "mcp",
                            models.BooleanField(
                                default=False,
                                help_text="May connect to /mcp as an agent, with its own stack.",
                            ),
                        ),
                        (
                            "mcp_roles",
                            models.JSONField(
                                blank=True,
                                default=list,
                                help_text="Roles of this token's agent over MCP, e.g. "
                                '["swe", "qa"] (empty: none).',
                            ),
                        ),
                        (
                            "mcp_project",
                            models.ForeignKey(
                                blank=True,
                                help_text="The only project this token may use over MCP "
                                "(empty: any, named per request).",
                                null=True,
                                on_delete=django.db.models.deletion.PROTECT,
                                related_name="+",
                                to="workflows.project",
                            ),
                        ),
                        (
                            "user",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="api_tokens",
                                to=settings.AUTH_USER_MODEL,
                            ),
                        ),
                    ],
                    options={
                        "verbose_name": "API token",
                        "db_table": "api_apitoken",
                        "constraints": [
                            models.UniqueConstraint(
                                fields=("key_hash",), name="api_apitoken_unique_key_hash"
                            ),
                            models.UniqueConstraint(
                                condition=models.Q(("revoked_at__isnull", True)),
                                fields=("user", "name"),
                                name="api_apitoken_unique_live_name",
                            ),
                            models.CheckConstraint(
                                condition=models.Q(("name", ""), _negated=True),
                                name="api_apitoken_name_not_empty",
                            ),
                        ],
                    },
                ),
            ],
        ),
        migrations.RunPython(forwards, backwards),
    ]
