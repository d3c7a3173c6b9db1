"""memory_copy: host↔device copies and format conversion dominate compute."""

from __future__ import annotations

from tritonguard.core.findings import Finding, Fix
from tritonguard.core.signatures.context import (
    BESIDE_GATE,
    GATE,
    Context,
    clamp,
    ms,
    symptom_evidence,
    weigh,
)

CAUSE = "memory_copy"
# A copy share below this is no copy problem however much it grew: under a twelfth of
# compute, copies cannot account for a latency rise worth an incident.
MIN_GROWN_SHARE = 0.08


def copy_shares(ctx: Context) -> tuple[float | None, float | None]:
    """Return the copy share of compute (input + output) now and in the baseline."""
    f, b = ctx.features, ctx.baseline
    share = (
        None if f.input_share is None or f.output_share is None else f.input_share + f.output_share
    )
    base = None
    if b is not None and b.get("input_share") is not None:
        base = (b.get("input_share") or 0.0) + (b.get("output_share") or 0.0)
    return share, base


def copies_multiplied(ctx: Context) -> bool:
    """Whether the copy share of compute multiplied since the baseline (copy_share_growth)."""
    share, base = copy_shares(ctx)
    t = ctx.thresholds
    return (
        share is not None
        and base is not None
        and share >= max(MIN_GROWN_SHARE, t.copy_share_growth * base)
    )


# What decided it, for the order evidence is shown in (Evidence.weight).
WEIGHTS = {
    "copy_share_of_compute": GATE,
    "copy_ms": BESIDE_GATE,
    "baseline_copy_share": 0.1,
    "copy_share_of_latency_rise": 0.1,
    "pcie_bytes_per_inference_vs_baseline": 0.1,
    "pcie_rx_bps": 0.1,
    "pcie_tx_bps": 0.1,
}


def check(ctx: Context) -> Finding | None:
    """Input/output copies take a large or sharply grown share of compute and explain the rise."""
    f, t, b = ctx.features, ctx.thresholds, ctx.baseline
    if not ctx.symptom.sustained or f.input_share is None or f.output_share is None:
        return None
    share, base_share = copy_shares(ctx)
    if share is None:  # not reached: both shares are known; it tells the type checker
        return None
    copy_us = (f.compute_input_us or 0.0) + (f.compute_output_us or 0.0)
    base_copy = base_lat = None
    if b is not None and base_share is not None:
        base_copy = (b.get("compute_input_us") or 0.0) + (b.get("compute_output_us") or 0.0)
        base_lat = b.get("mean_latency_us")
    explains = None
    if base_copy is not None and base_lat is not None and f.mean_latency_us is not None:
        rise = f.mean_latency_us - base_lat
        explains = (copy_us - base_copy) / rise if rise > 0 else None
    large = share >= t.input_share_high and (
        base_share is None or share >= base_share + 0.1 or share >= 1.5 * base_share
    )
    # A copy share that multiplied and accounts for much of the latency rise is the mechanism
    # even before copies dominate compute (bigger inputs also slow the kernels that read them).
    grown = copies_multiplied(ctx) and explains is not None and explains >= t.copy_explains
    # Bytes moved per inference multiplied (PCIe) and compute grew with them: conversions done
    # inside the model show up as compute_infer, yet they scale with the input size too.
    bytes_up = _per_inference_ratio(ctx, "pcie_rx_bps")
    infl = b.ratio("compute_per_inference_us", f.compute_per_inference_us) if b else None
    heavier = (
        bytes_up is not None
        and bytes_up >= t.copy_share_growth
        and infl is not None
        and infl >= t.compute_inflation
        and b is not None
        and f.input_share >= 2 * (b.get("input_share") or 1.0)
    )
    if not (large or grown or heavier):
        return None
    if f.container_cpu_saturation is not None and f.container_cpu_saturation >= 0.95:
        return None  # copies may be slow because the CPU is starved: cpu_bottleneck owns that
    ev = symptom_evidence(ctx)
    ev["copy_share_of_compute"] = ctx.ev(
        share, "ratio", "Δ(compute_input+compute_output) / Δcompute"
    )
    ev["copy_ms"] = ctx.ev(ms(copy_us), "ms", "compute_input + compute_output per request")
    conf = 0.6
    if base_share is not None:
        span = b.span_s if b else 0.0
        ev["baseline_copy_share"] = ctx.ev(base_share, "ratio", "median healthy copy share", span)
        conf += 0.1
    if explains is not None:
        ev["copy_share_of_latency_rise"] = ctx.ev(explains, "ratio", "Δcopy time / Δmean latency")
        conf += 0.1 if explains >= t.copy_explains else 0.0
    if bytes_up is not None:
        ev["pcie_bytes_per_inference_vs_baseline"] = ctx.ev(
            bytes_up, "ratio", "(PCIe RX B/s ÷ inference rate) vs baseline"
        )
        conf += 0.1 if bytes_up >= t.copy_share_growth else 0.0
    for key, val in (("pcie_rx_bps", f.pcie_rx_bps), ("pcie_tx_bps", f.pcie_tx_bps)):
        if val is not None:
            ev[key] = ctx.ev(val, "B/s", "DCGM PCIe throughput")
            ratio = b.ratio(key, val, floor=1.0) if b else None
            if ratio is not None and ratio >= 1.5:
                conf += 0.1
    if f.container_cpu_saturation is not None and f.container_cpu_saturation < t.cpu_saturated:
        conf += 0.05
    text = (
        "Cut copies before scaling: send inputs in the layout and dtype the model expects (no "
        "NHWC↔NCHW or FP32→FP16 conversion at run time), pass large tensors through system or CUDA "
        "shared memory (tritonclient.utils.shared_memory / cuda_shared_memory), and use binary "
        "tensor data instead of JSON."
    )
    summary = (
        f"Moving tensors dominates the slowdown: input/output handling is {share:.0%} of compute "
        f"({ms(copy_us) or 0:.1f} ms per request)"
        + (f", up from {base_share:.0%}" if base_share is not None else "")
        + (f", and explains {explains:.0%} of the latency rise" if explains is not None else "")
        + "."
    )
    return Finding(CAUSE, ctx.subject, clamp(conf), summary, weigh(ev, WEIGHTS), Fix(text, "", ""))


def _per_inference_ratio(ctx: Context, name: str) -> float | None:
    """Return an exporter rate per inference relative to the same ratio in the baseline."""
    f, b = ctx.features, ctx.baseline
    now_val = getattr(f, name)
    if b is None or now_val is None or not f.inference_rate:
        return None
    base_val, base_rate = b.get(name), b.get("inference_rate")
    if base_val is None or not base_rate or base_val <= 0:
        return None
    return float((now_val / f.inference_rate) / (base_val / base_rate))
