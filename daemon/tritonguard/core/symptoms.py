"""The symptom gate: tail latency or queue time up against the subject's baseline or an SLO."""

from __future__ import annotations

from dataclasses import dataclass

from tritonguard.core.baselines import Baseline
from tritonguard.core.features import FeatureSet
from tritonguard.core.thresholds import Thresholds


@dataclass(frozen=True, slots=True)
class Symptom:
    """Whether tail latency or queue time is up against the baseline or an SLO, and why."""

    up: bool
    reasons: tuple[str, ...]
    # Up for most scrapes of the window, not just through a few spikes: what a lasting cause
    # (capacity, contention, batching) produces, as opposed to reloads' recurring spikes.
    sustained: bool
    latency_ratio: float | None
    p99_ratio: float | None
    queue_ratio: float | None


def symptom_of(
    f: FeatureSet, base: Baseline | None, t: Thresholds, recent: list[float] | None = None
) -> Symptom:
    """Tail latency or queue time up against the model's own baseline or an SLO.

    ``recent`` holds the per-scrape mean latencies inside the current window.
    """
    reasons: list[str] = []
    lat_r = p99_r = q_r = None
    if base is not None:
        lat_r = base.ratio("mean_latency_us", f.mean_latency_us)
        base_lat = base.get("mean_latency_us")
        if (
            lat_r is not None
            and base_lat is not None
            and f.mean_latency_us is not None
            and lat_r >= t.symptom_latency_ratio
            and f.mean_latency_us - base_lat >= t.symptom_min_increase_us
        ):
            reasons.append(f"mean latency {lat_r:.1f}x baseline")
        p99_r = base.ratio("p99_us", f.p99_us)
        base_p99 = base.get("p99_us")
        if (
            p99_r is not None
            and base_p99 is not None
            and f.p99_us is not None
            and p99_r >= t.symptom_p99_ratio
            and f.p99_us - base_p99 >= t.symptom_min_increase_us
        ):
            reasons.append(f"p99 {p99_r:.1f}x baseline")
        q_r = base.ratio("mean_queue_us", f.mean_queue_us, floor=100.0)
        base_q = base.get("mean_queue_us") or 0.0
        if (
            q_r is not None
            and f.mean_queue_us is not None
            and q_r >= t.symptom_latency_ratio
            and f.mean_queue_us - base_q >= t.symptom_min_increase_us
        ):
            reasons.append(f"queue time {q_r:.1f}x baseline")
    elif f.mean_queue_us is not None and f.mean_queue_us >= t.no_baseline_queue_us:
        reasons.append(f"queue time {f.mean_queue_us / 1000:.0f} ms with no healthy history")
    if t.slo_p99_us is not None and f.p99_us is not None and f.p99_us > t.slo_p99_us:
        reasons.append(f"p99 {f.p99_us / 1000:.0f} ms over SLO {t.slo_p99_us / 1000:.0f} ms")
    if (
        t.slo_mean_us is not None
        and f.mean_latency_us is not None
        and f.mean_latency_us > t.slo_mean_us
    ):
        reasons.append(f"mean latency over SLO {t.slo_mean_us / 1000:.0f} ms")
    sustained = bool(reasons)
    base_lat = base.get("mean_latency_us") if base is not None else None
    if sustained and recent and base_lat:
        # Two thirds of the window's scrapes must be slow: spikes in every other scrape (reload
        # churn) lift the mean and even the median, but not the lower tercile.
        low = lower_tercile(recent)
        sustained = (
            low >= t.sustained_ratio * base_lat and low - base_lat >= t.sustained_min_increase_us
        )
    return Symptom(bool(reasons), tuple(reasons), sustained, lat_r, p99_r, q_r)


def lower_tercile(values: list[float]) -> float:
    """Return the 1/3 quantile (linear interpolation), the value two thirds of scrapes exceed."""
    ordered = sorted(values)
    pos = (len(ordered) - 1) / 3
    lo = int(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def is_shedding(f: FeatureSet, t: Thresholds) -> bool:
    """Return whether the server still turns a real share of requests away (queue policy REJECT).

    Such a server has not recovered, however good the latency of what it serves: resolving now
    would lift the shedding into the overload that caused it.
    """
    served = f.request_rate or 0.0
    rejected = f.failure_rejected or 0.0
    return rejected > 0 and rejected / (served + rejected) >= t.timeout_failure_share
