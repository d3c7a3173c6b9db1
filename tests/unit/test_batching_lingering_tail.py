"""A reload's cold executions lingering in the compute summary do not hide a waiting batcher."""

from __future__ import annotations

from tests.unit.synthetic import Phase, gauge, run_engine, triton_model
from tritonguard.core.findings import IncidentEvent

IV = 5.0
BASE_N = 24  # two minutes of healthy history before the onset
FAULT_N = 24
SEL = 'model="resnet",version="1",namespace="prod",pod="triton-0"'
CONFIG = {
    "max_batch_size": 8,
    "dynamic_batching": {"max_queue_delay_microseconds": "100000"},
    "instance_group": [{"count": 1, "kind": "KIND_GPU"}],
}


def _series(fault_p99_us: float) -> dict[str, str]:
    """Return a batcher's steady wait at low traffic, with the compute summary's p50 and p99."""
    series = triton_model(
        [Phase(BASE_N, rps=5, queue_ms=0.5), Phase(FAULT_N, rps=5, queue_ms=80, batch=1.6)],
        interval=IV,
    )
    summary = "nv_inference_compute_infer_summary_us"
    series[f'{summary}{{{SEL},quantile="0.5"}}'] = gauge([(10_000.0, BASE_N + FAULT_N)])
    series[f'{summary}{{{SEL},quantile="0.99"}}'] = gauge(
        [(15_000.0, BASE_N), (fault_p99_us, FAULT_N)]
    )
    return series


def _opened(events: list[IncidentEvent]) -> list[str]:
    return [e.cause for e in events if e.event == "opened"]


def test_a_tight_compute_tail_leaves_the_batcher_named() -> None:
    """p99 of compute 1.5x its p50 (batch-size spread): the batcher's wait is named."""
    events = run_engine(_series(15_000.0), interval=IV, configs={"resnet": CONFIG})
    assert "batching_delay" in _opened(events)


def test_a_reloads_cold_executions_in_the_summary_do_not_hide_the_batcher() -> None:
    """p99 of compute 20x its p50 while requests wait at unchanged compute is still a batcher.

    The reload that applied the raised delay ran a few cold executions, and the summary's
    sliding minute keeps them in its p99 long after; executions are warm again (compute per
    inference at its baseline), so the queue is the batcher's timer. A live deploy of a raised
    max_queue_delay read as this veto's reload and was never named.
    """
    events = run_engine(_series(200_000.0), interval=IV, configs={"resnet": CONFIG})
    assert "batching_delay" in _opened(events)
