"""How a subject that started during observation began: its birth and its first executions."""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass

from tritonguard.core.features import FeatureReader, FeatureSet, SubjectKey
from tritonguard.core.recurrence import per_scrape_ratio
from tritonguard.core.samples import label
from tritonguard.core.series_store import Series
from tritonguard.core.thresholds import Thresholds

_COMPUTE = (
    "nv_inference_compute_input_duration_us",
    "nv_inference_compute_infer_duration_us",
    "nv_inference_compute_output_duration_us",
)


@dataclass(frozen=True, slots=True)
class Birth:
    """How a subject that started during observation began (new model, version or pod)."""

    born_at: float
    early: FeatureSet
    early_exec_peak_us: float | None
    latest_exec_us: float | None
    # Per-request compute quantiles soon after birth (summaries), robust to coarse scrapes.
    early_compute_p99_us: float | None = None
    early_compute_p50_us: float | None = None


def early_span(f: FeatureSet) -> float:
    """How long after its birth a subject's first executions count as early."""
    return max(30.0, 3 * f.interval_s)


def birth_of(
    reader: FeatureReader, key: SubjectKey, f: FeatureSet, now: float, t: Thresholds
) -> Birth | None:
    """Return the subject's most recent birth within ``cold_age_s``, or None."""
    succ = reader.series("nv_inference_request_success", key)
    starts = [s.born for s in succ if s.born is not None]
    starts += [r for s in succ for r in s.resets]
    starts = [b for b in starts if now - b <= t.cold_age_s]
    if not starts:
        return None
    appeared = max(starts)
    born = first_served(succ, appeared)
    span = early_span(f)
    # The early window runs a span from the series' birth, as always, and at least past the
    # first request's scrape (the window's floor, or one scrape when longer): a subject
    # that served at once keeps its window, and one that waited for traffic gets one.
    end = min(now, max(appeared + span, born + max(30.0, f.interval_s)))
    if end <= born:
        return None
    early = reader.compute(key, end=end, window=end - born)
    comp = [s for name in _COMPUTE for s in reader.series(name, key)]
    per_exec = per_scrape_ratio(comp, succ, born, now)
    early_pts = [v for at, v in per_exec if at <= born + span]
    if not early_pts:
        return None
    latest = per_exec[-1][1]
    tail = compute_tail(reader.series("nv_inference_compute_infer_summary_us", key), born, end)
    return Birth(born, early, max(early_pts), latest, *(tail or (None, None)))


def first_served(succ: list[Series], born: float) -> float:
    """Return when the subject began serving: the scrape before its first request after ``born``.

    A pod is Ready, and scraped, before the load balancer routes to it (a scale-out's new pod
    waits for its endpoints; a loaded model for its clients), so its series can appear tens
    of seconds before its first request. Its first executions, the cold ones, come with that
    request: the early window that judges them starts there, not at the empty series' birth.
    """
    first: float | None = None
    for s in succ:
        times, values = s.times, s.values
        i = bisect_left(times, born)
        if i >= len(times):
            continue
        start = values[i]
        for j in range(i + 1, len(times)):
            if values[j] > start:
                first = times[j - 1] if first is None else min(first, times[j - 1])
                break
    return born if first is None else max(born, first)


def compute_tail(series: list[Series], start: float, end: float) -> tuple[float, float] | None:
    """Return (p99, p50) of per-request compute at the scrape in [start, end] where they differ most.

    Triton's summaries cover roughly the last minute whatever the scrape interval, so a few
    executions that took seconds stand out in p99 even when a 30 s scrape dilutes them in the
    mean. Absent when the server runs without summary latencies.
    """
    by_q: dict[str, dict[tuple[tuple[str, str], ...], Series]] = {}
    for s in series:
        rest = tuple(kv for kv in s.labels if kv[0] != "quantile")
        by_q.setdefault(label(s.labels, "quantile"), {})[rest] = s
    best: tuple[float, float] | None = None
    for rest, hi in by_q.get("0.99", {}).items():
        lo = by_q.get("0.5", {}).get(rest)
        if lo is None:
            continue
        p50_at = dict(zip(lo.times, lo.values, strict=True))
        for at, p99 in zip(hi.times, hi.values, strict=True):
            p50 = p50_at.get(at)
            if (
                start <= at <= end
                and p50 is not None
                and p50 > 0
                and (best is None or p99 / p50 > best[0] / best[1])
            ):
                best = (p99, p50)
    return best
