from django.db import migrations
from django.db.models import F


def number_rounds_from_one(apps, schema_editor):
    # Verdicts given without a counted quality attempt (the agent's reason, a person's
    # changes, 0.14's asked and passed tasks) were numbered from 0. Each step run holding
    # such a verdict has all of its verdicts moved up by one, which keeps their order and
    # starts the run at round 1, as new verdicts are numbered.
    review = apps.get_model("reviews", "ReviewResult")
    rows = review.objects.using(schema_editor.connection.alias)
    from_zero = rows.filter(attempt=0).values("step_run_id")
    rows.filter(step_run_id__in=from_zero).update(attempt=F("attempt") + 1)


class Migration(migrations.Migration):
    dependencies = [("reviews", "0005_review_catalog")]

    operations = [
        # Not reversible exactly (which rows moved is not kept); going back leaves them as is.
        migrations.RunPython(number_rounds_from_one, migrations.RunPython.noop),
    ]
