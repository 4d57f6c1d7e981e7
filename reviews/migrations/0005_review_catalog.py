import django.db.models.deletion
from django.db import migrations, models
from django.db.models import OuterRef, Subquery

COPIED = ("project_id", "generation", "job_id", "job_name", "workflow_name")


def copy_from_sessions(apps, schema_editor):
    # One UPDATE: each verdict takes its session's project, generation, job and workflow.
    review = apps.get_model("reviews", "ReviewResult")
    session = apps.get_model("workflows", "WorkflowSession")
    own = session.objects.using(schema_editor.connection.alias).filter(pk=OuterRef("session_id"))
    review.objects.using(schema_editor.connection.alias).update(
        **{field: Subquery(own.values(field)[:1]) for field in COPIED}
    )


class Migration(migrations.Migration):
    dependencies = [
        ("reviews", "0004_revins"),
        ("workflows", "0012_insight_tallies"),
    ]

    operations = [
        migrations.AddField(
            model_name="reviewresult",
            name="project",
            field=models.ForeignKey(
                null=True,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="+",
                to="workflows.project",
            ),
        ),
        migrations.AddField(
            model_name="reviewresult",
            name="job",
            field=models.ForeignKey(
                null=True,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="+",
                to="workflows.job",
            ),
        ),
        migrations.AddField(
            model_name="reviewresult",
            name="generation",
            field=models.CharField(default="0.9", max_length=8),
            preserve_default=False,
        ),
        migrations.AddField(
            model_name="reviewresult",
            name="job_name",
            field=models.CharField(default="", max_length=255),
            preserve_default=False,
        ),
        migrations.AddField(
            model_name="reviewresult",
            name="workflow_name",
            field=models.CharField(default="", max_length=255),
            preserve_default=False,
        ),
        migrations.RunPython(copy_from_sessions, migrations.RunPython.noop),
        migrations.AlterField(
            model_name="reviewresult",
            name="project",
            field=models.ForeignKey(
                on_delete=django.db.models.deletion.CASCADE,
                related_name="+",
                to="workflows.project",
            ),
        ),
        migrations.AlterField(
            model_name="reviewresult",
            name="job",
            field=models.ForeignKey(
                on_delete=django.db.models.deletion.CASCADE,
                related_name="+",
                to="workflows.job",
            ),
        ),
    ]
