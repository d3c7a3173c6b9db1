"""Without a baseline, queueing is a symptom only when it lasts through a whole window."""

from __future__ import annotations

from tests.unit.synthetic import Phase, samples_of, triton_model
from tritonguard.core.engine import Engine
from tritonguard.core.findings import IncidentEvent
from tritonguard.core.replay import drive

IV = 2.0
KEY = ("prod", "triton-0", "resnet")
QUEUED = "wait longer than they compute"


def _run(phases: list[Phase]) -> tuple[Engine, list[tuple[float, list[str]]], list[IncidentEvent]]:
    """Replay the phases at every scrape; return the engine, each scrape's reasons, the events."""
    engine = Engine()
    reasons: list[tuple[float, list[str]]] = []
    events: list[IncidentEvent] = []
    series = triton_model(phases, interval=IV)
    for at, evs in drive(engine, samples_of(series, interval=IV), eval_interval_s=IV):
        events.extend(evs)
        diagnosis = engine.last_diagnoses.get(KEY)
        if diagnosis is not None:
            reasons.append((at, list(diagnosis.symptom_reasons)))
    return engine, reasons, events


def test_queueing_from_the_first_scrape_waits_for_a_whole_window() -> None:
    """A model that queues from the start is a symptom once a window is seen, not before.

    The first scrapes of a server (or of the daemon's view of one) hold start-up transients;
    an overload that lasts keeps queueing through the whole 30 s window and is read then.
    """
    _, reasons, _ = _run([Phase(40, rps=20, queue_ms=60.0, infer_ms=8.0)])
    start = reasons[0][0]
    young = [r for at, r in reasons if at - start < 26]
    grown = [r for at, r in reasons if at - start >= 32]
    assert young and not any(QUEUED in x for r in young for x in r)
    assert grown and all(any(QUEUED in x for x in r) for r in grown)


def test_a_start_up_burst_of_queueing_opens_nothing() -> None:
    """A model queueing for its first 8 s (a reload, cold executions), then serving, is healthy.

    Over the first window the burst still holds most of the queue time, so the window's
    queue share passes one half; but most of its scrapes queue little, and the server
    short of nothing. Before the lasting check this opened too_few_instances in the lab.
    """
    _, reasons, events = _run(
        [
            Phase(4, rps=25, queue_ms=600.0, infer_ms=9.0),
            Phase(40, rps=25, queue_ms=1.0, infer_ms=9.0),
        ]
    )
    assert not events
    assert not any(QUEUED in x for _, r in reasons for x in r)
