"""The scrape the onset fell in, half healthy, does not make a batcher's steady wait a burst."""

from __future__ import annotations

from tests.unit.synthetic import Phase, opened, run_engine, triton_model
from tritonguard.core.signatures.batching_delay import past_the_onset

IV = 10.0
CONFIG = {
    "max_batch_size": 8,
    "dynamic_batching": {"max_queue_delay_microseconds": "100000"},
    "instance_group": [{"count": 1, "kind": "KIND_GPU"}],
}


def _first_batching_delay(straddle_queue_ms: float | None) -> float:
    """Return when batching_delay opens on a batcher's wait, with or without an onset scrape."""
    onset = [] if straddle_queue_ms is None else [Phase(1, rps=5, queue_ms=straddle_queue_ms)]
    series = triton_model(
        [
            Phase(18, rps=5, queue_ms=0.5),
            *onset,
            Phase(12 - len(onset), rps=5, queue_ms=80, batch=1.6),
        ],
        interval=IV,
    )
    times = [
        at
        for cause, _, at in opened(run_engine(series, interval=IV, configs={"resnet": CONFIG}))
        if cause == "batching_delay"
    ]
    assert times, "batching_delay never opened"
    return times[0]


def test_a_half_healthy_onset_scrape_does_not_delay_the_batcher() -> None:
    """The onset's scrape queues a quarter of the wait after it: the batcher opens as soon.

    At 10 s scrapes the window holds three scrapes and no fast path reads the newest: with the
    onset's scrape counted as the low point of a burst (under half the median scrape), the
    steadiness veto held the batcher back until that scrape left the window, two scrapes later
    than a clean step.
    """
    assert _first_batching_delay(20.0) == _first_batching_delay(None)


def test_the_onset_scrape_goes_only_while_it_is_the_lowest() -> None:
    """A first abnormal scrape below all the later ones straddles the onset; a burst's does not."""
    assert past_the_onset([40.0, 80.0, 82.0], limit=5.0) == [80.0, 82.0]
    # A burst that passed: scrapes after its first are lower, so it reads as a burst still.
    assert past_the_onset([90.0, 40.0, 85.0], limit=5.0) == [90.0, 40.0, 85.0]
    # The first scrape is healthy (no shift in the window yet) or there is no baseline.
    assert past_the_onset([4.0, 80.0, 82.0], limit=5.0) == [4.0, 80.0, 82.0]
    assert past_the_onset([40.0, 80.0, 82.0], limit=None) == [40.0, 80.0, 82.0]
    # Two points would leave one: too few to say anything of steadiness.
    assert past_the_onset([40.0, 80.0], limit=5.0) == [40.0, 80.0]
