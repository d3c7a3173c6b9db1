"""model_reload: repository polling or load/unload churn disturbs a model already serving."""

from __future__ import annotations

from tritonguard.core.findings import Finding, Fix
from tritonguard.core.recurrence import regularity
from tritonguard.core.reload_signs import COLD_TAIL, STALL
from tritonguard.core.signatures.context import GATE, Context, clamp, symptom_evidence, weigh
from tritonguard.core.thresholds import Thresholds

CAUSE = "model_reload"


def occurrences(times: list[float], merge_s: float) -> int:
    """Count reloads: signs closer than ``merge_s`` to the previous one are the same reload."""
    count, last = 0, float("-inf")
    for at in sorted(times):
        if at - last > merge_s:
            count += 1
        last = at
    return count


def _telling(events: list[tuple[float, str]], t: Thresholds) -> list[tuple[float, str]]:
    """Drop the stall-like signs unless they recur at a period.

    On a saturated node a scheduling stall and a reload leave the same cold-looking burst.
    Stalls arrive at random (a Poisson process, spacing CV about 1), reload churn at the
    period of the job or poll that drives it: at least ``period_min_spikes`` such bursts
    spaced within ``period_max_cv`` are reloads, fewer or irregular ones are no evidence.
    """
    stalls = [at for at, kind in events if kind == STALL]
    if not stalls:
        return events
    onsets: list[float] = []
    for at in sorted(stalls):
        if not onsets or at - onsets[-1] > t.burst_merge_s:
            onsets.append(at)
    _, cv = regularity(onsets)
    if len(onsets) >= t.period_min_spikes and cv is not None and cv <= t.period_max_cv:
        return events
    return [e for e in events if e[1] != STALL]


def check(ctx: Context) -> Finding | None:
    """Latency spikes recur at a period, or reload signs repeat, at steady traffic."""
    f, t, b = ctx.features, ctx.thresholds, ctx.baseline
    rec = ctx.latency_spikes
    periodic = (
        rec is not None
        and len(rec.spikes) >= t.period_min_spikes
        and rec.period_s is not None
        and rec.cv is not None
        and rec.cv <= t.period_max_cv
        # Reload spikes stand on a warm floor: between them the model serves at its healthy
        # latency. When most scrapes are slow (sustained), the worst of a lasting slowdown
        # (contention, lost capacity) are what recur, not reloads.
        and not (ctx.baseline is not None and ctx.symptom.sustained)
    )
    events = _telling([e for e in ctx.reload_events if ctx.now - e[0] <= t.period_lookback_s], t)
    # One deploy leaves several signs at once (a new version's series, a reset, a load time),
    # and a range read may see them a scrape apart: churn is reloads that recur.
    signed = occurrences(
        [at for at, kind in events if kind != COLD_TAIL], max(t.burst_merge_s, 1.5 * f.interval_s)
    )
    # A scrape with cold executions in its compute tail is one reload: at coarse scrapes
    # reloads land in successive scrapes and would merge into one. One reload may spill
    # into a second scrape, so n such scrapes count as n - 1 reloads.
    tails = sum(1 for _, kind in events if kind == COLD_TAIL)
    reloads = max(signed, tails - 1)
    if not periodic and reloads < t.reload_min_events:
        return None
    if not periodic and not ctx.symptom.up:
        return None
    load = b.ratio("request_rate", f.request_rate) if b else None
    if load is not None and abs(load - 1) > 2 * t.load_steady_tolerance:
        return None  # traffic swings explain latency better than reloads
    ev = symptom_evidence(ctx)
    conf = 0.5
    if periodic and rec is not None:
        ev["spike_period_s"] = ctx.ev(
            rec.period_s, "s", "median spacing of per-scrape latency spikes", t.period_lookback_s
        )
        ev["spikes"] = ctx.ev(
            float(len(rec.spikes)),
            "count",
            "per-scrape latency ≥ spike factor × median",
            t.period_lookback_s,
        )
        ev["spike_period_cv"] = ctx.ev(
            rec.cv, "ratio", "spread of spike spacing", t.period_lookback_s
        )
        conf += 0.2
    if events:
        ev["reload_events"] = ctx.ev(
            float(len(events)),
            "count",
            ", ".join(sorted({k for _, k in events})),
            t.period_lookback_s,
        )
        conf += 0.1 * min(reloads, 3)
    if load is not None:
        ev["load_vs_baseline"] = ctx.ev(load, "ratio", "request rate vs baseline")
        conf += 0.05 if abs(load - 1) <= t.load_steady_tolerance else 0.0
    if ctx.symptom.up:
        conf += 0.05
    period = (
        f" every ~{rec.period_s:.0f} s" if periodic and rec is not None and rec.period_s else ""
    )
    text = (
        "Stop repository polling in production: run tritonserver with --model-control-mode=explicit "
        "--repository-poll-secs=0 and load models only through the repository API "
        "(POST /v2/repository/models/<m>/load); ship model updates blue/green or as a canary, and "
        "write repository changes atomically (new version directory, then rename)."
    )
    summary = (
        f"The model is being reloaded while it serves: latency spikes recur{period}"
        + (
            f" with {len(events)} reload sign(s) (counter resets, new versions, load durations)"
            if events
            else ""
        )
        + " at steady traffic."
    )
    # What decided it, for the order evidence is shown in (Evidence.weight): the periodic
    # spikes or the repeated reload signs, whichever held.
    weights = {
        "spike_period_s": GATE if periodic else 0.2,
        "spikes": GATE if periodic else 0.2,
        "spike_period_cv": 0.2,
        "reload_events": GATE if reloads >= t.reload_min_events else 0.1,
        "load_vs_baseline": 0.05,
    }
    # Reloads counted from finished signs alone (a burst is one once a warm scrape follows
    # it; a reset, a new version's series or a load time is a fact of its scrape) are
    # settled: the scrape that confirmed the last of them is already in. The periodic path
    # and the compute-tail count each rest on a scrape nothing has followed yet.
    return Finding(
        CAUSE,
        ctx.subject,
        clamp(conf),
        summary,
        weigh(ev, weights),
        Fix(text, "", "--model-control-mode=explicit --repository-poll-secs=0"),
        settled=signed >= t.reload_min_events,
    )
