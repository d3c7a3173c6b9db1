"""too_few_instances: every instance is busy and the queue grows."""

from __future__ import annotations

import math

from tritonguard.core.findings import Finding, Fix
from tritonguard.core.model_config import instance_group_snippet
from tritonguard.core.signatures.context import (
    BESIDE_GATE,
    GATE,
    Context,
    amplification,
    clamp,
    ms,
    symptom_evidence,
    weigh,
)

CAUSE = "too_few_instances"
# What decided it, for the order evidence is shown in (Evidence.weight).
WEIGHTS = {
    "busy_instances": GATE,
    "instance_count": BESIDE_GATE,
    "queue_share": GATE,
    "pending": 0.1,
    "gpu_util": 0.1,
    "load_vs_baseline": 0.1,
    "compute_vs_baseline": 0.05,
}


def saturated(busy: float, count: int | None, threshold: float) -> bool:
    """Instances all busy: against the configured count, or near a whole number when unknown."""
    if count:
        return busy / count >= threshold
    if busy < threshold:
        return False
    frac = busy - math.floor(busy)
    return frac <= 1 - threshold or frac >= threshold


def check(ctx: Context) -> Finding | None:
    """Queue time grows while all instances execute and compute per inference is normal."""
    f, t, cfg, b = ctx.features, ctx.thresholds, ctx.config, ctx.baseline
    if not ctx.symptom.sustained or f.queue_share is None or f.busy_instances is None:
        return None
    if f.queue_share < t.queue_share_high:
        return None
    # A count read before the shift may be the one a deploy replaced (4 -> 2 reads half busy
    # at full saturation): until the new one is read, judge by the busy count alone.
    count = cfg.instance_count if cfg is not None and ctx.config_current() else None
    if not saturated(f.busy_instances, count, t.busy_saturated):
        return None
    inflation = b.ratio("compute_per_inference_us", f.compute_per_inference_us) if b else None
    if inflation is not None and inflation >= t.compute_inflation:
        return None  # slower work, not too little capacity: contention signatures own this
    amp = amplification(ctx) if f.ingress_rate is None else None
    if (
        amp is not None
        and amp.vs_served >= t.amplified_arrivals
        and amp.vs_baseline is not None
        and amp.vs_baseline >= t.amplified_arrivals
        and not amp.holds(t)
    ):
        # Arrivals outrun service and history with no client-side count in view: a surge
        # and a retry storm look alike until the backlog outlasts every client's patience
        # (abandoned_backlog_s). Abstain until it tells; naming capacity now would be wrong
        # for the storm, whose fix is the clients' retry budget.
        return None
    ev = symptom_evidence(ctx)
    ev["busy_instances"] = ctx.ev(f.busy_instances, "instances", "compute per exec × exec rate")
    conf = 0.6
    if count:
        ev["instance_count"] = ctx.ev(float(count), "instances", "model config instance_group")
        conf += 0.05
    if inflation is not None:
        ev["compute_vs_baseline"] = ctx.ev(inflation, "ratio", "compute per inference vs baseline")
        conf += 0.05
    if f.pending is not None:
        ev["pending"] = ctx.ev(f.pending, "requests", "nv_inference_pending_request_count")
        if f.pending >= f.busy_instances or (f.pending_change or 0) > 0:
            conf += 0.1
    if f.gpu_util is not None:
        ev["gpu_util"] = ctx.ev(f.gpu_util, "ratio", "accelerator utilisation")
        conf += 0.1 if f.gpu_util < t.gpu_saturated else -0.1
    load = b.ratio("request_rate", f.request_rate) if b else None
    if load is not None:
        ev["load_vs_baseline"] = ctx.ev(load, "ratio", "request rate vs baseline")
        if load >= t.load_increase:
            conf += 0.1
    timeouts = (f.failure_canceled or 0) + (f.ingress_timeout_rate or 0)
    if (f.request_rate and timeouts / f.request_rate >= t.timeout_failure_share) or (
        amp is not None and amp.holds(t)
    ):
        conf -= 0.15  # timeouts and retries point at a storm amplifying the load
    n = count or max(1, round(f.busy_instances))
    snippet = instance_group_snippet(n + 1, cfg.instance_kind if cfg is not None else None)
    text = (
        f"Raise instance_group.count from {n} to {n + 1} (Triton applies an instance-count-only "
        "change in place) while the accelerator has headroom; otherwise scale replicas. "
        "Autoscale on queue time or pending requests rather than CPU."
    )
    summary = (
        f"All {n} instance(s) are busy ({f.busy_instances:.2f} instance-seconds/s) and requests "
        f"queue for {ms(f.mean_queue_us) or 0:.1f} ms ({f.queue_share:.0%} of request time) at "
        f"{f.request_rate or 0:.1f} req/s: not enough instances for the load."
    )
    return Finding(CAUSE, ctx.subject, clamp(conf), summary, weigh(ev, WEIGHTS), Fix(text, snippet))
