"""batching_delay: the dynamic batcher waits for batches that never fill."""

from __future__ import annotations

from tritonguard.core.findings import Finding, Fix
from tritonguard.core.humanize import microseconds
from tritonguard.core.signatures.context import (
    BESIDE_GATE,
    GATE,
    Context,
    clamp,
    ms,
    symptom_evidence,
    weigh,
)

# Points (scrapes, pooled to steady_min_requests each) needed to judge whether queueing is
# steady; fewer (coarse scrapes, low traffic) leave it unknown.
STEADY_MIN_SCRAPES = 3


def queue_steadiness(per_scrape: list[float], min_points: int = STEADY_MIN_SCRAPES) -> float | None:
    """Return the lowest scrape's queue time over the median scrape's, or None with too few.

    A dynamic batcher waiting for batches that do not fill holds every request up to its
    delay, every scrape alike; reloads and spikes queue in bursts between normal scrapes.
    """
    if len(per_scrape) < min_points:
        return None
    ordered = sorted(per_scrape)
    mid = ordered[len(ordered) // 2]
    return ordered[0] / mid if mid > 0 else None


def past_the_onset(points: list[float], limit: float | None) -> list[float]:
    """Return the shift's per-scrape queue without its first scrape when that one straddles.

    The scrape the onset fell in is part healthy, so its queue lies between the healthy level
    and the shift's, below every scrape wholly inside a shift that lasts: when the first point
    is abnormal (beyond ``limit``, the baseline's per-scrape noise) and the lowest of them,
    it is the onset's scrape and says nothing of how steady the shift is. A burst that has
    passed (a reload, a spike) leaves scrapes lower than its first after it, and keeps that
    one. Only with two points left at least, so steadiness is still judged on points of the
    shift's own.
    """
    if limit is not None and len(points) >= 3 and limit < points[0] < min(points[1:]):
        return points[1:]
    return points


def _beyond_the_timer(queue_us: float | None, delay_us: float, exec_us: float | None) -> bool:
    """Whether most of the requests' queue time is not the batcher's timer.

    A request's queue time is the batcher's wait, at most ``max_queue_delay``, and then the
    formed batch's wait for an instance: on mostly idle instances at most the execution in
    flight. Past twice the delay plus that execution, more than half the wait is for an
    instance (capacity, a stall), and lowering the delay would not cure it.
    """
    if queue_us is None or exec_us is None:
        return False
    return queue_us > 2 * delay_us + exec_us


CAUSE = "batching_delay"
# What decided it, for the order evidence is shown in (Evidence.weight).
WEIGHTS = {
    "queue_share": GATE,
    "busy_instances": GATE,
    "instance_count": BESIDE_GATE,
    "queue_vs_max_delay": 0.2,
    "max_queue_delay_ms": 0.19,
    "avg_batch": 0.1,
    "client_batch": 0.05,
    "p99_ms": 0.05,
}


def check(ctx: Context) -> Finding | None:
    """Queue dominates request time while instances are mostly idle."""
    f, t, cfg = ctx.features, ctx.thresholds, ctx.config
    if not ctx.symptom.sustained or f.queue_share is None or f.busy_instances is None:
        return None
    if f.queue_share < t.queue_share_high:
        return None
    if cfg is not None and not cfg.dynamic_batching:
        return None  # no batcher, nothing waits for a batch to fill
    count = cfg.instance_count if cfg is not None and cfg.instance_count else None
    busy = f.busy_instances / count if count else f.busy_instances
    if busy >= t.busy_idle:
        return None
    if (
        f.pending_change is not None
        and f.busy_instances > 0
        and f.pending_change > 4 * max(f.pending or 0, 1)
    ):
        return None  # a growing backlog is not a batcher waiting
    delay = cfg.max_queue_delay_us if cfg is not None else None
    # Only a config read since the shift began is the one in force: a deploy that raised the
    # delay is read after it, not before. An older read still weighs below (a queue far above
    # the delay last read waits for the fresh read before it can pass for the timer's), but
    # vetoes nothing.
    if (
        delay
        and ctx.config_current()
        and _beyond_the_timer(f.mean_queue_us, delay, f.compute_per_exec_us)
    ):
        return None  # requests wait mostly for an instance, not for the batcher's timer
    b = ctx.baseline
    # Per inference, not per execution: a batcher that now waits forms bigger batches, and a
    # bigger batch takes longer to execute without any execution being slower.
    slower = b.ratio("compute_per_inference_us", f.compute_per_inference_us) if b else None
    if slower is not None and slower >= t.compute_inflation:
        return None  # requests wait behind slower executions (reloads, contention), not a timer
    # No veto on the compute summary's tail: the summary slides over about a minute, so the
    # cold executions of the reload that applied the new delay stay in its p99 long after
    # they ended, while the batcher they left waits; executions slow now show in compute
    # per inference above.
    limit = b.abnormal_above("scrape_queue_us", t.noise_k, t.shift_floor) if b else None
    points = past_the_onset(ctx.scrape_queue, limit)
    steady = queue_steadiness(points)
    if steady is not None and steady < t.batching_steady:
        return None  # queueing in bursts (reloads, spikes) is not a batcher's steady wait
    if steady is None and len(points) == 2:
        # Two points that queue alike are a steady wait: a reload's or spike's queue fills one
        # and leaves the other near normal. Two that differ are no veto while the first may
        # straddle the onset, half healthy; once that one is gone, both are the shift's own.
        pair = queue_steadiness(points, min_points=2)
        if pair is not None and pair < t.batching_steady and points is not ctx.scrape_queue:
            return None
        steady = pair if pair is not None and pair >= t.batching_steady else None
    conf = 0.6 if steady is not None else 0.45
    ev = symptom_evidence(ctx)
    ev["busy_instances"] = ctx.ev(f.busy_instances, "instances", "compute per exec × exec rate")
    if count:
        ev["instance_count"] = ctx.ev(float(count), "instances", "model config instance_group")
    if delay:
        ev["max_queue_delay_ms"] = ctx.ev(
            ms(delay), "ms", "model config dynamic_batching.max_queue_delay_microseconds", 0.0
        )
    if delay and f.mean_queue_us is not None:
        match = f.mean_queue_us / delay
        ev["queue_vs_max_delay"] = ctx.ev(
            match, "ratio", "mean queue / max_queue_delay_microseconds"
        )
        conf += 0.2 if t.queue_delay_match_low <= match <= 1.6 else -0.1
    if f.avg_batch is not None:
        ev["avg_batch"] = ctx.ev(f.avg_batch, "items", "Δinference_count / Δexec_count")
        if cfg is not None and cfg.max_batch_size > 1 and f.avg_batch <= 0.5 * cfg.max_batch_size:
            conf += 0.1
    if f.p50_us and f.p99_us and f.p99_us / f.p50_us >= 3:
        conf += 0.05
    if f.queue_share >= 0.6:
        conf += 0.05
    clients_batch = f.client_batch is not None and f.client_batch > 1.5
    if clients_batch:
        ev["client_batch"] = ctx.ev(f.client_batch, "items/request", "Δinference_count / Δsuccess")
    snippet = "dynamic_batching {\n  preferred_batch_size: [ 1, 2, 4 ]\n  max_queue_delay_microseconds: 200\n}"
    text = (
        "Lower dynamic_batching.max_queue_delay_microseconds (start near 100-500 µs) and reload the "
        "config through the repository API; for latency-critical low traffic prefer more instances "
        "(instance_group.count) over batching."
    )
    if clients_batch:
        text += " Clients already send batches: try switching server-side dynamic batching off."
    delay_txt = f"; max_queue_delay {microseconds(delay)}" if delay else ""
    summary = (
        f"Requests wait in the dynamic batcher: queue is {f.queue_share:.0%} of request time "
        f"({ms(f.mean_queue_us) or 0:.1f} ms{delay_txt}) while instances are only "
        f"{busy:.0%} busy — batches do not fill at {f.request_rate or 0:.1f} req/s."
    )
    return Finding(CAUSE, ctx.subject, clamp(conf), summary, weigh(ev, WEIGHTS), Fix(text, snippet))
