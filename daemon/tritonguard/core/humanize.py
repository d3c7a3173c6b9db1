"""Numbers for people: evidence values with their units, durations and labels, never 1.83e+03."""

from __future__ import annotations

import math
from collections.abc import Mapping

from tritonguard.core.findings import Evidence

# Ratios that are a part of a whole (a share, a utilisation, a fraction of a limit) read as a
# percentage; ratios of one reading to another (against the baseline, peak over steady) as a
# factor. Evidence names say which: these are the part-of-a-whole names that do not end in
# ``_share``, ``_util`` or ``_busy``.
_PERCENT_NAMES = frozenset(
    {"host_cpu", "throttled_ratio", "container_cpu_vs_quota", "queue_vs_max_delay"}
)
_PLAIN_RATIO_SUFFIXES = ("_cv",)

# How the evidence names the signatures use read in a message; the rest are spelled out from
# the name itself (``arrivals_vs_served`` → "Arrivals vs served").
LABELS: dict[str, str] = {
    "mean_latency_ms": "Mean latency",
    "mean_queue_ms": "Mean queue time",
    "queue_share": "Queue share of latency",
    "request_rate": "Request rate",
    "p99_ms": "p99 latency",
    "baseline_mean_latency_ms": "Healthy mean latency",
    "baseline_p99_ms": "Healthy p99",
    "busy_instances": "Busy instances",
    "instance_count": "Instances configured",
    "queue_vs_max_delay": "Queue time vs max_queue_delay",
    "max_queue_delay_ms": "max_queue_delay (config)",
    "avg_batch": "Average batch",
    "client_batch": "Client batch size",
    "compute_vs_baseline": "Compute per inference vs healthy",
    "pending": "Pending requests",
    "gpu_util": "GPU utilisation",
    "load_vs_baseline": "Load vs healthy",
    "concurrency_vs_baseline": "Concurrency vs healthy",
    "throughput_vs_baseline": "Throughput vs healthy",
    "early_peak_compute_per_exec_ms": "Slowest early execution",
    "steady_compute_per_exec_ms": "Steady execution",
    "decay_ratio": "Early peak vs steady",
    "early_vs_reference": "Early peak vs warm reference",
    "early_compute_p99_over_p50": "Early compute p99 / p50",
    "early_mean_queue_ms": "Queue time of first requests",
    "early_mean_latency_ms": "Latency of first requests",
    "age_s": "Age of model/pod",
    "has_model_warmup": "model_warmup configured",
    "container_cpu_vs_quota": "Container CPU vs quota",
    "throttled_ratio": "CFS periods throttled",
    "host_cpu": "Host CPU",
    "copy_share_of_compute": "Copies' share of compute",
    "copy_ms": "Copy time per request",
    "baseline_copy_share": "Healthy copy share",
    "copy_share_of_latency_rise": "Copies' share of the latency rise",
    "pcie_bytes_per_inference_vs_baseline": "PCIe bytes per inference vs healthy",
    "pcie_rx_bps": "PCIe RX",
    "pcie_tx_bps": "PCIe TX",
    "spike_period_s": "Spike period",
    "spikes": "Latency spikes",
    "spike_period_cv": "Spread of spike spacing",
    "reload_events": "Reload signs",
    "node_cpu_busy": "Node CPU busy",
    "cpu_waiting_share": "Triton waiting for a CPU",
    "before_cpu_waiting_share": "Triton waiting for a CPU before the shift",
    "triton_cpu_vs_baseline": "Triton CPU vs healthy",
    "hpa_lag": "HPA desired − current",
    "triton_canceled_share": "Cancelled in Triton",
    "ingress_timeouts_share": "Timed out at the ingress",
    "arrivals_vs_served": "Arrivals vs served",
    "backlog_s": "Backlog",
    "arrivals_vs_baseline": "Arrivals vs healthy",
    "ingress_vs_baseline": "Ingress rate vs healthy",
    "rejected_rate": "Rejected (shedding)",
}


def label(name: str) -> str:
    """Return how an evidence name reads in a message."""
    known = LABELS.get(name)
    if known is not None:
        return known
    words = name.removesuffix("_ms").removesuffix("_s").replace("_", " ")
    return words[:1].upper() + words[1:]


def _trim(text: str) -> str:
    """Drop a trailing ``.0``/zeros after a decimal point (``2.50`` → ``2.5``)."""
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return text


def number(value: float, digits: int = 3) -> str:
    """Return ``value`` with ``digits`` significant digits, thousands separated, never in e-notation.

    ``4761`` → ``4,761``; ``62.38`` → ``62.4``; ``0.0213`` → ``0.0213``; ``0`` → ``0``.
    """
    if not math.isfinite(value):
        return "∞" if value > 0 else "−∞" if value < 0 else "unknown"
    if value == 0:
        return "0"
    magnitude = math.floor(math.log10(abs(value)))
    decimals = max(0, digits - 1 - magnitude)
    rounded = round(value, decimals)
    if decimals == 0:
        return f"{rounded:,.0f}"
    return _trim(f"{rounded:,.{decimals}f}")


def percent(ratio: float) -> str:
    """Return a part of a whole as a percentage: ``0.92`` → ``92 %``, ``0.004`` → ``0.4 %``."""
    p = ratio * 100
    if p == 0:
        return "0 %"
    if abs(p) >= 10:
        return f"{p:,.0f} %"
    if abs(p) >= 1:
        return f"{_trim(f'{p:.1f}')} %"
    return f"{number(p, 1)} %"


def factor(ratio: float) -> str:
    """Return one reading against another: ``5.94`` → ``×5.9``, ``13.6`` → ``×14``."""
    if abs(ratio) >= 10:
        return f"×{ratio:,.0f}"
    return f"×{number(ratio, 2)}"


def milliseconds(ms: float) -> str:
    """Return a time given in ms in the unit that reads best: ``0.5`` → ``500 µs``, ``1830`` → ``1.83 s``."""
    if abs(ms) >= 1000:
        return seconds(ms / 1000)
    if abs(ms) >= 1:
        return f"{number(ms)} ms"
    return f"{number(ms * 1000)} µs"


def microseconds(us: float) -> str:
    """Return a time given in µs (Triton's unit) the way :func:`milliseconds` would."""
    return milliseconds(us / 1000)


def seconds(s: float) -> str:
    """Return a time given in seconds: ``45.2`` → ``45.2 s``, ``130`` → ``2 min 10 s``."""
    if abs(s) < 1:
        return milliseconds(s * 1000)
    if abs(s) < 100:
        return f"{number(s)} s"
    total = round(abs(s))
    sign = "−" if s < 0 else ""
    hours, rest = divmod(total, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{sign}{hours} h {minutes} min" if minutes else f"{sign}{hours} h"
    return f"{sign}{minutes} min {secs} s" if secs else f"{sign}{minutes} min"


def bytes_per_second(bps: float) -> str:
    """Return a byte rate in SI units: ``1.2e9`` → ``1.2 GB/s``."""
    for unit, size in (("GB/s", 1e9), ("MB/s", 1e6), ("kB/s", 1e3)):
        if abs(bps) >= size:
            return f"{number(bps / size)} {unit}"
    return f"{number(bps)} B/s"


def _is_percent(name: str) -> bool:
    if name in _PERCENT_NAMES:
        return True
    if name.endswith(_PLAIN_RATIO_SUFFIXES) or "_vs_" in name or "_over_" in name:
        return False
    return name.endswith(("_share", "_util", "_busy")) or "_share_" in name


def _plural(count: float, word: str) -> str:
    return word if count == 1 else f"{word}s"


def value(name: str, ev: Evidence, context: Mapping[str, Evidence] | None = None) -> str:
    """Return one evidence value with its unit, as a person reads it.

    ``context`` is the rest of the finding's evidence: busy instances read against the
    configured count (``0.02 of 1 (2 %)``) when the finding knows it.
    """
    v = ev.value
    if v is None:
        return "unknown"
    unit = ev.unit
    if unit == "bool":
        return "yes" if v else "no"
    if unit == "ratio":
        if name.endswith(_PLAIN_RATIO_SUFFIXES):
            return number(v, 2)
        return percent(v) if _is_percent(name) else factor(v)
    if unit == "ms":
        return milliseconds(v)
    if unit == "us":
        return microseconds(v)
    if unit == "s":
        return seconds(v)
    if unit == "B/s":
        return bytes_per_second(v)
    if unit == "instances":
        count = (context or {}).get("instance_count")
        if name == "busy_instances" and count is not None and count.value:
            n = count.value
            return f"{number(v, 2)} of {number(n)} ({percent(v / n)})"
        return f"{number(v, 2)} {_plural(v, 'instance')}"
    if unit in ("count", "requests", "replicas"):
        shown = f"{v:,.0f}" if float(v).is_integer() or abs(v) >= 100 else number(v)
        return shown if unit == "count" else f"{shown} {_plural(v, unit.rstrip('s'))}"
    return f"{number(v)} {unit}"


def window(ev: Evidence) -> str:
    """Return the window an evidence value was measured over (``over 30 s``), or ``""``."""
    # A config value is no measurement: it has no window, whatever the signature filled in.
    if ev.window_s <= 0 or ev.what.startswith("model config"):
        return ""
    return f"over {seconds(ev.window_s)}"


def ranked(evidence: Mapping[str, Evidence]) -> list[tuple[str, Evidence]]:
    """Return the evidence by the weight the signature gave it, heaviest first.

    Ties keep the order the signature wrote them in.
    """
    items = list(evidence.items())
    order = {name: i for i, (name, _) in enumerate(items)}
    return sorted(items, key=lambda kv: (-kv[1].weight, order[kv[0]]))
