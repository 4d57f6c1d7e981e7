"""Foreign keys that an index or unique constraint already leads with lose their own index."""

from django.db import migrations

from deepwork_site.migration_operations import DropForeignKeyIndex


class Migration(migrations.Migration):
    dependencies = [
        ("tracker", "0002_resolve_blocker_permission"),
    ]

    operations = [
        DropForeignKeyIndex(model_name="trackedworkflow", name="project"),
        DropForeignKeyIndex(model_name="phase", name="workflow"),
        DropForeignKeyIndex(model_name="task", name="workflow"),
        DropForeignKeyIndex(model_name="task", name="parent"),
        DropForeignKeyIndex(model_name="decision", name="workflow"),
        DropForeignKeyIndex(model_name="issue", name="workflow"),
        DropForeignKeyIndex(model_name="milestone", name="workflow"),
    ]
