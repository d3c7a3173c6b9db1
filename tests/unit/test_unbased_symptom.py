"""Without a baseline, queueing is a symptom only when it lasts through a whole window."""

from __future__ import annotations

import pytest

from tests.unit.synthetic import START, Phase, samples_of, triton_model
from tritonguard.core.engine import Engine
from tritonguard.core.findings import IncidentEvent
from tritonguard.core.replay import drive

KEY = ("prod", "triton-0", "resnet")
QUEUED = "wait longer than they compute"


def _run(
    phases: list[Phase], interval: float = 2.0
) -> tuple[list[tuple[float, list[str]]], list[IncidentEvent]]:
    """Replay the phases at every scrape; return each scrape's symptom reasons and the events."""
    engine = Engine()
    reasons: list[tuple[float, list[str]]] = []
    events: list[IncidentEvent] = []
    series = triton_model(phases, interval=interval)
    for at, evs in drive(engine, samples_of(series, interval=interval), eval_interval_s=interval):
        events.extend(evs)
        diagnosis = engine.last_diagnoses.get(KEY)
        if diagnosis is not None:
            reasons.append((at - START, list(diagnosis.symptom_reasons)))
    return reasons, events


@pytest.mark.parametrize(("interval", "first_up"), [(2.0, 30.0), (10.0, 30.0), (20.0, 40.0)])
def test_queueing_from_the_first_scrape_waits_for_rate_window_s(
    interval: float, first_up: float
) -> None:
    """A model that queues from the start is a symptom from the first scrape 30 s on.

    The first scrapes of a server (or of the daemon's view of one) hold start-up transients;
    an overload that lasts keeps queueing, and is read at the first scrape once the request
    counter has been seen for ``rate_window_s`` (30 s) with a majority of the newest
    scrapes queued: at 20 s scrapes that is the second queued scrape, at 40 s, as the
    exported rules read it.
    """
    reasons, _ = _run([Phase(round(120 / interval), rps=20, queue_ms=60.0, infer_ms=8.0)], interval)
    up = [at for at, r in reasons if any(QUEUED in x for x in r)]
    assert up and up[0] == first_up
    assert all(any(QUEUED in x for x in r) for at, r in reasons if at >= first_up)


@pytest.mark.parametrize("interval", [2.0, 10.0])
def test_a_start_up_burst_of_queueing_opens_nothing(interval: float) -> None:
    """A model queueing for its first 8 s (a reload, cold executions), then serving, is healthy.

    At 2 s and 10 s scrapes; from about 20 s up one scrape holds the whole burst (documented).

    Over the first window the burst still holds most of the queue time, so the window's
    queue share passes one half; but most of its scrapes queue little, and the server
    short of nothing. Before the lasting check this opened too_few_instances in the lab.
    """
    burst = round(8 / interval)
    reasons, events = _run(
        [
            Phase(burst, rps=25, queue_ms=600.0, infer_ms=9.0),
            Phase(round(80 / interval), rps=25, queue_ms=1.0, infer_ms=9.0),
        ],
        interval,
    )
    assert not events
    assert not any(QUEUED in x for _, r in reasons for x in r)
