"""Replay throughput: trace seconds the engine diagnoses per wall second, on a 50-model trace."""

from __future__ import annotations

from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from benchmarks.bench_parser import CAPTURE
from tritonguard.core.engine import Engine
from tritonguard.core.exposition import parse_exposition
from tritonguard.core.metric_names import is_counter
from tritonguard.core.replay import drive
from tritonguard.core.samples import Sample
from tritonguard.core.trace_writer import render_trace

START = 1_700_000_000.0


def build_trace(scrapes: int = 150, interval: float = 2.0) -> tuple[str, float]:
    """Build a trace of the real 50-model capture scraped every ``interval`` s, counters advancing.

    Returns the OpenMetrics text and the trace's span in seconds.
    """
    base = parse_exposition(CAPTURE.read_text()).samples
    out: list[Sample] = []
    for k in range(scrapes):
        t = START + k * interval
        for s in base:
            v = s.value + k * max(s.value, 1.0) * 0.01 if is_counter(s.name) else s.value
            out.append(Sample(s.name, s.labels, v, t))
    return render_trace(out), (scrapes - 1) * interval


def replay_text(text: str) -> int:
    """Parse and replay a trace through a fresh engine; return the evaluations made."""
    engine = Engine()
    samples = parse_exposition(text, openmetrics=True).samples
    for _ in drive(engine, samples, eval_interval_s=5.0):
        pass
    return engine.evaluations


def read_with_prometheus_client(text: str) -> int:
    """Read the same trace with prometheus_client only: the baseline for the ratio."""
    return sum(len(f.samples) for f in text_string_to_metric_families(text))


def test_bench_replay(benchmark: Any) -> None:
    """Time a full replay (parse, store, features, signatures, incidents) of the trace."""
    text, _ = build_trace(scrapes=60)
    assert benchmark(replay_text, text) > 0


def test_bench_replay_baseline(benchmark: Any) -> None:
    """Time only reading the same trace with prometheus_client, the baseline for the ratio."""
    text, _ = build_trace(scrapes=60)
    assert benchmark(read_with_prometheus_client, text) > 0
