"""too_many_instances: instances fight over a saturated accelerator."""

from __future__ import annotations

from tritonguard.core.findings import Finding, Fix
from tritonguard.core.model_config import instance_group_snippet
from tritonguard.core.signatures.context import (
    BESIDE_GATE,
    GATE,
    Context,
    clamp,
    culprit_elsewhere,
    ms,
    symptom_evidence,
    weigh,
)
from tritonguard.core.thresholds import Thresholds

CAUSE = "too_many_instances"
# What decided it, for the order evidence is shown in (Evidence.weight).
WEIGHTS = {
    "compute_vs_baseline": GATE,
    "busy_instances": GATE,
    "instance_count": BESIDE_GATE,
    "instances_before": BESIDE_GATE,
    "concurrency_vs_baseline": 0.15,
    "gpu_util": 0.15,
    "throughput_vs_baseline": 0.1,
}


def _device_bar(busy: float, count: int | None, t: Thresholds) -> float:
    """Return the accelerator utilisation below which its instances did not fight over it.

    With the instance count a change raised, ``busy`` executions in flight on ``count``
    instances keep at least one in flight ``busy / count`` of the time, and executions that
    wait only for the device keep it busy all that time. A device idler than that idled
    while executions ran: they waited for something else. The switches between instances
    are time in flight with the device not busy, so costly switches can read under the bar
    while instances do fight: it errs toward silence, not toward naming this cause. Without
    the count, only a device with little idle time left (``gpu_underused``) is one they
    fight over.
    """
    return busy / count if count else t.gpu_underused


def check(ctx: Context) -> Finding | None:
    """More concurrent executions, each slower, with no more throughput."""
    f, t, cfg, b = ctx.features, ctx.thresholds, ctx.config, ctx.baseline
    if not ctx.symptom.sustained or b is None or f.busy_instances is None:
        return None
    count = cfg.instance_count if cfg is not None else None
    # A change that raised the instance count: instances that ran alike before fight now
    # because there are more of them. Without one (the config unread, or as many instances
    # as the baseline ran with), only executions seen overlapping show instances at all: a
    # configured count alone does not, since slower work on a busier node puts more
    # executions in flight at the same load just as well.
    rose = count is not None and ctx.instances_before is not None and ctx.instances_before < count
    if not rose and f.busy_instances < 1.3:
        return None
    inflation = b.ratio("compute_per_inference_us", f.compute_per_inference_us)
    if inflation is None or inflation < t.compute_inflation:
        return None
    thr = b.ratio("inference_rate", f.inference_rate)
    load = b.ratio("request_rate", f.request_rate)
    if load is not None and load >= t.load_increase:
        return None  # more work explains more executions in flight: a load rise, not a config
    base_queue = b.get("queue_share")
    if (
        f.queue_share is not None
        and base_queue is not None
        and f.queue_share > max(base_queue * t.shift_floor, base_queue + t.contention_queue_slack)
    ):
        # Requests wait longer for the same instances: the work got slower under them, which
        # is what contention between instances cannot do (they take requests as they come).
        return None
    if f.gpu_util is not None and f.gpu_util < _device_bar(
        f.busy_instances, count if rose else None, t
    ):
        return None  # the accelerator idled while they ran: it is not what they fight over
    if culprit_elsewhere(ctx) is not None:
        return None  # another model's added work saturates the accelerator they share
    ev = symptom_evidence(ctx)
    ev["compute_vs_baseline"] = ctx.ev(inflation, "ratio", "compute per inference vs baseline")
    ev["busy_instances"] = ctx.ev(f.busy_instances, "instances", "concurrent executions")
    conf = 0.55
    busy_up = b.ratio("busy_instances", f.busy_instances, floor=0.05)
    if busy_up is not None:
        ev["concurrency_vs_baseline"] = ctx.ev(busy_up, "ratio", "busy instances vs baseline")
        if busy_up >= 1.5:
            conf += 0.15
    if thr is not None:
        ev["throughput_vs_baseline"] = ctx.ev(thr, "ratio", "inference rate vs baseline")
        if thr <= t.load_increase:
            conf += 0.1
    if count is not None and count > 1:
        ev["instance_count"] = ctx.ev(float(count), "instances", "model config instance_group")
        conf += 0.05
    before = ctx.instances_before if rose else None
    if before is not None:
        ev["instances_before"] = ctx.ev(
            float(before), "instances", "instance_group count before the change", 0.0
        )
    if f.gpu_util is not None:
        ev["gpu_util"] = ctx.ev(f.gpu_util, "ratio", "accelerator utilisation")
        if f.gpu_util >= t.gpu_saturated:
            conf += 0.15
    if f.container_cpu_saturation is not None and f.container_cpu_saturation >= t.cpu_saturated:
        conf -= 0.15  # the CPU, not the accelerator, may be the contended resource
    if (
        f.node_cpu_busy is not None
        and f.node_cpu_busy >= t.cpu_saturated
        and busy_up is not None
        and busy_up < 1.2
    ):
        conf -= 0.2
    n = count or max(2, round(f.busy_instances))
    # Back to the count that ran well when a change raised it; otherwise halve toward it.
    target = before if before is not None else max(1, n // 2)
    snippet = instance_group_snippet(target, cfg.instance_kind if cfg is not None else None)
    toward = f"back to {target}, as before the change" if before is not None else f"toward {target}"
    text = (
        f"Lower instance_group.count (from {n} {toward}): the instances contend for one "
        "saturated accelerator. Get throughput from dynamic batching, lower precision (FP16/INT8) or "
        "kernel optimisation instead of more instances."
    )
    summary = (
        f"{f.busy_instances:.1f} executions run at once but each inference takes {inflation:.1f}x its "
        f"baseline compute ({ms(f.compute_per_inference_us) or 0:.1f} ms) with no more throughput: "
        "instances are fighting over the accelerator."
    )
    return Finding(CAUSE, ctx.subject, clamp(conf), summary, weigh(ev, WEIGHTS), Fix(text, snippet))
