"""Every foreign key of ours is indexed exactly once as a leading column.

A foreign key needs an index that leads with its column: deletes cascade through it and the
joins read it. Django gives each one a single-column index of its own unless told otherwise;
where a composite index (or unique constraint) without a condition already leads with the
column, that second index only costs a write on every insert, and on PostgreSQL on every
update that cannot stay HOT. Read from the models, then checked against the real database.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.apps import apps
from django.db import connection, models

OUR_APPS = {
    config.label for config in apps.get_app_configs() if not config.name.startswith("django.")
}


def _leading_fields(model: type[models.Model]) -> set[str]:
    """Names of the fields an unconditional index or unique constraint of ``model`` leads with."""
    meta = model._meta
    leading = {index.fields[0].lstrip("-") for index in meta.indexes if not index.condition}
    leading |= {
        constraint.fields[0]
        for constraint in meta.constraints
        if isinstance(constraint, models.UniqueConstraint)
        and constraint.fields
        and constraint.condition is None
    }
    leading |= {together[0] for together in meta.unique_together}
    return leading


def _foreign_keys() -> list[tuple[type[models.Model], Any]]:
    return [
        (model, field)
        for model in apps.get_models()
        if model._meta.app_label in OUR_APPS and not (model._meta.auto_created or model._meta.proxy)
        for field in model._meta.concrete_fields
        if isinstance(field, models.ForeignKey)
    ]


def _redundant(model: type[models.Model], field: Any) -> bool:
    return bool(field.db_index) and field.name in _leading_fields(model)


def test_every_foreign_key_leads_an_index():
    unindexed = [
        f"{model._meta.label}.{field.name}"
        for model, field in _foreign_keys()
        if not (field.db_index or field.unique or field.name in _leading_fields(model))
    ]
    assert unindexed == []


def test_no_foreign_key_has_a_second_index_leading_with_it():
    redundant = [
        f"{model._meta.label}.{field.name}"
        for model, field in _foreign_keys()
        if _redundant(model, field)
    ]
    assert redundant == []


def test_the_rule_sees_a_planted_redundant_index():
    """The check above is not vacuous: a key with its own index and a composite one is caught."""
    from workflows.models import Event

    session = Event._meta.get_field("session")
    declared = session.db_index
    session.db_index = True
    try:
        assert _redundant(Event, session)
    finally:
        session.db_index = declared


@pytest.mark.django_db
def test_the_database_has_no_single_column_index_on_a_covered_key():
    """The migrations dropped what the models no longer declare, on this database."""
    strays = []
    with connection.cursor() as cursor:
        for model, field in _foreign_keys():
            if field.db_index or field.unique:
                continue
            table = model._meta.db_table
            for name, found in connection.introspection.get_constraints(cursor, table).items():
                if (
                    found["index"]
                    and not found["primary_key"]
                    and found["columns"] == [field.column]
                ):
                    strays.append(f"{table}.{name}")
    assert strays == []


def _single_column_indexes(table: str, column: str) -> list[str]:
    with connection.cursor() as cursor:
        found = connection.introspection.get_constraints(cursor, table)
    return sorted(
        name
        for name, info in found.items()
        if info["index"] and not info["primary_key"] and info["columns"] == [column]
    )


@pytest.mark.django_db(transaction=True)
def test_the_drop_goes_back_and_forth_keeping_rows_and_the_table(project, agent):
    """Back before the drop the key has its own index again, under the name Django gives it;
    forward it is gone, the rows are all there and the table was not rebuilt (same rowids on
    SQLite, same physical ids on PostgreSQL)."""
    from tests.support.driving import workflow_start
    from tests.support.model_moves import every_row, migrate
    from workflows.models import Event

    workflow_start(project, agent)
    rows = every_row(Event)
    assert rows
    physical = (
        "SELECT rowid FROM workflows_event ORDER BY id"
        if connection.vendor == "sqlite"
        else "SELECT ctid::text FROM workflows_event ORDER BY id"
    )
    with connection.cursor() as cursor:
        cursor.execute(physical)
        where_before = cursor.fetchall()

    migrate([("workflows", "0019_history_free_reads")])
    try:
        restored = _single_column_indexes("workflows_event", "session_id")
        with connection.schema_editor() as editor:
            expected = editor._create_index_name("workflows_event", ["session_id"], suffix="")
        assert restored == [expected]
    finally:
        migrate()

    assert _single_column_indexes("workflows_event", "session_id") == []
    assert every_row(Event) == rows
    with connection.cursor() as cursor:
        cursor.execute(physical)
        assert cursor.fetchall() == where_before
