"""Signs that a model was (re)loaded while serving: resets, new versions, load times, cold bursts."""

from __future__ import annotations

from statistics import median

from tritonguard.core.features import FeatureReader, SubjectKey
from tritonguard.core.recurrence import per_scrape_ratio
from tritonguard.core.samples import label
from tritonguard.core.series_store import Series
from tritonguard.core.targets import target_of
from tritonguard.core.thresholds import Thresholds

_COMPUTE = (
    "nv_inference_compute_input_duration_us",
    "nv_inference_compute_infer_duration_us",
    "nv_inference_compute_output_duration_us",
)


def restart_times(reader: FeatureReader, key: SubjectKey, horizon: float) -> list[float]:
    """Return when the pod's containers restarted (kube-state-metrics), within the horizon."""
    ns, pod, _ = key
    out = []
    for s in reader.store.family("kube_pod_container_status_restarts_total"):
        sns, spod = target_of(s.labels)
        if spod != pod or (ns and sns not in ("", ns)):
            continue
        out += [
            s.times[k]
            for k in range(1, len(s.times))
            if s.times[k] >= horizon and s.values[k] > s.values[k - 1]
        ]
    return sorted(out)


def cold_bursts(
    comp: list[Series],
    succ: list[Series],
    latency: list[Series],
    *,
    horizon: float,
    now: float,
    t: Thresholds,
) -> list[float]:
    """Return when bursts of cold-like executions began while the model served.

    A reload that keeps counters (same version, poll mode) leaves no reset and no new series,
    only slow executions: scrapes whose compute per execution is at least
    ``reload_burst_compute`` times the model's median while latency spikes (``spike_factor``
    times the median). A cold load costs seconds where warm executions take milliseconds; even
    diluted in a 5-10 s scrape it doubles the scrape's compute, which queueing (too few
    instances) never does and batching moves by far less.

    A burst counts only once it is over, and only if it lasted at most ``reload_burst_max_s``:
    cold executions end when the model is warm, while contention or a capacity change slows
    every scrape until it is removed. A burst still running is not yet a reload sign.
    """
    per_exec = per_scrape_ratio(comp, succ, horizon, now)
    per_req = dict(per_scrape_ratio(latency, succ, horizon, now))
    if len(per_exec) < 4 or len(per_req) < 4:
        return []
    typical = median(v for _, v in per_exec)
    usual = median(per_req.values())
    if typical <= 0:
        return []
    starts: list[float] = []
    run: list[float] = []
    for at, v in per_exec:
        cold = v >= t.reload_burst_compute * typical and per_req.get(at, 0.0) >= (
            t.spike_factor * usual
        )
        if cold:
            run.append(at)
            continue
        if run and run[-1] - run[0] <= t.reload_burst_max_s:
            starts.append(run[0])
        run = []
    return starts


def reload_events(
    reader: FeatureReader, key: SubjectKey, now: float, t: Thresholds
) -> list[tuple[float, str]]:
    """Return (time, kind) of every reload sign within the period lookback, oldest first.

    Counter resets a container restart explains (kube-state-metrics) are the pod restarting,
    not a reload: they are left out, so a crash loop does not read as repository churn.
    """
    horizon = now - t.period_lookback_s
    out: set[tuple[float, str]] = set()
    succ = reader.series("nv_inference_request_success", key)
    restarts = restart_times(reader, key, horizon - t.period_lookback_s)
    slack = 2 * reader.interval(key)
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
        for k in range(1, len(s.times)):
            if s.times[k] >= horizon and s.values[k] != s.values[k - 1]:
                out.add((s.times[k], "model load"))
    born = max((s.born for s in succ if s.born is not None), default=None)
    comp = [x for name in _COMPUTE for x in reader.series(name, key)]
    latency = reader.series("nv_inference_request_duration_us", key)
    for at in cold_bursts(comp, succ, latency, horizon=horizon, now=now, t=t):
        # A new model's first executions are its cold start, not a reload of a serving one.
        if born is None or at > born + t.cold_age_s:
            out.add((at, "cold executions"))
    return sorted(out)
