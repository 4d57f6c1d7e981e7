"""The time between two timestamp columns, computed by the database itself on SQLite too.

Django subtracts timestamps on SQLite with a Python function (``django_timestamp_diff``) that
parses both strings on every call; a percentile query names the difference several times per
row (its value, the window's order, the filters on the rank), so over ten thousand rows the
parsing alone takes a third of a second. ``exact_duration`` gives the same microseconds from
SQLite's own date functions, and plain subtraction elsewhere.
"""

from __future__ import annotations

from typing import Any

from django.db.models import DurationField, F, Func
from django.db.models.expressions import Combinable


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
