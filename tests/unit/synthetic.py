"""Builds Triton-shaped series in promtool's expanding notation for engine unit tests."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from tritonguard.core.engine import Engine, EngineConfig
from tritonguard.core.findings import IncidentEvent
from tritonguard.core.recorded_configs import RecordedConfigs
from tritonguard.core.replay import drive
from tritonguard.core.samples import Sample
from tritonguard.core.series_notation import expand, parse_series_selector

START = 1_700_000_000.0


@dataclass(frozen=True)
class Phase:
    """Per-scrape behaviour of one model for ``n`` scrapes (rates are per second)."""

    n: int
    rps: float
    queue_ms: float = 1.0
    input_ms: float = 0.1
    infer_ms: float = 10.0
    output_ms: float = 0.1
    batch: float = 1.0
    client_batch: float = 1.0
    pending: float = 0.0
    canceled_rps: float = 0.0
    rejected_rps: float = 0.0
    extra: Mapping[str, float] = field(default_factory=dict)


def notation(increments: Sequence[tuple[float, int]]) -> str:
    """Counter notation: each (increment per scrape, scrapes) segment continues the last value."""
    parts = []
    value = 0.0
    first = True
    for inc, n in increments:
        if first:
            parts.append(f"{value:g}+{inc:g}x{n}")
            value += inc * n
            first = False
        else:
            parts.append(f"{value + inc:g}+{inc:g}x{n - 1}")
            value += inc * n
    return " ".join(parts)


def gauge(values: Sequence[tuple[float, int]]) -> str:
    """Gauge notation: each (value, scrapes) segment holds the value."""
    parts = []
    first = True
    for v, n in values:
        parts.append(f"{v:g}x{n if first else n - 1}")
        first = False
    return " ".join(parts)


def triton_model(
    phases: Sequence[Phase],
    *,
    interval: float,
    model: str = "resnet",
    pod: str = "triton-0",
    namespace: str = "prod",
) -> dict[str, str]:
    """Series for one model: Triton's counters and pending gauge, from per-phase behaviour."""
    sel = f'model="{model}",version="1",namespace="{namespace}",pod="{pod}"'

    def counter(per_req: str) -> list[tuple[float, int]]:
        out = []
        for p in phases:
            reqs = p.rps * interval
            execs = reqs * p.client_batch / p.batch
            compute = p.input_ms + p.infer_ms + p.output_ms
            per = {
                "success": reqs,
                "count": reqs * p.client_batch,
                "exec": execs,
                "request": reqs * (p.queue_ms + compute) * 1000,
                "queue": reqs * p.queue_ms * 1000,
                "input": reqs * p.input_ms * 1000,
                "infer": reqs * p.infer_ms * 1000,
                "output": reqs * p.output_ms * 1000,
                "canceled": p.canceled_rps * interval,
                "rejected": p.rejected_rps * interval,
            }[per_req]
            out.append((round(per, 6), p.n))
        return out

    names = {
        "nv_inference_request_success": "success",
        "nv_inference_count": "count",
        "nv_inference_exec_count": "exec",
        "nv_inference_request_duration_us": "request",
        "nv_inference_queue_duration_us": "queue",
        "nv_inference_compute_input_duration_us": "input",
        "nv_inference_compute_infer_duration_us": "infer",
        "nv_inference_compute_output_duration_us": "output",
    }
    series = {f"{name}{{{sel}}}": notation(counter(kind)) for name, kind in names.items()}
    series[f'nv_inference_request_failure{{{sel},reason="CANCELED"}}'] = notation(
        counter("canceled")
    )
    series[f'nv_inference_request_failure{{{sel},reason="REJECTED"}}'] = notation(
        counter("rejected")
    )
    series[f"nv_inference_pending_request_count{{{sel}}}"] = gauge(
        [(p.pending, p.n) for p in phases]
    )
    return series


def samples_of(series: Mapping[str, str], *, interval: float, start: float = START) -> list[Sample]:
    """Expand notation into timed samples (missing values are skipped)."""
    out = []
    for selector, values in series.items():
        name, labels = parse_series_selector(selector)
        for t, v in expand(values, start=start, interval=interval):
            if v is not None:
                out.append(Sample(name, labels, v, t))
    return out


def run_engine(
    series: Mapping[str, str],
    *,
    interval: float,
    config: EngineConfig | None = None,
    configs: Mapping[str, Mapping[str, object]] | None = None,
    reads: RecordedConfigs | None = None,
) -> list[IncidentEvent]:
    """Replay the series through a fresh engine and return every incident transition.

    ``configs`` are known from the start; ``reads`` reach the engine as a daemon's reads
    would (``drive``'s ``configs``).
    """
    engine = Engine(config)
    if configs:
        from tritonguard.core.findings import Subject

        for model, cfg in configs.items():
            engine.note_model_config(Subject("prod", model, "triton-0"), cfg)
    events: list[IncidentEvent] = []
    samples = samples_of(series, interval=interval)
    for _, evs in drive(engine, samples, eval_interval_s=5.0, configs=reads):
        events.extend(evs)
    return events


def opened(events: Sequence[IncidentEvent]) -> list[tuple[str, str, float]]:
    """(cause, model, seconds after START) of each opened incident."""
    return [(e.cause, e.subject.model, e.at - START) for e in events if e.event == "opened"]
