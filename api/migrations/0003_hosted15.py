from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("api", "0002_hosted"),
    ]

    operations = [
        migrations.AddField(
            model_name="apitoken",
            name="mcp_roles",
            field=models.JSONField(
                blank=True,
                default=list,
                help_text='Roles of this token\'s agent over MCP, e.g. ["swe", "qa"] (empty: none).',
            ),
        ),
    ]
