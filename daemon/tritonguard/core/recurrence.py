"""Per-scrape latency, spikes and their periodicity: the signs of recurring reloads."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise
from statistics import median

from tritonguard.core.series_store import Series


def per_scrape_ratio(
    num: Sequence[Series], den: Sequence[Series], start: float, end: float
) -> list[tuple[float, float]]:
    """Ratio of increases between consecutive scrapes (e.g. µs per request), summed over series."""
    totals_n: dict[float, float] = {}
    totals_d: dict[float, float] = {}
    for group, out in ((num, totals_n), (den, totals_d)):
        for s in group:
            for k in range(1, len(s.times)):
                t = s.times[k]
                if start < t <= end:
                    out[t] = out.get(t, 0.0) + s.values[k] - s.values[k - 1]
    points = []
    for t in sorted(totals_n):
        d = totals_d.get(t)
        if d is not None and d > 0:
            points.append((t, totals_n[t] / d))
    return points


@dataclass(frozen=True, slots=True)
class Recurrence:
    """Spikes found in a per-scrape series, and the period they recur at if regular."""

    spikes: tuple[float, ...]
    period_s: float | None
    cv: float | None
    typical: float


def find_spikes(
    points: Sequence[tuple[float, float]], factor: float, merge_s: float = 0.0
) -> Recurrence:
    """Spike onsets (runs of values above factor × median) and their regularity.

    Spikes closer than ``merge_s`` to the previous one belong to the same burst: a repository
    rewritten file by file is often loaded twice in a row, which is one disturbance, not two.
    """
    if len(points) < 4:
        return Recurrence((), None, None, 0.0)
    typical = median(v for _, v in points)
    onsets: list[float] = []
    last_high = float("-inf")
    for t, v in points:
        if typical > 0 and v >= factor * typical:
            if t - last_high > max(merge_s, 0.0) or not onsets:
                onsets.append(t)
            last_high = t
    period = cv = None
    if len(onsets) >= 3:
        gaps = [b - a for a, b in pairwise(onsets)]
        period = median(gaps)
        if period > 0:
            spread = median(abs(g - period) for g in gaps)
            cv = spread / period
    return Recurrence(tuple(onsets), period, cv, typical)
