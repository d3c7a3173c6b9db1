"""Increases taken once over the longest span give every shorter span's ratios exactly."""

from __future__ import annotations

import random

from tritonguard.core.recurrence import (
    after,
    increases,
    per_scrape_ratio,
    pooled_points,
    pooled_ratio,
    ratio_points,
)
from tritonguard.core.series_store import Series


def _counter(rng: random.Random, times: list[float], born: int = 0) -> Series:
    series = Series("c", (), counter=True)
    value = rng.uniform(0, 1e6)
    for t in times[born:]:
        value += rng.choice([0.0, rng.uniform(0, 5e4)])
        series.add(t, value)
    return series


def test_cut_increases_match_the_span_computed_alone() -> None:
    """Cutting the longest span's increases to a shorter span gives that span's points.

    For random counters (some born late, some scrapes empty), the per-scrape and pooled
    points equal those of the shorter span taken alone, to the bit.
    """
    rng = random.Random(7)
    for _ in range(200):
        times = sorted({round(rng.uniform(0, 600), 3) for _ in range(rng.randint(2, 60))})
        num = [_counter(rng, times, rng.randint(0, 3)) for _ in range(rng.randint(1, 3))]
        den = [_counter(rng, times, rng.randint(0, 3)) for _ in range(rng.randint(1, 3))]
        end = times[-1]
        first = end - 600.0
        n_all, d_all = increases(num, first, end), increases(den, first, end)
        for start in (end - 30.0, end - 120.0, end - 600.0, times[len(times) // 2]):
            cut = after(n_all, start)
            assert ratio_points(cut, d_all) == per_scrape_ratio(num, den, start, end)
            assert pooled_points(cut, d_all, 12.0) == pooled_ratio(num, den, start, end, 12.0)
