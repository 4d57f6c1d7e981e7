"""Foreign keys that an index or unique constraint already leads with lose their own index."""

from django.db import migrations

from deepwork_site.migration_operations import DropForeignKeyIndex


class Migration(migrations.Migration):
    dependencies = [
        ("workflow_tools", "0001_initial"),
    ]

    operations = [
        DropForeignKeyIndex(model_name="workflowtoolname", name="project"),
    ]
