from datetime import timedelta

from django.conf import settings
from django.db import migrations, models
from django.db.models import F


def lease_from_heartbeat(apps, schema_editor):
    # Every agent keeps the responsiveness it had under the rule before leases (its last
    # heartbeat at most DEEPWORK_AGENT_RESPONSIVE_SECONDS old); its next renewal sets its own.
    seconds = float(getattr(settings, "DEEPWORK_AGENT_RESPONSIVE_SECONDS", 300))
    Agent = apps.get_model("workflows", "Agent")
    Agent.objects.filter(heartbeat_at__isnull=False).update(
        lease_until=F("heartbeat_at") + timedelta(seconds=seconds)
    )


class Migration(migrations.Migration):
    dependencies = [
        ("workflows", "0014_abort_untold"),
    ]

    operations = [
        migrations.AddField(
            model_name="agent",
            name="lease_until",
            field=models.DateTimeField(
                blank=True,
                null=True,
                help_text="Responsive (gets DAG steps) until then; renewed by whoever "
                "heartbeats it.",
            ),
        ),
        migrations.AddField(
            model_name="agent",
            name="left_at",
            field=models.DateTimeField(
                blank=True, null=True, help_text="When its process last exited cleanly (gone)."
            ),
        ),
        migrations.RunPython(lease_from_heartbeat, migrations.RunPython.noop),
    ]
