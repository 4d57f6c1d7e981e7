"""Foreign keys that an index or unique constraint already leads with lose their own index."""

from django.db import migrations

from deepwork_site.migration_operations import DropForeignKeyIndex


class Migration(migrations.Migration):
    dependencies = [
        ("reviews", "0006_rounds_from_one"),
    ]

    operations = [
        DropForeignKeyIndex(model_name="reviewresult", name="step_run"),
        DropForeignKeyIndex(model_name="reviewresult", name="session"),
    ]
