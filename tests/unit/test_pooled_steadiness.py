"""A batcher's steadiness is judged on points of enough requests, not on scrapes of one or two."""

from __future__ import annotations

from tests.unit.synthetic import Phase, run_engine, triton_model
from tritonguard.core.findings import IncidentEvent
from tritonguard.core.recurrence import per_scrape_ratio, pooled_ratio
from tritonguard.core.series_store import Series

IV = 2.0
BASE_N = 60  # two minutes of healthy history before the onset
CONFIG = {
    "max_batch_size": 16,
    "dynamic_batching": {"max_queue_delay_microseconds": "150000", "preferred_batch_size": [2, 4]},
    "instance_group": [{"count": 1, "kind": "KIND_GPU"}],
}


def _counter(increases: list[float]) -> Series:
    series = Series("c", (), counter=True)
    value = 0.0
    series.add(0.0, value)
    for k, inc in enumerate(increases, start=1):
        value += inc
        series.add(float(k), value)
    return series


def test_runs_are_formed_from_the_newest_scrape_back() -> None:
    """Scrapes pool until each point holds the minimum; the oldest short run is left out."""
    queue = _counter([10.0, 30.0, 0.0, 60.0, 20.0])
    requests = _counter([1.0, 2.0, 1.0, 2.0, 2.0])
    assert pooled_ratio([queue], [requests], 0.0, 5.0, 3.0) == [(3.0, 30.0 / 3.0), (5.0, 20.0)]


def test_busy_scrapes_are_their_own_points() -> None:
    """At the minimum or more a scrape, pooling is the per-scrape ratio."""
    queue = _counter([100.0, 300.0, 250.0])
    requests = _counter([20.0, 30.0, 25.0])
    args = ([queue], [requests], 0.0, 3.0)
    assert pooled_ratio(*args, 12.0) == per_scrape_ratio(*args)


def test_scrapes_without_requests_are_pooled_into_their_neighbours() -> None:
    """A scrape that served nothing adds nothing, and never divides by zero."""
    queue = _counter([0.0, 0.0, 40.0])
    requests = _counter([0.0, 0.0, 4.0])
    assert pooled_ratio([queue], [requests], 0.0, 3.0, 4.0) == [(3.0, 10.0)]


def _bimodal(scrapes: int) -> list[Phase]:
    """Return low traffic through a batcher with preferred sizes, scrape by scrape.

    A scrape whose requests came in a pair ran at once (no wait), one with a lone request
    waited the whole delay.
    """
    out = []
    for k in range(scrapes):
        lone = k % 2 == 0
        out.append(Phase(1, rps=1.5, queue_ms=150.0 if lone else 0.1, infer_ms=6.0, batch=1.2))
    return out


def _opened(events: list[IncidentEvent]) -> list[str]:
    return [e.cause for e in events if e.event == "opened"]


def test_a_waiting_batcher_at_a_few_requests_a_scrape_is_named() -> None:
    """Three requests a 2 s scrape, alternately waiting the whole delay and none, are a batcher.

    The mean over a dozen requests is steady, so the alternation is not read as queueing in
    bursts.
    """
    series = triton_model(
        [Phase(BASE_N, rps=1.5, queue_ms=0.1, infer_ms=6.0), *_bimodal(60)], interval=IV
    )
    assert _opened(run_engine(series, interval=IV, configs={"resnet": CONFIG})) == [
        "batching_delay"
    ]


def test_queueing_in_bursts_between_busy_scrapes_is_still_not_a_batcher() -> None:
    """At 40 requests a scrape, slow scrapes between normal ones are bursts (a reload's queue).

    Pooling leaves busy scrapes as they are, so the steadiness check still vetoes them.
    """
    bursts = [
        Phase(1, rps=20.0, queue_ms=150.0 if k % 3 == 0 else 0.2, infer_ms=6.0) for k in range(60)
    ]
    series = triton_model(
        [Phase(BASE_N, rps=20.0, queue_ms=0.2, infer_ms=6.0), *bursts], interval=IV
    )
    assert "batching_delay" not in _opened(
        run_engine(series, interval=IV, configs={"resnet": CONFIG})
    )
