"""Signs that a model was (re)loaded while serving: resets, new versions, load times, cold bursts."""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from statistics import median

from tritonguard.core.features import FeatureReader, SubjectKey
from tritonguard.core.recurrence import per_scrape_ratio
from tritonguard.core.samples import label
from tritonguard.core.series_store import Series
from tritonguard.core.thresholds import Thresholds

# The kind of sign a scrape with cold executions in its compute summary leaves.
COLD_TAIL = "cold executions in the compute tail"
# Cold-looking executions while the node had no CPU to spare: a reload or a scheduling
# stall, which only a period among several can tell apart.
STALL = "cold executions on a saturated node"

# A pod's container restarts (kube-state-metrics), which explain its counter resets.
RESTARTS = "kube_pod_container_status_restarts_total"

_COMPUTE = (
    "nv_inference_compute_input_duration_us",
    "nv_inference_compute_infer_duration_us",
    "nv_inference_compute_output_duration_us",
)


def restarts_reach_s(t: Thresholds) -> float:
    """Return how far back the restarts that explain a reset are read: two period lookbacks.

    A reset in the lookback is matched against restarts from one more lookback before it.
    """
    return 2 * t.period_lookback_s


def restart_times(reader: FeatureReader, key: SubjectKey, horizon: float) -> list[float]:
    """Return when the pod's containers restarted (kube-state-metrics), within the horizon."""
    ns, pod, _ = key
    held = reader.restarts.get((ns, pod, horizon))
    if held is not None:
        return held
    out = []
    # Through the store's pod index: a scan of every pod's counters for every subject would
    # grow with the square of the fleet.
    for s in reader.pod_series(RESTARTS, ns, pod):
        times, values = s.times, s.values
        # Times are strictly increasing: the points at or after the horizon are one run.
        out += [
            times[k]
            for k in range(max(bisect_left(times, horizon), 1), len(times))
            if values[k] > values[k - 1]
        ]
    held = reader.restarts[(ns, pod, horizon)] = sorted(out)
    return held


def cold_bursts(
    comp: list[Series],
    succ: list[Series],
    latency: list[Series],
    *,
    horizon: float,
    now: float,
    t: Thresholds,
    healthy_us: float | None = None,
    per_request: list[tuple[float, float]] | None = None,
) -> list[float]:
    """Return when bursts of cold-like executions began while the model served.

    A reload that keeps counters (same version, poll mode) leaves no reset and no new series,
    only slow executions: scrapes whose compute per execution is at least
    ``reload_burst_compute`` times the model's median while latency spikes (``spike_factor``
    times the median). A cold load costs seconds where warm executions take milliseconds; even
    diluted in a 5-10 s scrape it doubles the scrape's compute, which queueing (too few
    instances) never does and batching moves by far less.

    A burst counts only once it is over, and only if it lasted at most ``reload_burst_max_s``
    and the model is warm again (``reload_warm_after``) in the scrape after it:
    cold executions end when the model is warm, while contention or a capacity change slows
    every scrape until it is removed, with the worst scrapes reading as bursts between
    merely slow ones. A burst still running is not yet a reload sign. Warm is judged
    against ``healthy_us`` (the baseline's compute per request) when it is lower than the
    median: a lasting slowdown becomes the median of the lookback, and its worst scrapes
    would then read as bursts ending in a "warm" model. The scrape before the burst must
    have served below the spike bar: a burst on latency already up (a batcher's delay, a
    backlog) is a stall within another fault, and the first scrape of the lookback, with
    nothing before it, starts no burst. ``per_request`` is
    ``per_scrape_ratio(latency, succ, horizon, now)`` when the caller already has it.
    """
    if per_request is None:
        per_request = per_scrape_ratio(latency, succ, horizon, now)
    per_req = dict(per_request)
    if len(per_req) < 4:
        return []
    usual = median(per_req.values())
    # A cold scrape needs its latency at the spike bar: with none there (nearly every
    # subject at nearly every tick), no scrape is cold whatever its compute, so the compute
    # counters' per-scrape ratio is not taken. Only for a positive bar: at or below zero a
    # scrape missing from ``per_req`` (read as 0.0) can reach it.
    bar = t.spike_factor * usual
    if bar > 0 and not any(v >= bar for v in per_req.values()):
        return []
    per_exec = per_scrape_ratio(comp, succ, horizon, now)
    if len(per_exec) < 4:
        return []
    typical = median(v for _, v in per_exec)
    if typical <= 0:
        return []
    reference = typical if healthy_us is None or healthy_us <= 0 else min(typical, healthy_us)
    cold = [
        v >= t.reload_burst_compute * typical and per_req.get(at, 0.0) >= bar for at, v in per_exec
    ]
    starts: list[float] = []
    k = 0
    while k < len(per_exec):
        if not cold[k]:
            k += 1
            continue
        first = k
        while k < len(per_exec) and cold[k]:
            k += 1
        short = per_exec[k - 1][0] - per_exec[first][0] <= t.reload_burst_max_s
        # Warm again in the scrape after the burst: a reload ends in a warm model,
        # contention in more slow scrapes.
        warm = k < len(per_exec) and per_exec[k][1] <= t.reload_warm_after * reference
        # And served below the spike bar in the scrape before it: a reload strikes a model
        # serving at its healthy latency. Once latency is already up for another reason
        # (requests waiting out a batcher's delay, a backlog), every scrape clears the bar
        # and one scheduling stall in the compute would read as a reload.
        floor = first > 0 and per_req.get(per_exec[first - 1][0], bar) < bar
        if short and warm and floor:
            starts.append(per_exec[first][0])
    return starts


def cold_tail_scrapes(
    summary: list[Series],
    infer: list[Series],
    succ: list[Series],
    *,
    horizon: float,
    now: float,
    t: Thresholds,
) -> list[float]:
    """Return scrapes whose compute was slow in a few executions, not in all (summaries).

    At 10 s scrapes and coarser a reload's spike aliases away in the mean, but the summary
    still tells a few very slow executions from all executions slower: a scrape whose
    per-request compute (counters) is at least ``tail_mean_over_p50`` times the summary's
    p50, while the summary's p99 is at least ``tail_p99_over_mean`` times that mean. Cold
    executions among warm ones do both; contention and too many instances slow every
    execution, which lifts the mean toward the p99 and fails the second.
    """
    low, high = t.tail_mean_over_p50, t.tail_p99_over_mean
    # Both bars together need p99 >= high x low x p50 at the scrape (multiplying by a factor
    # of 0 or more keeps an order between floats, so mean >= low x p50 gives high x mean >=
    # high x (low x p50)): where no scrape's summary reaches that, none is a cold tail
    # whatever its mean, and the counters' per-scrape ratio is not taken.
    exact = low >= 0 and high >= 0
    if exact and _no_tail(summary, horizon, now, low, high):
        return []
    p50: dict[float, float] = {}
    p99: dict[float, float] = {}
    for s in summary:
        q = label(s.labels, "quantile")
        into = p50 if q == "0.5" else p99 if q == "0.99" else None
        if into is None:
            continue
        times, values = s.times, s.values
        # Times are strictly increasing: the points in (horizon, now] are one run of them.
        for k in range(bisect_right(times, horizon), bisect_right(times, now)):
            at = times[k]
            into[at] = into.get(at, 0.0) + values[k]
    if exact and not any(
        lo and (hi := p99.get(at)) and hi >= high * (low * lo) for at, lo in p50.items()
    ):
        return []
    out = []
    for at, mean in per_scrape_ratio(infer, succ, horizon, now):
        lo, hi = p50.get(at), p99.get(at)
        if lo and hi and mean >= t.tail_mean_over_p50 * lo and hi >= t.tail_p99_over_mean * mean:
            out.append(at)
    return out


def _no_tail(summary: list[Series], horizon: float, now: float, low: float, high: float) -> bool:
    """Whether surely no scrape in (horizon, now] has p99 >= ``high`` x (``low`` x p50).

    For one p50 and one p99 series, as a Triton exports them, read from their extremes
    without the per-scrape sums: the bar grows with the p50, so no scrape reaches it when
    the highest p99 is below the bar of the lowest p50. False (not sure) otherwise, and when
    a zero p50 (no bar) or a NaN (min and max then depend on where it stands) is in the way.
    """
    p50: list[Series] = []
    p99: list[Series] = []
    for s in summary:
        q = label(s.labels, "quantile")
        if q == "0.5":
            p50.append(s)
        elif q == "0.99":
            p99.append(s)
    if len(p50) != 1 or len(p99) != 1:
        return False
    (lo_s,), (hi_s,) = p50, p99
    lows = lo_s.values[bisect_right(lo_s.times, horizon) : bisect_right(lo_s.times, now)]
    highs = hi_s.values[bisect_right(hi_s.times, horizon) : bisect_right(hi_s.times, now)]
    if not lows or not highs:
        return True
    least, most = min(lows), max(highs)
    # NaN never passes a bar, but a NaN first in line is what min or max returns: the
    # comparison is then False and the full check runs.
    return bool(least) and most < high * (low * least)


def reload_events(
    reader: FeatureReader,
    key: SubjectKey,
    now: float,
    t: Thresholds,
    healthy_compute_us: float | None = None,
    *,
    per_request: list[tuple[float, float]] | None = None,
) -> list[tuple[float, str]]:
    """Return (time, kind) of every reload sign within the period lookback, oldest first.

    Counter resets a container restart explains (kube-state-metrics) are the pod restarting,
    not a reload: they are left out, so a crash loop does not read as repository churn.
    ``per_request`` is the per-scrape latency over the period lookback, when the caller has
    it (``derive`` does, for the spikes): the same ratio is not taken twice.
    """
    horizon = now - t.period_lookback_s
    out: set[tuple[float, str]] = set()
    succ = reader.series("nv_inference_request_success", key)
    restarts = restart_times(reader, key, now - restarts_reach_s(t))
    interval = reader.interval(key)
    slack = 2 * interval
    for s in succ:
        out.update(
            (r, "counter reset")
            for r in s.resets
            if r >= horizon and not any(abs(r - x) <= slack for x in restarts)
        )
    versions = {label(s.labels, "version") for s in succ}
    if len(versions) > 1:
        out.update(
            (s.born, "new version") for s in succ if s.born is not None and s.born >= horizon
        )
    for s in reader.series("nv_model_load_duration_secs", key):
        times, values = s.times, s.values
        for k in range(max(bisect_left(times, horizon), 1), len(times)):
            if values[k] != values[k - 1]:
                out.add((times[k], "model load"))
    born = max((s.born for s in succ if s.born is not None), default=None)
    comp = [x for name in _COMPUTE for x in reader.series(name, key)]
    latency = reader.series("nv_inference_request_duration_us", key)
    bursts = cold_bursts(
        comp,
        succ,
        latency,
        horizon=horizon,
        now=now,
        t=t,
        healthy_us=healthy_compute_us,
        per_request=per_request,
    )
    for at in bursts:
        # A new model's first executions are its cold start, not a reload of a serving one.
        if born is None or at > born + t.cold_age_s:
            out.add((at, STALL if _stalled(reader, key, at, interval, t) else "cold executions"))
    if interval >= t.burst_merge_s:
        # Only where one reload fits in about one scrape: finer scrapes see the burst itself.
        tails = cold_tail_scrapes(
            reader.series("nv_inference_compute_infer_summary_us", key),
            reader.series("nv_inference_compute_infer_duration_us", key),
            succ,
            horizon=horizon,
            now=now,
            t=t,
        )
        out.update(
            (at, STALL if _stalled(reader, key, at, interval, t) else COLD_TAIL)
            for at in tails
            if born is None or at > born + t.cold_age_s
        )
    return sorted(out)


def _stalled(reader: FeatureReader, key: SubjectKey, at: float, iv: float, t: Thresholds) -> bool:
    """Whether the pod's node had no CPU to spare over the scrape (every ``iv``) ending at ``at``.

    Slow executions on a node whose cores were all busy may be the scheduler's stalls, which
    look like cold executions in every counter Triton keeps. Half a scrape either side of
    the scrape's span, so node-exporter's own scrapes, on their own clock, bracket it.
    Without node-exporter, Triton's own ``nv_cpu_utilization`` (the host's CPU, a gauge):
    saturated over the span only as low as its lowest reading there. Unknown (neither, or
    too few points) is not a stall: the sign stands.
    """
    ns, pod, _ = key
    start, end = at - 1.5 * iv, at + 0.5 * iv
    busy = reader.node_cpu_busy(ns, pod, start, end)
    if busy is None:
        readings = [
            v
            for s in reader.pod_series("nv_cpu_utilization", ns, pod)
            for v in s.values[bisect_right(s.times, start) : bisect_right(s.times, end)]
        ]
        busy = min(readings) if readings else None
    return busy is not None and busy >= t.stall_node_busy
