"""Median and p90 in the database, with how many values there were: nearest rank (the smallest
value with at least that share of the values at or below it), one query per figure.

PostgreSQL computes them with its ordered-set ``percentile_disc``; SQLite, which has none, with
the window functions both have (``ROW_NUMBER`` and ``COUNT`` over a partition), so that only
the one or two rows per group that hold a percentile leave the database.
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from django.db import connections
from django.db.models import (
    Aggregate,
    Count,
    DurationField,
    Expression,
    ExpressionWrapper,
    F,
    Q,
    QuerySet,
    Window,
)
from django.db.models.functions import RowNumber


def seconds(value: dt.timedelta | float | int | None) -> float | None:
    """A duration as seconds: PostgreSQL gives a timedelta, SQLite microseconds."""
    if value is None:
        return None
    if isinstance(value, dt.timedelta):
        return value.total_seconds()
    return float(value) / 1_000_000


def in_seconds(p: Percentiles | None, *, scale: float | None = None) -> Percentiles | None:
    """Durations as seconds: timedeltas or SQLite's microseconds, or numbers times ``scale``."""
    if p is None:
        return None
    if scale is not None:
        return Percentiles(p.count, p.median * scale, p.p90 * scale, p.extra)
    return Percentiles(p.count, seconds(p.median), seconds(p.p90), p.extra)


def duration(end: str, begin: str) -> ExpressionWrapper:
    return ExpressionWrapper(F(end) - F(begin), output_field=DurationField())


@dataclass(frozen=True)
class Percentiles:
    """Nearest-rank median and p90 of one group's values, how many values there were, and
    any ``extra`` fields the group's rows carry."""

    count: int
    median: Any
    p90: Any
    extra: dict[str, Any] = field(default_factory=dict)


class PercentileDisc(Aggregate):
    """PostgreSQL's ordered-set ``percentile_disc(p)``: the first value whose rank r has
    r >= p*n (PostgreSQL takes ``ceil(p*n)``), the nearest rank exactly as below. Two of them
    over the same ordering share one sort."""

    function = "percentile_disc"
    template = "%(function)s(%(fraction)s) WITHIN GROUP (ORDER BY %(expressions)s)"

    def __init__(self, expression: Expression | F, *, fraction: float, **extra: Any) -> None:
        super().__init__(expression, fraction=fraction, **extra)


def percentiles_by(
    queryset: QuerySet[Any],
    *,
    value: Expression | F,
    group: str | None = None,
    extra: Mapping[str, Aggregate] | None = None,
) -> dict[Any, Percentiles]:
    """Median and p90 of ``value`` per ``group`` (one group, ``None``, when not given), and
    each ``extra`` aggregate per group, in one query.

    PostgreSQL computes them with ``percentile_disc`` in one pass over the sorted values.
    Elsewhere (SQLite has no percentile aggregate) the rows are ranked with window functions
    and only the ranks that hold a percentile come back. Both take the nearest rank r of p in
    n values: the smallest r with r >= p*n; in integers, 2r >= n > 2(r-1) for the median and
    10r >= 9n > 10(r-1) for p90."""
    extra = dict(extra or {})
    if connections[queryset.db].vendor == "postgresql":
        output = value.output_field if hasattr(value, "output_field") else None
        grouped = queryset.values(*([group] if group else [])).order_by() if group else queryset
        aggregates = {
            "pct_count": Count("pk"),
            "pct_median": PercentileDisc(value, fraction=0.5, output_field=output),
            "pct_p90": PercentileDisc(value, fraction=0.9, output_field=output),
            **extra,
        }
        rows = list(grouped.annotate(**aggregates)) if group else [queryset.aggregate(**aggregates)]
        return {
            (row[group] if group else None): Percentiles(
                count=row["pct_count"],
                median=row["pct_median"],
                p90=row["pct_p90"],
                extra={name: row[name] for name in extra},
            )
            for row in rows
            if row["pct_count"]
        }
    partition = [F(group)] if group else []
    ranked = queryset.annotate(
        pct_value=value,
        pct_rank=Window(RowNumber(), partition_by=partition, order_by=value.asc()),
        pct_count=Window(Count("pk"), partition_by=partition),
        **{name: Window(aggregate, partition_by=partition) for name, aggregate in extra.items()},
    ).alias(
        pct_r2=F("pct_rank") * 2,
        pct_r10=F("pct_rank") * 10,
        pct_n=F("pct_count"),
        pct_n9=F("pct_count") * 9,
    )
    wanted = ranked.filter(
        Q(pct_r2__gte=F("pct_n"), pct_r2__lt=F("pct_n") + 2)
        | Q(pct_r10__gte=F("pct_n9"), pct_r10__lt=F("pct_n9") + 10)
    )
    fields = ["pct_value", "pct_rank", "pct_count", *([group] if group else []), *extra]
    found: dict[Any, dict[str, Any]] = defaultdict(dict)
    for row in wanted.values(*fields):
        key = row[group] if group else None
        n, rank = row["pct_count"], row["pct_rank"]
        slot = found[key]
        slot["count"] = n
        slot["extra"] = {name: row[name] for name in extra}
        if 2 * rank >= n > 2 * (rank - 1):
            slot["median"] = row["pct_value"]
        if 10 * rank >= 9 * n > 10 * (rank - 1):
            slot["p90"] = row["pct_value"]
    return {
        key: Percentiles(
            count=v["count"], median=v.get("median"), p90=v.get("p90"), extra=v["extra"]
        )
        for key, v in found.items()
    }
