"""The workflow tools' models now belong to ``workflow_tools`` (its 0001 took over the state and
the tables): forgotten here, with no SQL, so the tables and their rows stay as they are."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("workflows", "0017_hand_over_insights"),
        ("workflow_tools", "0001_initial"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[],
            state_operations=[
                migrations.DeleteModel(name="WorkflowToolName"),
                migrations.DeleteModel(name="WorkflowToolFilter"),
            ],
        ),
    ]
