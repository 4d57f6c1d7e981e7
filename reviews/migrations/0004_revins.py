"""Copy each review's step id from its step run (the insights group verdicts by step without
joining the step runs), and index the reads of the reviews insights."""

from django.db import migrations, models
from django.db.models import OuterRef, Q, Subquery


def copy_step_ids(apps, schema_editor):
    ReviewResult = apps.get_model("reviews", "ReviewResult")
    StepRun = apps.get_model("workflows", "StepRun")
    db = schema_editor.connection.alias
    # One UPDATE with a correlated subquery: no review rows travel to Python.
    ReviewResult.objects.using(db).update(
        step_id=Subquery(
            StepRun.objects.using(db).filter(pk=OuterRef("step_run_id")).values("step_id")[:1]
        )
    )


class Migration(migrations.Migration):
    dependencies = [
        ("reviews", "0003_insights14"),
        ("workflows", "0011_insights14"),
    ]

    operations = [
        migrations.AddField(
            model_name="reviewresult",
            name="step_id",
            field=models.CharField(default="", max_length=255),
            preserve_default=False,
        ),
        migrations.RunPython(copy_step_ids, migrations.RunPython.noop, elidable=False),
        migrations.RemoveIndex(model_name="reviewresult", name="rv_result_created_idx"),
        migrations.AddIndex(
            model_name="reviewresult",
            index=models.Index(
                fields=[
                    "created_at",
                    "reviewer_kind",
                    "step_id",
                    "run_each",
                    "attempt",
                    "passed",
                    "step_run",
                    "duration_ms",
                ],
                name="rv_result_insights_idx",
            ),
        ),
        migrations.AddConstraint(
            model_name="reviewresult",
            constraint=models.CheckConstraint(
                condition=~Q(step_id=""), name="reviews_reviewresult_step_id_set"
            ),
        ),
    ]
