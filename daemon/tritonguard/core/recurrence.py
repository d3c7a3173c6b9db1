"""Per-scrape latency, spikes and their periodicity: the signs of recurring reloads."""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise
from statistics import median

from tritonguard.core.series_store import Series


def per_scrape_ratio(
    num: Sequence[Series], den: Sequence[Series], start: float, end: float
) -> list[tuple[float, float]]:
    """Ratio of increases between consecutive scrapes (e.g. µs per request), summed over series."""
    return ratio_points(increases(num, start, end), increases(den, start, end))


def ratio_points(
    totals_n: dict[float, float], totals_d: dict[float, float]
) -> list[tuple[float, float]]:
    """Return :func:`per_scrape_ratio` from increases already taken (see :func:`increases`).

    Only the numerator's scrape times count, so the denominator's may span more: the
    increases over a span are those of any longer one at the times inside it.
    """
    points = []
    for t in sorted(totals_n):
        d = totals_d.get(t)
        if d is not None and d > 0:
            points.append((t, totals_n[t] / d))
    return points


def pooled_ratio(
    num: Sequence[Series], den: Sequence[Series], start: float, end: float, min_den: float
) -> list[tuple[float, float]]:
    """Ratio of increases over runs of consecutive scrapes, each holding ``min_den`` or more.

    Runs are formed from the newest scrape back, so the newest data always counts; the
    oldest scrapes, short of a whole run, are left out. Each point is stamped with its run's
    newest scrape. Where every scrape holds ``min_den`` on its own, this is
    :func:`per_scrape_ratio`.
    """
    return pooled_points(increases(num, start, end), increases(den, start, end), min_den)


def pooled_points(
    totals_n: dict[float, float], totals_d: dict[float, float], min_den: float
) -> list[tuple[float, float]]:
    """Return :func:`pooled_ratio` from increases already taken, as :func:`ratio_points`."""
    points: list[tuple[float, float]] = []
    acc_n = acc_d = 0.0
    newest: float | None = None
    for t in sorted(totals_n, reverse=True):
        d = totals_d.get(t)
        if d is None:
            continue
        newest = t if newest is None else newest
        acc_n += totals_n[t]
        acc_d += d
        if acc_d >= min_den and acc_d > 0:
            points.append((newest, acc_n / acc_d))
            acc_n = acc_d = 0.0
            newest = None
    points.reverse()
    return points


def after(totals: dict[float, float], start: float) -> dict[float, float]:
    """Return the increases at scrape times after ``start``: those of the span (start, end]."""
    return {t: v for t, v in totals.items() if t > start}


def increases(group: Sequence[Series], start: float, end: float) -> dict[float, float]:
    """Return each scrape time's increase in (start, end], summed over the series."""
    out: dict[float, float] = {}
    for n, s in enumerate(group):
        times, values = s.times, s.values
        # Times are strictly increasing: the points in (start, end] are one run of them.
        run = range(max(bisect_right(times, start), 1), bisect_right(times, end))
        if n == 0:
            # Nothing summed yet: every time starts from 0.0, as in the loop below.
            out = {times[k]: 0.0 + values[k] - values[k - 1] for k in run}
            continue
        for k in run:
            t = times[k]
            out[t] = out.get(t, 0.0) + values[k] - values[k - 1]
    return out


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
    period, cv = regularity(onsets)
    return Recurrence(tuple(onsets), period, cv, typical)


def regularity(onsets: Sequence[float]) -> tuple[float | None, float | None]:
    """Return the median spacing of sorted onsets and its spread: the widest gap's deviation.

    The spread is the largest |gap - median gap| over the median gap. A job or a poll that
    reloads at a period leaves every gap within a poll and a scrape of the period; random
    spikes (a Poisson process) do not. A robust spread (MAD) would forgive exactly the gaps
    that tell them apart: it passes 45 % of random four-spike sets at 0.35, the largest gap
    passes 5 % (``period_min_spikes``). None for both with fewer than three onsets; the
    spread is None when the onsets coincide.
    """
    period = cv = None
    if len(onsets) >= 3:
        gaps = [b - a for a, b in pairwise(onsets)]
        period = median(gaps)
        if period > 0:
            spread = max(abs(g - period) for g in gaps)
            cv = spread / period
    return period, cv
