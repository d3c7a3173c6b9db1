"""memory_copy: host↔device copies and format conversion dominate compute."""

from __future__ import annotations

from daemon.core.findings import Finding, Fix
from daemon.core.signatures.context import Context, clamp, ms, symptom_evidence

CAUSE = "memory_copy"


def check(ctx: Context) -> Finding | None:
    """Input/output handling takes a large, growing share of compute; CPU is not the limit."""
    f, t, b = ctx.features, ctx.thresholds, ctx.baseline
    if not ctx.symptom.sustained or f.input_share is None or f.output_share is None:
        return None
    share = f.input_share + f.output_share
    if share < t.input_share_high:
        return None
    base_share = None
    if b is not None and b.get("input_share") is not None:
        base_share = (b.get("input_share") or 0.0) + (b.get("output_share") or 0.0)
        if share < base_share + 0.1 and share < 1.5 * base_share:
            return None  # always copy-heavy and not growing: the copies did not explode latency
    if f.container_cpu_saturation is not None and f.container_cpu_saturation >= 0.95:
        return None  # copies may be slow because the CPU is starved: cpu_bottleneck owns that
    ev = symptom_evidence(ctx)
    ev["copy_share_of_compute"] = ctx.ev(
        share, "ratio", "Δ(compute_input+compute_output) / Δcompute"
    )
    ev["compute_input_ms"] = ctx.ev(ms(f.compute_input_us), "ms", "compute_input per request")
    conf = 0.6
    if base_share is not None:
        ev["baseline_copy_share"] = ctx.ev(
            base_share, "ratio", "median healthy copy share", b.span_s if b else 0.0
        )
        conf += 0.15
    for key, val in (("pcie_rx_bps", f.pcie_rx_bps), ("pcie_tx_bps", f.pcie_tx_bps)):
        if val is not None:
            ev[key] = ctx.ev(val, "B/s", "DCGM PCIe throughput")
            ratio = b.ratio(key, val, floor=1.0) if b else None
            if ratio is not None and ratio >= 1.5:
                conf += 0.05
    if f.container_cpu_saturation is not None and f.container_cpu_saturation < t.cpu_saturated:
        conf += 0.05
    if f.gpu_util is not None and f.gpu_util >= t.gpu_underused:
        conf += 0.05
    text = (
        "Cut copies before scaling: send inputs in the layout and dtype the model expects (no "
        "NHWC↔NCHW or FP32→FP16 conversion at run time), pass large tensors through system or CUDA "
        "shared memory (tritonclient.utils.shared_memory / cuda_shared_memory), and use binary "
        "tensor data instead of JSON."
    )
    summary = (
        f"Moving tensors dominates: {share:.0%} of compute time is input/output handling "
        f"({ms(f.compute_input_us) or 0:.1f} ms of input copy per request)"
        + (f", up from {base_share:.0%}" if base_share is not None else "")
        + "."
    )
    return Finding(CAUSE, ctx.subject, clamp(conf), summary, ev, Fix(text, "", ""))
