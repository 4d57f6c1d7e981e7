"""The check every move of models between apps passes: rows, tables, content types, group
grants and admin history survive migrating back to before the move and forward again.

A test builds its rows, calls ``grants_before_the_move`` (which records what a person was
granted on the models' content types), then ``assert_the_move_round_trips``, and goes on with
its app's own checks (a service still writing to the tables it reads).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.contrib.admin.models import CHANGE, LogEntry
from django.contrib.auth.models import Group, Permission, User
from django.contrib.contenttypes.models import ContentType
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.db.models import Model

OLD_APP = "workflows"


def migrate(targets: list[tuple[str, str | None]] | None = None) -> None:
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    # Without targets: every app to its latest migration, as the other tests expect.
    executor.migrate(targets or executor.loader.graph.leaf_nodes())
    ContentType.objects.clear_cache()


def _only(rows: list[dict[str, Any]], columns: list[str]) -> list[dict[str, Any]]:
    return [{column: row[column] for column in columns} for row in rows]


def every_row(model: Any, fields: list[str] | None = None) -> list[dict[str, Any]]:
    """Every row, every column (the current model's, unless ``fields`` names them), by id."""
    fields = fields or [field.attname for field in model._meta.concrete_fields]
    return list(model.objects.order_by("pk").values(*fields))


@dataclass
class Grants:
    """What a person held on the moved models before the move."""

    app: str
    content_types: dict[type[Model], ContentType]
    change: Permission
    editors: Group
    watched: set[int]
    history: LogEntry
    edited: Model


def _watched(app: str) -> set[int]:
    return set(
        Group.objects.get(name="Watchers")
        .permissions.filter(content_type__app_label=app)
        .values_list("pk", flat=True)
    )


def grants_before_the_move(
    *, app: str, models: list[type[Model]], edited: Model, person: User
) -> Grants:
    """A group granted "change" on ``edited``'s model, the Watchers' view permissions, and an
    admin history entry of ``person`` on ``edited``."""
    content_types = {m: ContentType.objects.get_for_model(m) for m in models}
    assert {ct.app_label for ct in content_types.values()} == {app}
    model = type(edited)
    change = Permission.objects.get(
        content_type=content_types[model], codename=f"change_{model._meta.model_name}"
    )
    editors = Group.objects.create(name=f"{model.__name__} editors")
    editors.permissions.add(change)
    watched = _watched(app)
    assert len(watched) == len(models)  # a view permission per model
    history = LogEntry.objects.create(
        user=person,
        content_type=content_types[model],
        object_id=str(edited.pk),
        object_repr=str(edited),
        action_flag=CHANGE,
        change_message="looked",
    )
    return Grants(app, content_types, change, editors, watched, history, edited)


def assert_the_move_round_trips(
    *,
    before: list[tuple[str, str | None]],
    expected: dict[type[Model], list[dict[str, Any]]],
    grants: Grants,
    person: User,
) -> None:
    """Back to ``before``: the same rows are the old app's, in the same tables, and the same
    content type rows carry the old label. Forward again: every row reads back through the new
    models, and the grants and history still point at them."""
    app, content_types = grants.app, grants.content_types
    migrate(before)
    # The columns the old app had: a field added since is dropped on the way back, and comes
    # back empty, so only these round-trip.
    kept: dict[type[Model], list[str]] = {}
    try:
        old = MigrationExecutor(connection).loader.project_state(before[0]).apps
        for model in expected:
            historical = old.get_model(OLD_APP, model.__name__)
            assert historical._meta.db_table == model._meta.db_table
            had = {field.attname for field in historical._meta.concrete_fields}
            columns = [f.attname for f in model._meta.concrete_fields if f.attname in had]
            kept[model] = columns
            assert every_row(historical, columns) == _only(expected[model], columns)
            assert ContentType.objects.get(pk=content_types[model].pk).app_label == OLD_APP
        assert not ContentType.objects.filter(app_label=app).exists()
    finally:
        migrate()

    for model in expected:
        assert every_row(model, kept[model]) == _only(expected[model], kept[model]), model

        assert model._meta.db_table == f"{OLD_APP}_{model._meta.model_name}"
        ct = ContentType.objects.get(pk=content_types[model].pk)
        assert (ct.app_label, ct.model) == (app, model._meta.model_name)
        assert ContentType.objects.filter(model=model._meta.model_name).count() == 1
    assert list(grants.editors.permissions.all()) == [grants.change]
    assert _watched(app) == grants.watched
    person = User.objects.get(pk=person.pk)
    person.groups.add(grants.editors, Group.objects.get(name="Watchers"))
    assert person.has_perm(f"{app}.{grants.change.codename}")
    for model in expected:
        assert person.has_perm(f"{app}.view_{model._meta.model_name}")
    assert LogEntry.objects.get(pk=grants.history.pk).get_edited_object() == grants.edited
