"""``ApiToken`` now belongs to ``accounts`` (its 0001 took over the state and the table):
forgotten here, with no SQL, so the table and its rows stay as they are."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("api", "0003_hosted15"),
        ("accounts", "0001_initial"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[],
            state_operations=[migrations.DeleteModel(name="ApiToken")],
        ),
    ]
