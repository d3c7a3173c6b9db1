"""node_contention: other work on the node slows Triton at constant load and config."""

from __future__ import annotations

import statistics

from tritonguard.core.findings import Finding, Fix
from tritonguard.core.reload_signs import STALL
from tritonguard.core.signatures.context import GATE, Context, clamp, ms, symptom_evidence, weigh
from tritonguard.core.signatures.memory_copy import copies_multiplied
from tritonguard.core.thresholds import Thresholds

CAUSE = "node_contention"
# What decided it, for the order evidence is shown in (Evidence.weight).
WEIGHTS = {
    "compute_vs_baseline": GATE,
    "load_vs_baseline": GATE,
    "node_cpu_busy": 0.35,
    "before_node_cpu_busy": 0.3,
    "cpu_waiting_share": 0.35,
    "before_cpu_waiting_share": 0.3,
    "host_cpu": 0.2,
    "triton_cpu_vs_baseline": 0.1,
    "throttled_ratio": 0.1,
    "hpa_lag": 0.05,
}


def check(ctx: Context) -> Finding | None:
    """Compute inflates at no more load and unchanged concurrency while the node is busy elsewhere."""
    f, t, b = ctx.features, ctx.thresholds, ctx.baseline
    if not ctx.symptom.sustained or b is None:
        return None
    infl = b.ratio("compute_per_inference_us", f.compute_per_inference_us)
    if infl is None or infl < t.compute_inflation:
        return None
    before = ctx.before
    if before is not None:
        healthy_then = b.ratio("compute_per_inference_us", before.compute_per_inference_us)
        if healthy_then is None or healthy_then >= t.compute_inflation:
            # The window before the shift already held the inflation (contention that builds
            # up slowly): what the node was doing then is part of the shift, not before it.
            before = None
    # On a node already full its busy share has no room to rise: other work that started
    # there shows in the time Triton's threads wait for a CPU (cgroup CPU pressure).
    waited = f.cpu_waiting_share is not None and waited_more(
        f.cpu_waiting_share,
        b.get("cpu_waiting_share"),
        before.cpu_waiting_share if before is not None else None,
        t,
    )
    load = b.ratio("request_rate", f.request_rate)
    if load is None or load > 1 + t.load_steady_tolerance:
        # More load than noise explains: Triton's own work may be what slowed it.
        return None
    conc = b.ratio("busy_instances", f.busy_instances, floor=0.05)
    exec_time = b.ratio("compute_per_exec_us", f.compute_per_exec_us)
    if load < 1 - t.load_steady_tolerance and not (
        waited and exec_time is not None and exec_time >= t.compute_inflation
    ):
        # Less load is no cause of slower work, but a fall has causes of its own that slow
        # it: batches shrink (a fixed cost an execution shared among fewer inferences
        # raises compute per inference alone), and traffic that moved to a new pod leaves
        # this one beside that pod's warm-up. So a fall needs each execution itself slower
        # and Triton's threads seen waiting for a CPU. (Clients on a contended node are
        # starved with Triton, and a starved client sends less.)
        return None
    # Busy instances are compute per execution x execution rate, so their ratio over the
    # execution time's is the execution rate's: at steady load and batching it moves no more
    # than the load may (load_steady_tolerance). More is more executions in flight than
    # slower work explains: a concurrency change (more instances, smaller batches).
    if (
        conc is not None
        and exec_time is not None
        and conc > (1 + t.load_steady_tolerance) * exec_time
    ):
        return None
    own = b.ratio("container_cpu_cores", f.container_cpu_cores, floor=0.01)
    if copies_multiplied(ctx) and (own is None or own > t.contention_own_cpu):
        # The copies' share of compute multiplied while nothing shows Triton's own CPU
        # steady: this model's copies growing (bigger inputs, lost pinned memory) make the
        # host busier too, which is memory_copy's mechanism. Contention alone grows that
        # share only where the copies are the CPU-side part of a GPU model's compute; with
        # Triton's CPU known steady while the node got busier, other work it is.
        return None
    if any(ctx.now - at <= 2 * f.window_s and kind != STALL for at, kind in ctx.reload_events):
        # The config or version just changed: not the same workload. Cold-looking bursts
        # on a saturated node are no such change: contention's stalls leave them too.
        return None
    if ctx.changed_at is not None:
        # The config or pod template changed since the baseline's period: "at constant
        # config" does not hold, and a node that got busier at the same time names nothing
        # the change's own causes (instances, batching, a new image) do not explain better.
        return None
    base_queue, base_latency = b.get("mean_queue_us"), b.get("mean_latency_us")
    # The shift's own scrapes when they are known (the window still mixes in the healthy
    # ones before it); their median, so the one scrape that held a deploy does not decide.
    queue = statistics.median(ctx.queue_since_shift) if ctx.queue_since_shift else f.mean_queue_us
    if (
        queue is not None
        and base_queue is not None
        and base_latency is not None
        and queue * t.shift_floor < base_queue
        and base_queue - queue >= t.contention_queue_slack * base_latency
    ):
        # Requests wait less than they did while each execution got slower: more instances
        # serve them (an idle one takes each request), which is too_many_instances' mechanism.
        # Slower work on the same instances raises every instance's utilisation, and waiting
        # grows faster than utilisation (M/M/c), so contention cannot shorten the queue.
        return None
    ev = symptom_evidence(ctx)
    ev["compute_vs_baseline"] = ctx.ev(infl, "ratio", "compute per inference vs baseline")
    ev["load_vs_baseline"] = ctx.ev(load, "ratio", "request rate vs baseline")
    conf = 0.4
    # Contended threads wait on the run queue, which CPU usage does not count, so contention
    # leaves Triton's own CPU where the load puts it (0.8-0.9x in the recorded contention
    # traces). Up by more than the load may move it, Triton itself does more work a request
    # (a model loading: a backend's stub starting, 1.3-2.6x in the recorded reloads; a
    # neighbour model; its own copies), and that work is on the same node: a busier node
    # is then no sign of other work.
    own_work = own is not None and own > 1 + t.load_steady_tolerance
    # Other work shown (a busier node, or Triton's threads waiting more), and more certain
    # when Triton's own CPU stayed where it was: the node got busier, but not for Triton.
    other_work = 0.35 if own is None or own <= t.contention_own_cpu else 0.25
    if f.cpu_waiting_share is not None:
        ev["cpu_waiting_share"] = ctx.ev(
            f.cpu_waiting_share,
            "ratio",
            "share of time a Triton thread waited for a CPU (container_pressure_cpu_waiting)",
        )
    if f.node_cpu_busy is not None:
        before_node = before.node_cpu_busy if before is not None else None
        ev["node_cpu_busy"] = ctx.ev(
            f.node_cpu_busy, "ratio", "1 - idle share of node_cpu_seconds_total"
        )
        if not (waited or busier(f.node_cpu_busy, b.get("node_cpu_busy"), before_node, t)):
            conf -= 0.15
        elif not own_work:
            conf += other_work
    elif waited and not own_work:
        conf += other_work
    elif f.cpu_host_util is not None:
        ev["host_cpu"] = ctx.ev(f.cpu_host_util, "ratio", "nv_cpu_utilization (host-wide)")
        before_host = before.cpu_host_util if before is not None else None
        if not own_work and busier(
            f.cpu_host_util, b.get("cpu_host_util"), before_host, t, reach=False
        ):
            conf += 0.2
    if before is not None:
        for name, value, what in (
            (
                "before_node_cpu_busy",
                before.node_cpu_busy,
                "node busy share in the window before the shift began",
            ),
            (
                "before_cpu_waiting_share",
                before.cpu_waiting_share,
                "share of time a Triton thread waited for a CPU before the shift began",
            ),
        ):
            if value is not None:
                ev[name] = ctx.ev(value, "ratio", what, before.window_s)
    if own is not None:
        ev["triton_cpu_vs_baseline"] = ctx.ev(own, "ratio", "Triton container CPU vs baseline")
    if f.throttled_ratio is not None and f.throttled_ratio >= t.throttled_high:
        ev["throttled_ratio"] = ctx.ev(f.throttled_ratio, "ratio", "Δthrottled_periods / Δperiods")
        conf += 0.1
    if f.hpa_desired is not None and f.hpa_current is not None and f.hpa_desired > f.hpa_current:
        ev["hpa_lag"] = ctx.ev(f.hpa_desired - f.hpa_current, "replicas", "HPA desired - current")
        conf += 0.05
    text = (
        "Isolate the GPU node: taint it and give Triton a toleration and nodeSelector/affinity so "
        "other workloads stay off; raise Triton's CPU request to what it really uses; drive the HPA "
        "from Triton queue time or pending requests so scale-out starts before the queue builds."
    )
    snippet = (
        "tolerations:\n- key: nvidia.com/gpu\n  operator: Exists\n  effect: NoSchedule\n"
        'nodeSelector:\n  nvidia.com/gpu.present: "true"'
    )
    summary = (
        f"Each inference takes {infl:.1f}x its baseline compute ({ms(f.compute_per_inference_us) or 0:.1f} ms) "
        + (
            f"at {load:.0%} of its baseline load (its clients are slowed too) and unchanged "
            "concurrency"
            if load < 1 - t.load_steady_tolerance
            else "at unchanged load and concurrency"
        )
        + (
            f" while Triton's threads wait for a CPU {f.cpu_waiting_share:.0%} of the time"
            if waited and f.cpu_waiting_share is not None
            else f" while the node is {f.node_cpu_busy:.0%} busy"
            if f.node_cpu_busy is not None
            else ""
        )
        + ": other work on the node is taking Triton's resources."
    )
    return Finding(CAUSE, ctx.subject, clamp(conf), summary, weigh(ev, WEIGHTS), Fix(text, snippet))


def busier(
    now: float, base: float | None, before: float | None, t: Thresholds, *, reach: bool = True
) -> bool:
    """Return whether the node's (or host's) CPU got busier with the shift, not before it.

    Other work *started*: the node is busier than when the model was healthy, both over the
    baseline and in the window just before the shift began. A node already saturated then (a
    packed node, a busy CI machine) served the model at its healthy compute, so its
    saturation explains nothing that changed; other work that started on a node that full
    shows only in run-queue waiting (CPU pressure), not in its busy share. ``reach``: reaching
    saturation from below counts as busier (node-exporter's share; the host-wide
    ``nv_cpu_utilization`` needs the rise itself).
    """
    refs = [r for r in (base, before) if r is not None]
    if any(r >= t.cpu_saturated for r in refs):
        return False
    if reach and now >= t.cpu_saturated:
        return True
    return bool(refs) and all(now - r >= t.node_cpu_rise for r in refs)


def waited_more(now: float, base: float | None, before: float | None, t: Thresholds) -> bool:
    """Return whether Triton's threads wait for a CPU more since the shift, not before it.

    Against both the baseline and the window before the shift began: up by ``cpu_wait_rise``
    of the wall time and by ``shift_floor`` of each. A rise already there before the shift
    is no part of it; with neither reference nothing shows a rise.
    """
    refs = [r for r in (base, before) if r is not None]
    return bool(refs) and all(now - r >= t.cpu_wait_rise and now >= t.shift_floor * r for r in refs)
