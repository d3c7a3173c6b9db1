"""Quantiles from cumulative histogram buckets, the way Prometheus' histogram_quantile reads them."""

from __future__ import annotations

import math
from collections.abc import Iterable

from tritonguard.core.samples import label
from tritonguard.core.series_store import Series


def bucket_quantile(q: float, buckets: Iterable[tuple[float, float]]) -> float | None:
    """Return the ``q`` quantile of cumulative ``(le, count)`` buckets, or None.

    Linear interpolation inside the bucket holding the rank, as histogram_quantile does;
    a rank in the +Inf bucket returns the highest finite bound (the most the buckets can
    say). None without observations or without a finite bucket.
    """
    ordered = sorted(buckets)
    if not ordered or not math.isinf(ordered[-1][0]):
        return None  # without +Inf the total is unknown
    total = ordered[-1][1]
    if total <= 0:
        return None
    rank = q * total
    lower_bound, lower_count = 0.0, 0.0
    for le, count in ordered:
        if count >= rank:
            if math.isinf(le):
                return lower_bound if lower_count > 0 else None
            if count == lower_count:
                return le
            return lower_bound + (le - lower_bound) * (rank - lower_count) / (count - lower_count)
        lower_bound, lower_count = le, max(lower_count, count)
    return None


def window_quantile(series: Iterable[Series], q: float, start: float, end: float) -> float | None:
    """Return the ``q`` quantile of what ``_bucket`` series observed within [start, end].

    Buckets with the same ``le`` add up across the series given (versions of a model, or
    its pods), so a model's fleet-wide p99 is the quantile of its summed buckets, which
    per-pod summaries can never give.
    """
    by_le: dict[float, float] = {}
    for s in series:
        raw = label(s.labels, "le")
        try:
            le = float(raw)
        except ValueError:
            continue
        if math.isnan(le):
            continue
        d = s.delta(start, end)
        if d is not None:
            by_le[le] = by_le.get(le, 0.0) + d[0]
    return bucket_quantile(q, by_le.items())
