"""Foreign keys that an index or unique constraint already leads with lose their own index."""

from django.db import migrations

from deepwork_site.migration_operations import DropForeignKeyIndex


class Migration(migrations.Migration):
    dependencies = [
        ("workflows", "0019_history_free_reads"),
    ]

    operations = [
        DropForeignKeyIndex(model_name="agent", name="project"),
        DropForeignKeyIndex(model_name="job", name="project"),
        DropForeignKeyIndex(model_name="workflow", name="job"),
        DropForeignKeyIndex(model_name="step", name="job"),
        DropForeignKeyIndex(model_name="workflowstep", name="workflow"),
        DropForeignKeyIndex(model_name="jobloaderror", name="project"),
        DropForeignKeyIndex(model_name="workflowsession", name="project"),
        DropForeignKeyIndex(model_name="workflowsession", name="agent"),
        DropForeignKeyIndex(model_name="steprun", name="session"),
        DropForeignKeyIndex(model_name="steprun", name="assigned_agent"),
        DropForeignKeyIndex(model_name="event", name="project"),
        DropForeignKeyIndex(model_name="event", name="session"),
        DropForeignKeyIndex(model_name="sessionjob", name="project"),
    ]
