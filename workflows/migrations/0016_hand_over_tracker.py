"""The tracker's models now belong to ``tracker`` (its 0001 took over the state and the tables):
forgotten here, with no SQL, so the tables and their rows stay as they are. The models that
point at others go first, so no state in between has a dangling reference."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("workflows", "0015_agent_lease"),
        ("tracker", "0001_initial"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[],
            state_operations=[
                migrations.DeleteModel(name="Decision"),
                migrations.DeleteModel(name="Issue"),
                migrations.DeleteModel(name="Milestone"),
                migrations.DeleteModel(name="Task"),
                migrations.DeleteModel(name="Phase"),
                migrations.DeleteModel(name="TrackedWorkflow"),
            ],
        ),
    ]
