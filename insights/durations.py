"""Durations between timestamps, and their percentiles, computed once per row on SQLite.

Django subtracts timestamps on SQLite with a Python function (``django_timestamp_diff``) that
parses both strings on every call; a percentile query names the difference several times per
row (its value, the window's order, the filters on the rank), so over ten thousand rows the
parsing alone takes a third of a second. ``exact_duration`` gives the same microseconds from
SQLite's own date functions, and plain subtraction elsewhere.

``percentiles_once`` is ``percentiles_by`` (same nearest ranks, same results) for values that
are costly to compute: on SQLite the rows are selected in a subquery and ranked outside it,
so each value is computed once, not once per window and per filter on the ranks.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.core.exceptions import EmptyResultSet
from django.db import connections
from django.db.models import DurationField, Expression, F, Func, Max, QuerySet
from django.db.models.expressions import Combinable

from insights.percentiles import Percentiles, percentiles_by


class ExactDuration(Func):
    """``end - begin`` as a duration, exactly to the microsecond on every backend."""

    arg_joiner = " - "
    template = "(%(expressions)s)"

    def __init__(self, end: Combinable | str, begin: Combinable | str) -> None:
        end = F(end) if isinstance(end, str) else end
        begin = F(begin) if isinstance(begin, str) else begin
        super().__init__(end, begin, output_field=DurationField())

    def as_sqlite(self, compiler: Any, connection: Any, **extra: Any) -> tuple[str, list[Any]]:
        # Django stores an SQLite timestamp as 'YYYY-MM-DD HH:MM:SS[.ffffff]' (or with three
        # digits when written by ``Now()``). Whole seconds come from the first 19 characters
        # (strftime would round a fraction of .9995 or more up to the next second), and the
        # fraction from the rest: six digits at most, so the rounded difference is exact.
        end_sql, end_params = compiler.compile(self.source_expressions[0])
        begin_sql, begin_params = compiler.compile(self.source_expressions[1])

        def whole(sql: str) -> str:
            return f"CAST(strftime('%%s', substr({sql}, 1, 19)) AS INTEGER)"

        def fraction(sql: str) -> str:
            return f"CAST(substr({sql}, 20) AS REAL)"

        sql = (
            f"(({whole(end_sql)} - {whole(begin_sql)}) * 1000000"
            f" + CAST(ROUND(({fraction(end_sql)} - {fraction(begin_sql)}) * 1000000) AS INTEGER))"
        )
        params = [*end_params, *begin_params, *end_params, *begin_params]
        return sql, params


def exact_duration(end: Combinable | str, begin: Combinable | str) -> ExactDuration:
    return ExactDuration(end, begin)


def percentiles_once(
    queryset: QuerySet[Any], *, value: Expression, group: str | None = None, largest: bool = False
) -> dict[Any, Percentiles]:
    """Median and p90 of ``value`` per ``group`` (one group, ``None``, when not given), and
    with ``largest`` the largest value (``extra["max"]``), in one query.

    PostgreSQL: ``percentiles_by`` (``percentile_disc``). SQLite: window functions over the
    rows of a subquery, keeping only the ranks that hold a percentile, the nearest rank r of p
    in n values as in ``percentiles_by`` (the smallest r with r >= p*n)."""
    connection = connections[queryset.db]
    if connection.vendor == "postgresql":
        extra = {"max": Max(value)} if largest else None
        return percentiles_by(queryset, value=value, group=group, extra=extra)
    names = [group] if group else []
    try:
        inner, params = (
            queryset.annotate(pct_value=value).values(*names, "pct_value").query.sql_with_params()
        )
    except EmptyResultSet:
        return {}
    key = f'"{group}"' if group else "NULL"
    # The inner query is Django's own, its values passed as parameters.
    sql = f"""
        SELECT pct_key, pct_value, pct_rank, pct_count, pct_max FROM (
            SELECT pct_key, pct_value,
                ROW_NUMBER() OVER (PARTITION BY pct_key ORDER BY pct_value) AS pct_rank,
                COUNT(*) OVER (PARTITION BY pct_key) AS pct_count,
                MAX(pct_value) OVER (PARTITION BY pct_key) AS pct_max
            FROM (SELECT {key} AS pct_key, "pct_value" AS pct_value FROM ({inner}))
        )
        WHERE (2 * pct_rank >= pct_count AND 2 * pct_rank < pct_count + 2)
            OR (10 * pct_rank >= 9 * pct_count AND 10 * pct_rank < 9 * pct_count + 10)
    """
    found: dict[Any, dict[str, Any]] = {}
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        for key_value, v, rank, n, top in cursor.fetchall():
            slot = found.setdefault(key_value, {"count": n, "max": top})
            if 2 * rank >= n > 2 * (rank - 1):
                slot["median"] = v
            if 10 * rank >= 9 * n > 10 * (rank - 1):
                slot["p90"] = v
    # Raw rows skip the field's converter: give durations as the field would.
    durations = isinstance(value.output_field, DurationField)

    def typed(v: Any) -> Any:
        return dt.timedelta(microseconds=v) if durations and v is not None else v

    return {
        k: Percentiles(
            count=slot["count"],
            median=typed(slot["median"]),
            p90=typed(slot["p90"]),
            extra={"max": typed(slot["max"])} if largest else {},
        )
        for k, slot in found.items()
    }
