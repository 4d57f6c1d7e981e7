"""Answering a blocker an agent raised becomes the tracker's own permission,
``tracker.resolve_blocker``, instead of borrowing ``reviews.decide_review``.

The model option changes only the state (no SQL). So that nobody loses what they could do, every
group and person holding ``reviews.decide_review`` is granted the new permission here; on a fresh
database neither permission exists yet, and ``post_migrate`` makes both and gives them to the
Deciders group (``dashboard.apps.ensure_groups``).
"""

from django.conf import settings
from django.db import migrations

NAME = "Can resolve a blocker an agent raised"


def grant_to_deciders(apps, schema_editor):
    db = schema_editor.connection.alias
    permissions = apps.get_model("auth", "Permission").objects.using(db)
    decide = permissions.filter(
        content_type__app_label="reviews", codename="decide_review"
    ).first()
    if decide is None:
        return
    content_type, _ = (
        apps.get_model("contenttypes", "ContentType")
        .objects.using(db)
        .get_or_create(app_label="tracker", model="issue")
    )
    resolve, _ = permissions.get_or_create(
        content_type=content_type, codename="resolve_blocker", defaults={"name": NAME}
    )
    for group in apps.get_model("auth", "Group").objects.using(db).filter(permissions=decide):
        group.permissions.add(resolve)
    users = apps.get_model(settings.AUTH_USER_MODEL).objects.using(db)
    for user in users.filter(user_permissions=decide):
        user.user_permissions.add(resolve)


def forget(apps, schema_editor):
    # Before this migration the permission did not exist: the row goes, and its grants with it.
    apps.get_model("auth", "Permission").objects.using(schema_editor.connection.alias).filter(
        content_type__app_label="tracker", codename="resolve_blocker"
    ).delete()


class Migration(migrations.Migration):
    dependencies = [
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
        ("tracker", "0001_initial"),
    ]

    operations = [
        migrations.AlterModelOptions(
            name="issue",
            options={"permissions": [("resolve_blocker", NAME)]},
        ),
        migrations.RunPython(grant_to_deciders, forget),
    ]
