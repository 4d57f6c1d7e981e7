"""Migration operations of our own, used by the apps' migrations.

Migrations import these the way they import Django's operations, so each one's meaning is
frozen once a migration uses it: change it only in ways that leave old migrations doing what
they did.
"""

from __future__ import annotations

from typing import Any

from django.db import migrations


class DropForeignKeyIndex(migrations.operations.base.Operation):
    """``AlterField(db_index=False)`` for a foreign key, dropping only its own index.

    For a key whose column an unconditional composite index or unique constraint already
    leads: the single-column index Django made for it serves no query the composite one does
    not, and costs a write on every insert. Django's ``AlterField`` would rebuild the whole table
    on SQLite to drop one index; this drops the index alone, on any database. Backwards it
    makes the index again, as Django names it.
    """

    reversible = True
    reduces_to_sql = True

    def __init__(self, model_name: str, name: str) -> None:
        self.model_name = model_name
        self.name = name

    @property
    def model_name_lower(self) -> str:
        return self.model_name.lower()

    def deconstruct(self) -> tuple[str, list[Any], dict[str, Any]]:
        return self.__class__.__qualname__, [], {"model_name": self.model_name, "name": self.name}

    def state_forwards(self, app_label: str, state: Any) -> None:
        field = state.models[app_label, self.model_name_lower].fields[self.name].clone()
        field.db_index = False
        state.alter_field(app_label, self.model_name_lower, self.name, field, True)

    def database_forwards(
        self, app_label: str, schema_editor: Any, from_state: Any, to_state: Any
    ) -> None:
        model = from_state.apps.get_model(app_label, self.model_name)
        if not self.allow_migrate_model(schema_editor.connection.alias, model):
            return
        field = model._meta.get_field(self.name)
        # Every plain index on the column alone (on PostgreSQL a text key has a second, for
        # LIKE), never an index the model declares by name.
        for index_name in schema_editor._constraint_names(
            model,
            [field.column],
            index=True,
            unique=False,
            primary_key=False,
            exclude={index.name for index in model._meta.indexes},
        ):
            schema_editor.execute(schema_editor._delete_index_sql(model, index_name))

    def database_backwards(
        self, app_label: str, schema_editor: Any, from_state: Any, to_state: Any
    ) -> None:
        model = to_state.apps.get_model(app_label, self.model_name)
        if not self.allow_migrate_model(schema_editor.connection.alias, model):
            return
        for statement in schema_editor._field_indexes_sql(model, model._meta.get_field(self.name)):
            schema_editor.execute(statement)

    def describe(self) -> str:
        return f"Drop the single-column index of {self.model_name}.{self.name}"

    @property
    def migration_name_fragment(self) -> str:
        return f"drop_{self.model_name_lower}_{self.name.lower()}_index"
