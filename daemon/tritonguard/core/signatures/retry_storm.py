"""retry_storm: client timeouts with aggressive retries amplify an overload."""

from __future__ import annotations

from tritonguard.core.findings import Finding, Fix
from tritonguard.core.signatures.context import (
    GATE,
    Context,
    amplification,
    arrivals_of,
    clamp,
    symptom_evidence,
    weigh,
)

CAUSE = "retry_storm"


def check(ctx: Context) -> Finding | None:
    """Timeouts/cancellations rise together with arrivals and latency: positive feedback."""
    f, t, b = ctx.features, ctx.thresholds, ctx.baseline
    if not ctx.symptom.sustained:
        return None
    served = f.request_rate or 0.0
    timeouts: list[tuple[str, float]] = []
    if f.failure_canceled is not None and served + (f.failure_rate or 0) > 0:
        timeouts.append(("triton_canceled", f.failure_canceled / (served + (f.failure_rate or 0))))
    if f.ingress_timeout_rate is not None and f.ingress_rate:
        timeouts.append(("ingress_timeouts", f.ingress_timeout_rate / f.ingress_rate))
    worst = max((share for _, share in timeouts), default=None)
    outrun = amplification(ctx)
    counted = worst is not None and worst >= t.timeout_failure_share
    # The ingress is the authority on client timeouts: with its counters in view and no
    # timeouts there, amplification alone is a surge, not a storm.
    inferred = not counted and f.ingress_rate is None and outrun is not None and outrun.holds(t)
    if not (counted or inferred):
        return None
    ev = symptom_evidence(ctx)
    for name, share in timeouts:
        ev[f"{name}_share"] = ctx.ev(share, "ratio", "timed-out or cancelled share of requests")
    if outrun is not None:
        ev["arrivals_vs_served"] = ctx.ev(
            outrun.vs_served, "ratio", "(served + failed + Δpending/s) / served"
        )
        if outrun.backlog_s is not None:
            ev["backlog_s"] = ctx.ev(outrun.backlog_s, "s", "pending / served rate")
    conf = 0.6
    arrivals = arrivals_of(f)
    base_rate = b.get("request_rate") if b else None
    if base_rate:
        amp = arrivals / base_rate
        ev["arrivals_vs_baseline"] = ctx.ev(
            amp, "ratio", "(served + failed + Δpending/s) vs baseline"
        )
        if amp >= t.retry_rate_increase:
            conf += 0.15
    if f.ingress_rate is not None and b is not None:
        ing = b.ratio("ingress_rate", f.ingress_rate)
        if ing is not None:
            ev["ingress_vs_baseline"] = ctx.ev(ing, "ratio", "ingress request rate vs baseline")
            if ing >= t.retry_rate_increase:
                conf += 0.1
    if f.pending is not None:
        ev["pending"] = ctx.ev(f.pending, "requests", "nv_inference_pending_request_count")
        if f.pending >= t.pending_explosion * max(f.busy_instances or 1.0, 1.0):
            conf += 0.1
    if f.failure_rejected:
        ev["rejected_rate"] = ctx.ev(
            f.failure_rejected, "req/s", "REJECTED failures (shedding active)"
        )
    snippet = (
        "dynamic_batching {\n  default_queue_policy {\n    timeout_action: REJECT\n"
        "    default_timeout_microseconds: 200000\n    allow_timeout_override: true\n"
        "    max_queue_size: 64\n  }\n}"
    )
    text = (
        "Shed load at the server so excess fails fast instead of queueing past client timeouts "
        "(queue policy max_queue_size + default_timeout_microseconds with REJECT); make clients back "
        "off exponentially with jitter and a retry cap, and add a circuit breaker."
    )
    if counted and worst is not None:
        summary = (
            f"Retry storm: {worst:.0%} of requests time out or are cancelled while arrivals "
            f"({arrivals:.1f}/s) rise with latency; retries are amplifying the overload"
            + (f" and {f.pending:.0f} requests are pending" if f.pending is not None else "")
            + "."
        )
    else:
        assert outrun is not None and outrun.backlog_s is not None
        summary = (
            f"Retry storm (no timeout counts in view): arrivals ({arrivals:.1f}/s) are "
            f"{outrun.vs_served:.1f}x what is served and the backlog holds "
            f"{outrun.backlog_s:.0f} s of "
            "work, longer than clients wait: abandoned requests are re-sent and amplify the "
            "overload."
        )
    # What decided it, for the order evidence is shown in (Evidence.weight): the timeout share
    # that crossed the bar (the worst one), else the amplification that stood in for it.
    weights = {
        **{
            f"{name}_share": GATE if counted and share == worst else 0.0 for name, share in timeouts
        },
        "arrivals_vs_served": GATE if inferred else 0.15,
        "backlog_s": GATE if inferred else 0.05,
        "arrivals_vs_baseline": 0.15,
        "pending": 0.1,
        "ingress_vs_baseline": 0.1,
        "rejected_rate": 0.05,
    }
    return Finding(CAUSE, ctx.subject, clamp(conf), summary, weigh(ev, weights), Fix(text, snippet))
