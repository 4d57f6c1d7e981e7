"""Written-out SQL for the statements every workflow transition runs.

A transition reads its session, its workflow's steps and its runs, and writes the session,
runs and events: a dozen small statements that the database answers in tens of microseconds
each, and that the ORM takes several times as long to build (a filtered ``.first()`` on a
session costs ~20x its SQL). On that path only, statements are written out through these
helpers; everywhere else the ORM stays.

They behave as the ORM would for the same rows: values are read back through the fields' and
the backend's converters (a ``JSONField`` is decoded, a SQLite timestamp becomes an aware
datetime), written through each field's ``pre_save`` and ``get_db_prep_save``, and instances
come from ``Model.from_db`` (fields not selected are deferred and load on first access, as with
``only()``). The SQL text of each shape, and its columns' converters, are built once per process
(converters depend on the backend and the settings, never on one connection's state).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from django.db import DEFAULT_DB_ALIAS, connections
from django.db.models import Field, Model

M = TypeVar("M", bound=Model)

_Converter = tuple[Any, Any]  # (converter, the column expression it is called with)


def _concrete(model: type[Model], names: Iterable[str] | None) -> tuple[Field[Any, Any], ...]:
    """The model's concrete fields named by ``names`` (attnames or names), in model order."""
    fields = model._meta.concrete_fields
    if names is None:
        return tuple(fields)
    wanted = set(names)
    picked = tuple(f for f in fields if f.attname in wanted or f.name in wanted)
    unknown = wanted - {f.attname for f in picked} - {f.name for f in picked}
    if unknown:
        raise ValueError(f"{model.__name__} has no concrete field {sorted(unknown)}")
    return picked


@dataclass(frozen=True)
class _Part:
    """One model's columns in a SELECT: the main model's, or a joined relation's."""

    model: type[Model]
    attnames: tuple[str, ...]
    converters: tuple[tuple[_Converter, ...], ...]
    relation: str  # the foreign key it is set on ("" for the main model)


def _part(
    connection: Any,
    model: type[Model],
    fields: tuple[Field[Any, Any], ...],
    table: str,
    relation: str,
) -> _Part:
    converters = []
    for field in fields:
        column = field.get_col(table)
        # The backend's converters, then the field's: what the ORM's compiler applies.
        found = connection.ops.get_db_converters(column) + column.get_db_converters(connection)
        converters.append(tuple((convert, column) for convert in found))
    return _Part(model, tuple(f.attname for f in fields), tuple(converters), relation)


def _is_model(value: Any) -> bool:
    return isinstance(value, type) and issubclass(value, Model)


@functools.cache
def _select(
    alias: str,
    model: type[Model],
    names: tuple[str, ...] | None,
    where: str,
    order_by: str,
    limit: int | None,
    join: str,
    annotate: tuple[tuple[str, str], ...],
    related: tuple[tuple[str, tuple[str, ...] | None], ...],
) -> tuple[str, tuple[_Part, ...]]:
    connection = connections[alias]
    quote = connection.ops.quote_name
    fields = _concrete(model, names)
    table = quote(model._meta.db_table)
    # Columns are named with their table, so ``join`` may bring in others.
    columns = [f"{table}.{quote(f.column)}" for f in fields]
    parts = [_part(connection, model, fields, model._meta.db_table, "")]
    joins = []
    for relation, related_names in related:
        key = model._meta.get_field(relation)
        target = key.related_model
        if not isinstance(key, Field) or key.null or not _is_model(target):
            raise ValueError(f"{model.__name__}.{relation} is not a required foreign key")
        assert isinstance(target, type)
        assert issubclass(target, Model)
        other = f"rel_{relation}"
        target_fields = _concrete(target, related_names)
        columns += [f"{other}.{quote(f.column)}" for f in target_fields]
        assert target._meta.pk is not None
        joins.append(
            f"JOIN {quote(target._meta.db_table)} {other} "
            f"ON {other}.{quote(target._meta.pk.column)} = {table}.{quote(key.column)}"
        )
        parts.append(_part(connection, target, target_fields, other, relation))
    columns += [expression for _, expression in annotate]
    sql = f"SELECT {', '.join(columns)} FROM {table} {' '.join([*joins, join])} WHERE {where}"
    if order_by:
        sql += f" ORDER BY {order_by}"
    if limit is not None:
        sql += f" LIMIT {int(limit)}"
    return sql, tuple(parts)


def select_models(
    model: type[M],
    *,
    where: str,
    params: Sequence[Any],
    fields: Iterable[str] | None = None,
    order_by: str = "",
    limit: int | None = None,
    join: str = "",
    annotate: Mapping[str, str] | None = None,
    related: Mapping[str, Iterable[str] | None] | None = None,
    using: str = DEFAULT_DB_ALIAS,
) -> list[M]:
    """Instances of ``model`` for ``SELECT <fields> FROM <table> <join> WHERE <where>``.

    ``where``, ``order_by``, ``join`` and ``annotate``'s expressions are literal SQL with
    ``%s`` placeholders (the statement is built once per shape), never built from values.
    ``fields`` defaults to every concrete field; the others are deferred. ``annotate`` maps
    attribute names to expressions (e.g. a joined table's column), set on each instance as
    read, as ``QuerySet.annotate`` does. ``related`` names required foreign keys whose rows
    come in the same query (with those of their fields, all if None), as ``select_related``
    does; a joined table is named ``rel_<foreign key>`` in ``where``.
    """
    names = None if fields is None else tuple(fields)
    extra = tuple((annotate or {}).items())
    joined = tuple(
        (relation, None if wanted is None else tuple(wanted))
        for relation, wanted in (related or {}).items()
    )
    sql, parts = _select(using, model, names, where, order_by, limit, join, extra, joined)
    connection = connections[using]
    with connection.cursor() as cursor:
        cursor.execute(sql, list(params))
        rows = cursor.fetchall()
    found = []
    for row in rows:
        start = 0
        instance: Any = None
        for part in parts:
            values = list(row[start : start + len(part.attnames)])
            start += len(part.attnames)
            for i, column_converters in enumerate(part.converters):
                for convert, column in column_converters:
                    values[i] = convert(values[i], column, connection)
            read = part.model.from_db(using, part.attnames, values)
            if part.relation:
                setattr(instance, part.relation, read)
            else:
                instance = read
        for (name, _), value in zip(extra, row[start:], strict=True):
            setattr(instance, name, value)
        found.append(instance)
    return found


def select_model(
    model: type[M],
    *,
    where: str,
    params: Sequence[Any],
    fields: Iterable[str] | None = None,
    order_by: str = "",
    related: Mapping[str, Iterable[str] | None] | None = None,
    using: str = DEFAULT_DB_ALIAS,
) -> M | None:
    """The first instance ``select_models`` finds, or None."""
    found = select_models(
        model,
        where=where,
        params=params,
        fields=fields,
        order_by=order_by,
        limit=1,
        related=related,
        using=using,
    )
    return found[0] if found else None


# Fields whose prepared value is the value itself when it already has this type (what
# ``get_db_prep_save`` does for them, without its calls): most of a row's columns.
_AS_IS: dict[str, type] = {
    "CharField": str,
    "TextField": str,
    "SlugField": str,
    "BooleanField": bool,
    "IntegerField": int,
    "BigIntegerField": int,
    "SmallIntegerField": int,
    "PositiveIntegerField": int,
    "PositiveBigIntegerField": int,
    "PositiveSmallIntegerField": int,
    "ForeignKey": int,
}


def prepared_value(field: Field[Any, Any], value: Any, connection: Any) -> Any:
    """``value`` as ``field.get_db_prep_save`` would hand it to the database (for a statement
    written out elsewhere, e.g. an ``INSERT ... SELECT``)."""
    if value is None:
        return None
    kind = _AS_IS.get(field.get_internal_type())
    if kind is not None and (type(value) is kind or (kind is str and isinstance(value, str))):
        return value
    return field.get_db_prep_save(value, connection)


@functools.cache
def _insert(alias: str, model: type[Model], rows: int) -> tuple[str, tuple[Field[Any, Any], ...]]:
    connection = connections[alias]
    quote = connection.ops.quote_name
    fields = tuple(f for f in model._meta.concrete_fields if not f.primary_key)
    one = "(" + ", ".join(["%s"] * len(fields)) + ")"
    pk = model._meta.pk
    assert pk is not None
    sql = (
        f"INSERT INTO {quote(model._meta.db_table)} "
        f"({', '.join(quote(f.column) for f in fields)}) VALUES {', '.join([one] * rows)} "
        f"RETURNING {quote(pk.column)}"
    )
    return sql, fields


@functools.cache
def _batch_size(alias: str, model: type[Model]) -> int:
    """Rows per INSERT within the backend's parameter limit (at most 1000: a backend without
    one answers with the number of rows it is shown)."""
    connection = connections[alias]
    fields = list(_insert(alias, model, 1)[1])
    return max(1, connection.ops.bulk_batch_size(fields, [None] * 1000))


def insert_models(objs: Sequence[M], *, using: str = DEFAULT_DB_ALIAS) -> None:
    """Insert new instances of one model and give each its primary key, as ``bulk_create``
    does (no signals; every field's default and ``pre_save`` apply), in as few statements as
    the backend's parameter limit allows."""
    if not objs:
        return
    model = type(objs[0])
    connection = connections[using]
    size = _batch_size(using, model) if len(objs) > 1 else 1
    for start in range(0, len(objs), size):
        batch = objs[start : start + size]
        sql, fields = _insert(using, model, len(batch))
        params: list[Any] = [
            prepared_value(f, f.pre_save(obj, True), connection) for obj in batch for f in fields
        ]
        with connection.cursor() as cursor:
            cursor.execute(sql, params)
            ids = cursor.fetchall()
        # Both backends return a multi-row INSERT's rows in VALUES order (bulk_create relies
        # on it too).
        for obj, (pk,) in zip(batch, ids, strict=True):
            obj.pk = pk
            obj._state.adding = False
            obj._state.db = using


@functools.cache
def _update(
    alias: str,
    model: type[Model],
    names: tuple[str, ...],
    where: str,
    extra: str,
    returning: tuple[str, ...] = (),
) -> tuple[str, tuple[Field[Any, Any], ...], _Part | None]:
    connection = connections[alias]
    quote = connection.ops.quote_name
    fields = tuple(_own_column(model, name) for name in names)
    assignments = [f"{quote(f.column)} = %s" for f in fields]
    if extra:
        assignments.insert(0, extra)
    sql = f"UPDATE {quote(model._meta.db_table)} SET {', '.join(assignments)} WHERE {where}"
    if not returning:
        return sql, fields, None
    back = _concrete(model, returning)
    sql += f" RETURNING {', '.join(quote(f.column) for f in back)}"
    return sql, fields, _part(connection, model, back, model._meta.db_table, "")


def _own_column(model: type[Model], name: str) -> Field[Any, Any]:
    field = model._meta.get_field(name)
    if not isinstance(field, Field) or not field.concrete:
        raise ValueError(f"{model.__name__}.{name} is not a column of its own")
    return field


def _execute_update(
    model: type[Model],
    values: Mapping[str, Any],
    where: str,
    params: Sequence[Any],
    extra: str,
    returning: tuple[str, ...],
    using: str,
) -> tuple[int, list[dict[str, Any]]]:
    connection = connections[using]
    sql, fields, back = _update(using, model, tuple(values), where, extra, returning)
    prepared = [
        prepared_value(field, value, connection)
        for field, value in zip(fields, values.values(), strict=True)
    ]
    with connection.cursor() as cursor:
        cursor.execute(sql, [*prepared, *params])
        if back is None:
            return int(cursor.rowcount), []
        found = cursor.fetchall()
    rows = []
    for row in found:
        read = list(row)
        for i, column_converters in enumerate(back.converters):
            for convert, column in column_converters:
                read[i] = convert(read[i], column, connection)
        rows.append(dict(zip(back.attnames, read, strict=True)))
    return len(rows), rows


def update_where(
    model: type[Model],
    *,
    values: Mapping[str, Any],
    where: str,
    params: Sequence[Any],
    extra: str = "",
    using: str = DEFAULT_DB_ALIAS,
) -> int:
    """``UPDATE <table> SET <values> WHERE <where>``; the number of rows it changed.

    ``values`` are plain values for the model's own columns, prepared by their fields as
    ``QuerySet.update`` would; ``extra`` is a literal assignment put first (e.g.
    ``revision = revision + 1``). Compare-and-set lives in ``where``.
    """
    return _execute_update(model, values, where, params, extra, (), using)[0]


def update_returning(
    model: type[Model],
    *,
    values: Mapping[str, Any],
    where: str,
    params: Sequence[Any],
    returning: Sequence[str],
    using: str = DEFAULT_DB_ALIAS,
) -> list[dict[str, Any]]:
    """``update_where`` that answers with the changed rows' ``returning`` fields (attname ->
    value, read back through the fields' converters as a query would), in one statement."""
    return _execute_update(model, values, where, params, "", tuple(returning), using)[1]
