"""cold_start: the first requests after a deploy, load or scale-out are slow."""

from __future__ import annotations

from tritonguard.core.findings import Finding, Fix
from tritonguard.core.signatures.context import BESIDE_GATE, GATE, Context, clamp, ms, weigh

CAUSE = "cold_start"
# What decided it, for the order evidence is shown in (Evidence.weight).
WEIGHTS = {
    "early_peak_compute_per_exec_ms": GATE,
    "decay_ratio": GATE,
    "early_vs_reference": GATE,
    "early_mean_queue_ms": GATE,
    "steady_compute_per_exec_ms": BESIDE_GATE,
    "age_s": 0.5,
    "has_model_warmup": 0.3,
    "early_compute_p99_over_p50": 0.05,
}


def check(ctx: Context) -> Finding | None:
    """Match a subject that just appeared and served its first requests behind cold executions."""
    birth, t, cfg = ctx.birth, ctx.thresholds, ctx.config
    if birth is None or ctx.now - birth.born_at > t.cold_age_s:
        return None
    e = birth.early
    if birth.early_exec_peak_us is None or birth.latest_exec_us is None or e.mean_queue_us is None:
        return None
    # What a warm execution of this model costs: its previous version on this pod, or the
    # same model on its other pods (a reference that exists at birth); else the median of
    # its own first requests' compute (summaries), or its latest scrape, which shows the
    # warm-up only once it is over.
    b = ctx.baseline
    p99, p50 = birth.early_compute_p99_us, birth.early_compute_p50_us
    reference = b.get("compute_per_exec_us") if b is not None else None
    warm = reference or min(birth.latest_exec_us, p50 or birth.latest_exec_us)
    decay = birth.early_exec_peak_us / max(birth.latest_exec_us, 1.0)
    vs_warm = birth.early_exec_peak_us / max(warm, 1.0)
    tail = p99 / p50 if p99 is not None and p50 else None
    # Per-scrape compute shows the first slow executions at short scrape intervals; at long
    # ones they are diluted, but the summary's p99 still holds them.
    slow_first = max(decay, vs_warm) >= t.cold_compute_ratio
    if not slow_first and (tail is None or tail < t.cold_tail_ratio):
        return None  # not slower at first than warm: no warm-up effect
    if decay < t.cold_compute_ratio and (tail is None or tail < t.cold_tail_ratio):
        # Slower than the reference (its last version, its peers) but alike from its first
        # execution to its latest, with no cold executions in its own compute tail: the new
        # code is heavier, not cold. A warm-up is slow first and fast later; until its own
        # executions show either, the reference alone does not tell the two apart. Without
        # the compute summary only the decay can show it.
        return None
    # Users felt it when the first requests queued at least one warm execution longer than
    # the model's usual queue: a cold instance holds every arrival behind executions several
    # times slower. Warm-up before Ready leaves slow executions nobody waited for.
    usual_queue = (b.get("mean_queue_us") if b is not None else None) or 0.0
    if e.mean_queue_us < usual_queue + t.cold_queue_execs * warm:
        return None
    conf = 0.7
    if cfg is not None:
        if cfg.has_warmup:
            conf -= 0.3
        else:
            conf += 0.1
    if e.p99_us is not None and e.p50_us and e.p99_us / e.p50_us >= 3:
        conf += 0.05
    ev = {
        "early_peak_compute_per_exec_ms": ctx.ev(
            ms(birth.early_exec_peak_us),
            "ms",
            "slowest per-scrape compute/exec after start",
            e.window_s,
        ),
        "steady_compute_per_exec_ms": ctx.ev(
            ms(birth.latest_exec_us), "ms", "latest per-scrape compute/exec"
        ),
        "decay_ratio": ctx.ev(decay, "ratio", "early peak / latest compute per execution"),
        **(
            {
                "early_vs_reference": ctx.ev(
                    vs_warm,
                    "ratio",
                    "early peak / compute per execution of "
                    + (
                        "the model on its other pods" if b.source == "fleet" else "its last version"
                    ),
                )
            }
            if reference and b is not None
            else {}
        ),
        **(
            {
                "early_compute_p99_over_p50": ctx.ev(
                    tail, "ratio", "per-request compute p99 / p50 soon after start", e.window_s
                )
            }
            if tail is not None
            else {}
        ),
        "early_mean_queue_ms": ctx.ev(
            ms(e.mean_queue_us), "ms", "queue time of the first requests", e.window_s
        ),
        "early_mean_latency_ms": ctx.ev(
            ms(e.mean_latency_us), "ms", "latency of the first requests", e.window_s
        ),
        "age_s": ctx.ev(ctx.now - birth.born_at, "s", "time since the model/pod appeared", 0.0),
    }
    if cfg is not None:
        ev["has_model_warmup"] = ctx.ev(float(cfg.has_warmup), "bool", "model config model_warmup")
    snippet = (
        'model_warmup [\n  {\n    name: "warmup"\n    batch_size: 1\n    count: 5\n'
        '    inputs {\n      key: "INPUT"\n      value: { data_type: TYPE_FP32 dims: [ ... ] zero_data: true }\n'
        "    }\n  }\n]"
    )
    text = (
        "Add model_warmup to the model config so each instance runs warm-up executions before it is "
        "Ready; in Kubernetes gate readiness on warm-up (send warm-up requests before the pod joins "
        "the Service) so scale-outs do not serve cold."
    )
    summary = (
        f"First requests after the model/pod appeared waited {ms(e.mean_queue_us) or 0:.0f} ms behind "
        f"cold executions ({ms(birth.early_exec_peak_us) or 0:.0f} ms each, {decay:.0f}x the "
        f"{ms(birth.latest_exec_us) or 0:.1f} ms steady state)."
    )
    return Finding(CAUSE, ctx.subject, clamp(conf), summary, weigh(ev, WEIGHTS), Fix(text, snippet))
