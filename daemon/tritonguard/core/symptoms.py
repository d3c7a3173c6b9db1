"""The symptom gate: tail latency or queue time up against the subject's baseline or an SLO."""

from __future__ import annotations

from dataclasses import dataclass

from tritonguard.core.baselines import Baseline
from tritonguard.core.features import FeatureSet
from tritonguard.core.thresholds import Thresholds

# A share of request time spent queued above this is a request that waited longer than it
# computed: request time is queue time plus compute, so past half the wait dominates. No
# healthy server without a batcher's timer keeps requests waiting longer than their own
# work takes for long (an instance idle at least half the time takes each arrival at
# once), which makes it a symptom at any scale, without a baseline to compare with.
QUEUED_SHARE = 0.5


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
    # The window held enough requests to tell (``min_requests``): a window too thin to show a
    # symptom is no evidence of health either, and must not be learnt as the baseline.
    judged: bool = True


def symptom_of(
    f: FeatureSet,
    base: Baseline | None,
    t: Thresholds,
    recent: list[float] | None = None,
    queue_shares: list[float] | None = None,
) -> Symptom:
    """Tail latency or queue time up against the subject's own baseline, or an SLO.

    Noise-aware and scale-free: a window's mean latency, p99 or queue time is up when it
    exceeds the baseline's median by ``noise_k`` robust standard deviations of the baseline's
    own per-window values and by ``shift_floor`` of that median, with at least
    ``min_requests`` requests in the window. Queue time is measured against the baseline's
    latency, not its (often near-zero) queue. Without a baseline, requests that wait longer
    than they compute are a symptom at any scale, once ``rate_window_s`` is seen and in most
    of the newest scrapes (``queue_shares``, each scrape's queue share of request time in
    the window; None while the subject has been seen for less than ``rate_window_s``).
    ``recent`` holds the per-scrape mean latencies inside the current window, for the
    sustained check.
    """
    reasons: list[str] = []
    lat_r = p99_r = q_r = None
    enough = f.request_rate is not None and f.request_rate * f.window_s >= t.min_requests
    if base is not None and enough:
        base_lat = base.get("mean_latency_us")
        lat_r = base.ratio("mean_latency_us", f.mean_latency_us)
        above = base.abnormal_above("mean_latency_us", t.noise_k, t.shift_floor)
        if lat_r is not None and above is not None and (f.mean_latency_us or 0) > above:
            reasons.append(f"mean latency {lat_r:.1f}x baseline")
        p99_r = base.ratio("p99_us", f.p99_us)
        above = base.abnormal_above("p99_us", t.noise_k, t.p99_floor)
        if p99_r is not None and above is not None and (f.p99_us or 0) > above:
            reasons.append(f"p99 {p99_r:.1f}x baseline")
        base_q = base.get("mean_queue_us")
        if base_q is not None and base_lat and f.mean_queue_us is not None:
            sigma = 1.4826 * base.spreads.get("mean_queue_us", 0.0)
            rise = f.mean_queue_us - base_q
            q_r = (base_q + rise) / max(base_q, 1.0)
            if rise > max(t.noise_k * sigma, (t.shift_floor - 1.0) * base_lat):
                reasons.append(
                    f"queue time up {rise / base_lat:.0%} of the baseline latency "
                    f"({f.mean_queue_us / 1000:.1f} ms)"
                )
    elif (
        base is None
        and enough
        and (f.queue_share or 0.0) > QUEUED_SHARE
        and queue_shares is not None
        and _queued_now(queue_shares, t, f.interval_s)
    ):
        reasons.append(
            f"requests wait longer than they compute ({f.queue_share or 0:.0%} of request "
            "time queued) with no healthy history"
        )
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
        sustained = lower_tercile(recent) >= t.sustained_ratio * base_lat
    return Symptom(bool(reasons), tuple(reasons), sustained, lat_r, p99_r, q_r, judged=enough)


def queue_scrapes(t: Thresholds, interval_s: float) -> int:
    """How many of the newest scrapes the no-baseline queue check reads (see _queued_now)."""
    return min(t.fast_scrapes, max(1, round(t.rate_window_s / interval_s)))


def _queued_now(shares: list[float], t: Thresholds, interval_s: float) -> bool:
    """Whether requests still wait longer than they compute in most of the newest scrapes.

    More than half of the newest scrapes, the newest among them: a burst of queueing that has
    passed (a reload, a new server's first cold executions) still lifts the window's share,
    while a shortage that lasts keeps the newest scrapes queued from its first ones. The
    newest are ``fast_scrapes`` of them, or those of ``rate_window_s`` at coarser scrapes
    (one at 30 s): a transient lasts seconds whatever the interval, and a majority of
    three, not the fast path's ``fast_abnormal``, is the shortage's first 20 s at 10 s.
    """
    newest = shares[-queue_scrapes(t, interval_s) :]
    above = sum(1 for v in newest if v > QUEUED_SHARE)
    # A majority of the shares there: a source whose points are sparser than its interval
    # (a Prometheus read at its own cadence) holds fewer, and must still be read.
    return bool(newest) and newest[-1] > QUEUED_SHARE and 2 * above > len(newest)


def fast_symptom(
    latency: list[float], queue: list[float], base: Baseline, t: Thresholds, *, pooled: bool = False
) -> Symptom | None:
    """Return the short window's symptom when most of the newest scrapes are abnormal.

    ``latency`` and ``queue`` are the newest scrapes' own mean latency and queue time. A scrape
    is abnormal beyond the baseline's own per-scrape spread (``Baseline.abnormal_above``);
    ``fast_abnormal`` of ``fast_scrapes`` must be, the newest among them, so a shift that
    has already passed does not open anything. None when the baseline has no per-scrape
    history or the short window is not abnormal.

    ``pooled`` points (a quiet model's, see ``derive.low_rate_points``) are means of several
    scrapes' requests, at least as many as any of them held. The baseline learnt its
    per-scrape spread on single scrapes, so a pooled point varies less than that spread says
    (a mean of n requests spreads as 1/sqrt(n)): the per-scrape bar is conservative for it,
    never too low. Its centre is not the same, though: it is a mean of more requests, and
    on a skewed latency (a slow request now and then) the median of means of a request or two
    lies below the mean of many, so the pooled point would sit above the per-scrape median
    while healthy. It must therefore also clear the bar of the baseline's window mean
    (``mean_latency_us``, ``mean_queue_us``: means of ``min_requests`` or more, the centre
    a pooled mean has), the higher of the two bars.
    """
    reasons = []
    ratios: dict[str, float | None] = {"latency": None, "queue": None}
    for what, points, name, window_name in (
        ("latency", latency, "scrape_latency_us", "mean_latency_us"),
        ("queue", queue, "scrape_queue_us", "mean_queue_us"),
    ):
        limit = base.abnormal_above(name, t.noise_k, t.shift_floor)
        med = base.get(name)
        if limit is None or not med or len(points) < t.fast_scrapes:
            continue
        if pooled:
            window_limit = base.abnormal_above(window_name, t.noise_k, t.shift_floor)
            if window_limit is None:
                continue
            limit = max(limit, window_limit)
        newest = points[-t.fast_scrapes :]
        above = sum(1 for v in newest if v > limit)
        if above >= t.fast_abnormal and newest[-1] > limit:
            ratios[what] = sorted(newest)[len(newest) // 2] / med
            reasons.append(
                f"{what} up in {above} of the last {len(newest)} "
                f"{'pooled points' if pooled else 'scrapes'} "
                f"({ratios[what]:.1f}x the baseline's per-scrape median)"
            )
    if not reasons:
        return None
    return Symptom(True, tuple(reasons), True, ratios["latency"], None, ratios["queue"])


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
