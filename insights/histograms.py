"""Duration histograms with buckets 2% wide on a log scale, for percentiles over more runs
than are worth sorting one by one.

A duration of d milliseconds falls in bucket floor(log(d) / log(1.02)); a bucket stands for
its geometric middle, which is within 1% of every duration in it. Buckets from different days
and months add up, so a percentile over a year needs only the bucket counts.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

RATIO = 1.02
_LOG_RATIO = math.log(RATIO)
# How far the middle of a bucket can be from a duration in it, as a share of the duration.
MAX_RELATIVE_ERROR = math.sqrt(RATIO) - 1


def bucket_of(seconds: float) -> int:
    """The bucket of a duration; anything under a millisecond counts as one."""
    millis = max(1.0, seconds * 1000)
    return math.floor(math.log(millis) / _LOG_RATIO)


def bucket_seconds(bucket: int) -> float:
    """The duration a bucket stands for."""
    return RATIO ** (bucket + 0.5) / 1000


def percentile(counts: Iterable[tuple[int, int]], *, fraction: float) -> float | None:
    """The nearest-rank percentile (the smallest value with at least ``fraction`` of the
    values at or below it) of ``(bucket, count)`` pairs, as the bucket's duration."""
    ordered = sorted(counts)
    total = sum(count for _, count in ordered)
    if total == 0:
        return None
    # The rank r is the smallest with r >= fraction * total; in integers for the usual cases.
    rank = max(1, math.ceil(round(fraction * total, 9)))
    seen = 0
    for bucket, count in ordered:
        seen += count
        if seen >= rank:
            return bucket_seconds(bucket)
    return bucket_seconds(ordered[-1][0])
