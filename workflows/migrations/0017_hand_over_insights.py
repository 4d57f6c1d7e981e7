"""The insight tallies now belong to ``insights`` (its 0001 took over the state and the
tables): forgotten here, with no SQL, so the tables and their rows stay as they are. No model
points at a tally, so they go in any order."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("workflows", "0016_hand_over_tracker"),
        ("insights", "0001_initial"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[],
            state_operations=[
                migrations.DeleteModel(name="AgentTally"),
                migrations.DeleteModel(name="SessionTally"),
                migrations.DeleteModel(name="StepTimeTally"),
            ],
        ),
    ]
