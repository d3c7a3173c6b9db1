"""cpu_bottleneck: pre/post-processing, Python backend or throttling starve the accelerator."""

from __future__ import annotations

from tritonguard.core.findings import Finding, Fix
from tritonguard.core.signatures.context import (
    GATE,
    Context,
    clamp,
    culprit_elsewhere,
    symptom_evidence,
    weigh,
    work_share,
)
from tritonguard.core.thresholds import Thresholds

CAUSE = "cpu_bottleneck"


def check(ctx: Context) -> Finding | None:
    """Triton's own CPU is saturated or throttled while the accelerator is underused."""
    f, t, b = ctx.features, ctx.thresholds, ctx.baseline
    if not ctx.symptom.sustained:
        return None
    own = f.container_cpu_saturation is not None and f.container_cpu_saturation >= t.cpu_saturated
    throttled = f.throttled_ratio is not None and f.throttled_ratio >= t.throttled_high
    host = f.cpu_host_util is not None and f.cpu_host_util >= t.cpu_saturated
    if not (own or throttled or host):
        return None
    load = b.ratio("request_rate", f.request_rate) if b else None
    own_cpu = b.ratio("container_cpu_cores", f.container_cpu_cores, floor=0.01) if b else None
    infl = b.ratio("compute_per_inference_us", f.compute_per_inference_us) if b else None
    if not (own or throttled):
        # Only the host is busy: that is Triton's doing when its load grew and either the host
        # was not saturated before it did, or latency followed the load up on the pinned CPU.
        if load is None or load < t.load_increase:
            return None
        base_host = b.get("cpu_host_util") if b else None
        if base_host is not None and base_host >= t.cpu_saturated:
            newborn = ctx.birth is not None and ctx.now - ctx.birth.born_at <= t.cold_age_s
            # A new model, version or pod's first executions are slow for reasons of their
            # own (cold_start): a pinned CPU is not what inflated them.
            if newborn or not pinned(infl, own_cpu, load, t):
                return None
    elif own_cpu is not None and own_cpu < 0.85 and (load is None or load < t.load_increase):
        return None  # Triton uses less CPU than before at the same load: a neighbour took it
    if f.gpu_util is not None and f.gpu_util >= t.gpu_saturated:
        return None
    if culprit_elsewhere(ctx) is not None:
        return None  # another model of the pod took the CPU; this one only slowed
    ev = symptom_evidence(ctx)
    conf = 0.55
    share = work_share(ctx)
    if share is not None:
        ev["pod_work_share"] = ctx.ev(
            share,
            "ratio",
            "share of the work the pod's models added, in healthy compute seconds ("
            + ", ".join(
                f"{p.model}: " + ("load unknown" if p.load is None else f"{p.load:.1f}x load")
                for p in ctx.peers
            )
            + ")",
        )
    if f.container_cpu_saturation is not None:
        ev["container_cpu_vs_quota"] = ctx.ev(
            f.container_cpu_saturation, "ratio", "rate(container_cpu_usage_seconds_total) / quota"
        )
        conf += 0.1 if own else 0.0
    if f.throttled_ratio is not None:
        ev["throttled_ratio"] = ctx.ev(f.throttled_ratio, "ratio", "Δthrottled_periods / Δperiods")
        conf += 0.15 if throttled else 0.0
    if f.cpu_host_util is not None:
        ev["host_cpu"] = ctx.ev(f.cpu_host_util, "ratio", "nv_cpu_utilization")
    if f.gpu_util is not None:
        ev["gpu_util"] = ctx.ev(f.gpu_util, "ratio", "accelerator utilisation")
        conf += 0.1 if f.gpu_util <= t.gpu_underused else 0.0
    if load is not None:
        ev["load_vs_baseline"] = ctx.ev(load, "ratio", "request rate vs baseline")
        conf += 0.1 if load >= t.load_increase else 0.0
    if infl is not None:
        ev["compute_vs_baseline"] = ctx.ev(infl, "ratio", "compute per inference vs baseline")
        conf += 0.05 if infl >= t.compute_inflation else 0.0
    quota = f"{f.cpu_quota_cores:.1f} cores" if f.cpu_quota_cores else "its CPU"
    text = (
        "Move pre/post-processing out of Triton (a separate service) or into native code "
        "(DALI, C++/TensorRT/ONNX Runtime backends instead of the Python backend); raise the "
        "container's CPU request/limit so it is not throttled; then scale out."
    )
    snippet = 'resources:\n  requests:\n    cpu: "<measured use + 30%>"\n  limits:\n    cpu: "<request × 1.5 or none>"'
    what = "throttled" if throttled else "saturated"
    summary = (
        f"Triton is CPU-bound: {quota} {what}"
        + (
            f" ({f.throttled_ratio:.0%} of CFS periods throttled)"
            if f.throttled_ratio is not None
            else ""
        )
        + (f" while the accelerator is {f.gpu_util:.0%} busy" if f.gpu_util is not None else "")
        + "; pre/post-processing or the Python backend starves inference."
        + (
            f" {ctx.subject.model} added {share:.0%} of the work its pod's models added."
            if share is not None
            else ""
        )
    )
    # What decided it, for the order evidence is shown in (Evidence.weight): the saturation
    # that held is the condition; the others corroborate.
    weights = {
        "container_cpu_vs_quota": GATE if own else 0.1,
        "throttled_ratio": GATE if throttled else 0.15,
        "host_cpu": GATE if host and not (own or throttled) else 0.05,
        "gpu_util": 0.1,
        "load_vs_baseline": 0.1,
        "compute_vs_baseline": 0.05,
        "pod_work_share": 0.1,
    }
    return Finding(CAUSE, ctx.subject, clamp(conf), summary, weigh(ev, weights), Fix(text, snippet))


def pinned(infl: float | None, own_cpu: float | None, load: float, t: Thresholds) -> bool:
    """Return whether compute slowed as Triton's own load grew on a host saturated all along.

    A host already saturated before the load grew (a shared node, a busy machine) says
    nothing by itself; but a CPU that has no core to spare cannot serve more work faster, so
    CPU-bound executions share the same cores and each inference takes longer as more run:
    compute per inference inflates with the load. Work bound elsewhere (an accelerator with
    idle time, a batcher) keeps its compute per inference or lowers it with bigger batches.
    With cAdvisor in view Triton's own CPU must have grown with the load it serves: CPU-bound
    work costs the same CPU per request at any load, so its CPU grows as the served rate does
    (within shift_floor); CPU per request fallen further means the added work does not cost
    CPU, or a neighbour took the cores (node_contention).
    """
    if infl is None or infl < t.compute_inflation:
        return False
    return own_cpu is None or own_cpu * t.shift_floor >= load
