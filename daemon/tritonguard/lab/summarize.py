"""Summarize recorded lab traces before and after onset: ``python -m tritonguard.lab.summarize DIR``."""

from __future__ import annotations

import json
import math
import sys
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path

from tritonguard.core.exposition import ExpositionError, decode_payload, parse_exposition
from tritonguard.core.samples import Labels, Sample, label

Series = dict[tuple[str, Labels], list[tuple[float, float]]]


def load_series(trace: Path) -> Series:
    """Read a trace into per-series sorted (timestamp, value) points."""
    text = decode_payload(trace.read_bytes(), source=str(trace))
    exp = parse_exposition(text, source=str(trace))
    series: Series = defaultdict(list)
    for s in exp.samples:
        if s.timestamp is not None:
            series[(s.name, s.labels)].append((s.timestamp, s.value))
    for points in series.values():
        points.sort()
    return series


def increase(points: list[tuple[float, float]], lo: float, hi: float, start: float) -> float:
    """Counter increase inside [lo, hi], handling resets as ``rate()`` does.

    A series born after ``start`` (a new model version) counts its first value, since it
    started from zero.
    """
    inside = [(t, v) for t, v in points if lo <= t <= hi]
    before = [(t, v) for t, v in points if t < lo]
    if before:
        inside.insert(0, before[-1])
    total = 0.0
    if inside and points[0][0] > start + 1 and inside[0] == points[0]:
        total += inside[0][1]
    for (_, a), (_, b) in pairwise(inside):
        total += b - a if b >= a else b
    return total


@dataclass
class Window:
    """Aggregates of one phase of one scenario."""

    rate: float
    queue_share: float
    mean_ms: float
    p99_ms: float
    worst_ms: float
    compute_ms: float
    input_share: float
    batch: float
    pending_max: float
    gpu_util: float
    pcie_rx: float
    throttled: float
    triton_cpu: float
    node_busy: float
    ingress_rate: float
    ingress_errors: float


def _select(series: Series, name: str, **match: str) -> list[list[tuple[float, float]]]:
    return [
        pts
        for (n, labels), pts in series.items()
        if n == name and all(label(labels, k) == v for k, v in match.items())
    ]


def worst_interval_ms(series: Series, model: str, lo: float, hi: float, start: float) -> float:
    """Largest mean request latency over one scrape interval inside [lo, hi] (spikes show here)."""
    stamps = sorted(
        {t for (n, _), pts in series.items() if n == "nv_inference_request_success" for t, _ in pts}
    )
    stamps = [t for t in stamps if lo <= t <= hi]
    worst = float("nan")
    for a, b in pairwise(stamps):
        count = sum(
            increase(p, a, b, start)
            for p in _select(series, "nv_inference_request_success", model=model)
        )
        total = sum(
            increase(p, a, b, start)
            for p in _select(series, "nv_inference_request_duration_us", model=model)
        )
        if count > 0:
            mean = total / count / 1e3
            worst = mean if math.isnan(worst) else max(worst, mean)
    return worst


def window(series: Series, model: str, lo: float, hi: float, start: float) -> Window:
    """Compute the phase aggregates of ``model`` between ``lo`` and ``hi``."""
    # Rates divide by the time the counters' increases really span (scrape to scrape).
    stamps = sorted({t for pts in series.values() for t, _ in pts})
    earlier = [t for t in stamps if t < lo]
    inside = [t for t in stamps if lo <= t <= hi]
    first = earlier[-1] if earlier else (inside[0] if inside else lo)
    dt = max(1e-9, (inside[-1] if inside else hi) - first)

    def inc(name: str, **match: str) -> float:
        return sum(increase(p, lo, hi, start) for p in _select(series, name, **match))

    def gauge(name: str, how: str = "mean", **match: str) -> float:
        values = [
            v
            for p in _select(series, name, **match)
            for t, v in p
            if lo <= t <= hi and not math.isnan(v)
        ]
        if not values:
            return float("nan")
        return max(values) if how == "max" else sum(values) / len(values)

    success = inc("nv_inference_request_success", model=model)
    request_us = inc("nv_inference_request_duration_us", model=model)
    queue_us = inc("nv_inference_queue_duration_us", model=model)
    c_in = inc("nv_inference_compute_input_duration_us", model=model)
    c_inf = inc("nv_inference_compute_infer_duration_us", model=model)
    c_out = inc("nv_inference_compute_output_duration_us", model=model)
    inferences = inc("nv_inference_count", model=model)
    execs = inc("nv_inference_exec_count", model=model)
    failures = inc("nv_inference_request_failure", model=model)
    periods = inc("container_cpu_cfs_periods_total")
    throttled = inc("container_cpu_cfs_throttled_periods_total")
    idle = inc("node_cpu_seconds_total", mode="idle")
    cpus = len(_select(series, "node_cpu_seconds_total", mode="idle"))
    ingress = inc("nginx_ingress_controller_requests")
    ok = inc("nginx_ingress_controller_requests", status="200")
    nan = float("nan")
    return Window(
        rate=success / dt,
        queue_share=queue_us / request_us if request_us else nan,
        mean_ms=request_us / (success + failures) / 1e3 if success + failures else nan,
        p99_ms=gauge("nv_inference_request_summary_us", "max", model=model, quantile="0.99") / 1e3,
        worst_ms=worst_interval_ms(series, model, lo, hi, start),
        compute_ms=c_inf / inferences / 1e3 if inferences else nan,
        input_share=c_in / (c_in + c_inf + c_out) if c_in + c_inf + c_out else nan,
        batch=inferences / execs if execs else nan,
        pending_max=gauge("nv_inference_pending_request_count", "max", model=model),
        gpu_util=gauge("DCGM_FI_DEV_GPU_UTIL"),
        pcie_rx=gauge("DCGM_FI_PROF_PCIE_RX_BYTES") / 1e6,
        throttled=throttled / periods if periods else nan,
        triton_cpu=inc("container_cpu_usage_seconds_total") / dt,
        node_busy=1 - idle / (dt * cpus) if cpus else nan,
        ingress_rate=ingress / dt,
        ingress_errors=(ingress - ok) / dt,
    )


COLUMNS = (
    ("rate", "req/s", "{:.1f}"),
    ("queue_share", "queue share", "{:.2f}"),
    ("mean_ms", "mean ms", "{:.0f}"),
    ("p99_ms", "p99 ms (summary, max)", "{:.0f}"),
    ("worst_ms", "worst scrape-interval mean ms", "{:.0f}"),
    ("compute_ms", "infer ms/inference", "{:.1f}"),
    ("input_share", "compute_input share", "{:.3f}"),
    ("batch", "avg batch", "{:.2f}"),
    ("pending_max", "pending max", "{:.0f}"),
    ("gpu_util", "GPU util %", "{:.0f}"),
    ("pcie_rx", "PCIe RX MB/s", "{:.1f}"),
    ("throttled", "throttled ratio", "{:.2f}"),
    ("triton_cpu", "Triton CPU cores", "{:.2f}"),
    ("node_busy", "node CPU busy", "{:.2f}"),
    ("ingress_rate", "ingress att/s", "{:.1f}"),
    ("ingress_errors", "ingress non-200/s", "{:.1f}"),
)


def summarize(directory: Path) -> Iterable[tuple[str, str, str, Window, Window]]:
    """Yield (scenario, cause, model, before, after) for every labelled trace in ``directory``."""
    for labels_path in sorted(directory.glob("*.labels.json")):
        meta = json.loads(labels_path.read_text())
        trace = labels_path.with_name(labels_path.name.replace(".labels.json", ".om.gz"))
        if not trace.exists():
            continue
        series = load_series(trace)
        start, onset = float(meta["start"]), float(meta["onset"])
        end = max(t for pts in series.values() for t, _ in pts)
        before = window(series, meta["model"], start, onset, start)
        after = window(series, meta["model"], onset, end, start)
        yield meta["scenario"], meta["cause"] or "healthy", meta["model"], before, after


def _fmt(value: float, pattern: str) -> str:
    return "–" if math.isnan(value) else pattern.format(value)


def markdown(rows: Iterable[tuple[str, str, str, Window, Window]]) -> str:
    """Render the summary as a Markdown table, one row per phase."""
    head = "| scenario | cause | phase | " + " | ".join(c[1] for c in COLUMNS) + " |"
    out = [head, "|" + "---|" * (3 + len(COLUMNS))]
    for name, cause, _model, before, after in rows:
        for phase, w in (("before", before), ("after", after)):
            cells = " | ".join(_fmt(getattr(w, c[0]), c[2]) for c in COLUMNS)
            out.append(
                f"| {name if phase == 'before' else ''} | {cause if phase == 'before' else ''} "
                f"| {phase} | {cells} |"
            )
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    """Print the before/after table for the traces in the given directory."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1 or not Path(args[0]).is_dir():
        print(
            "usage: python -m tritonguard.lab.summarize DIR (a directory of *.om.gz + *.labels.json)",
            file=sys.stderr,
        )
        return 2
    try:
        print(markdown(summarize(Path(args[0]))))
    except (ExpositionError, KeyError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())


__all__ = ["Sample", "main", "summarize", "window"]
