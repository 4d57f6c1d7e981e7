"""The scheduler's proxy model and its permission to complete or fail human steps.

Those steps were done under ``reviews.decide_review`` before the scheduler had a permission of
its own; whoever held that (a group or a person) is granted the new one, so nobody loses what
they could do. The permission row is made here rather than left to ``post_migrate``, which runs
only after every migration: the grants need it now.
"""

from django.conf import settings
from django.db import migrations, models

CODENAME = "decide_human_step"
NAME = "Can complete or fail a DAG step assigned to people"


def _permission(apps, alias, app_label, model, codename):
    return (
        apps.get_model("auth", "Permission")
        .objects.using(alias)
        .filter(content_type__app_label=app_label, content_type__model=model, codename=codename)
        .first()
    )


def forwards(apps, schema_editor):
    alias = schema_editor.connection.alias
    content_type, _ = (
        apps.get_model("contenttypes", "ContentType")
        .objects.using(alias)
        .get_or_create(app_label="dag", model="dagrun")
    )
    permission, _ = (
        apps.get_model("auth", "Permission")
        .objects.using(alias)
        .get_or_create(content_type=content_type, codename=CODENAME, defaults={"name": NAME})
    )
    borrowed = _permission(apps, alias, "reviews", "reviewresult", "decide_review")
    if borrowed is None:  # a new install: the groups are given it after migrate
        return
    for group in apps.get_model("auth", "Group").objects.using(alias).filter(permissions=borrowed):
        group.permissions.add(permission)
    user_model = apps.get_model(settings.AUTH_USER_MODEL)
    for user in user_model.objects.using(alias).filter(user_permissions=borrowed):
        user.user_permissions.add(permission)


def backwards(apps, schema_editor):
    permission = _permission(apps, schema_editor.connection.alias, "dag", "dagrun", CODENAME)
    if permission is not None:
        permission.delete()


class Migration(migrations.Migration):
    initial = True

    dependencies = [
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
        ("reviews", "0006_rounds_from_one"),
        ("workflows", "0016_hand_over_tracker"),
    ]

    operations = [
        migrations.CreateModel(
            name="DagRun",
            fields=[],
            options={
                "verbose_name": "DAG run",
                "permissions": [(CODENAME, NAME)],
                "proxy": True,
                "indexes": [],
                "constraints": [],
            },
            bases=("workflows.workflowsession",),
            managers=[],
        ),
        migrations.RunPython(forwards, backwards),
    ]
