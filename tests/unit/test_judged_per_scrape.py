"""A subject is judged once per scrape of its Triton, however often the engine evaluates."""

from __future__ import annotations

from benchmarks.fleet_gen import Fleet, FleetSpec
from benchmarks.healthy_fleet import fleet_ingesters
from tritonguard.core.engine import Engine
from tritonguard.core.findings import IncidentEvent
from tritonguard.core.scrape_ingest import TargetIngest

# Pod 1's targets (and the exporters) are scraped this long after pod 0's.
LAG_S = 5.0


def _staggered(
    fleet: Fleet, engine: Engine, scrapes: int
) -> tuple[list[IncidentEvent], list[float], dict[float, str]]:
    """Scrape pod 0 at each interval and the rest ``LAG_S`` later, evaluating after each.

    Return the events, pod 0's scrape times, and pod 0's strongest finding at each of them.
    """
    ingest: dict[str, TargetIngest] = fleet_ingesters(fleet, engine.store)
    first = f"triton/{fleet.pods[0][1]}"
    events: list[IncidentEvent] = []
    pod0: list[float] = []
    read: dict[float, str] = {}
    for t, texts in fleet.scrape_many(scrapes):
        ingest[first].ingest(texts[first], t)
        events.extend(engine.evaluate(t))
        pod0.append(t)
        found = [
            f"{x.cause}:{x.confidence:.2f}"
            for k, d in engine.last_diagnoses.items()
            if k[1] == fleet.pods[0][1]
            for x in d.findings
        ]
        read[t] = max(found, default="")
        for name, text in texts.items():
            if name != first:
                ingest[name].ingest(text, t + LAG_S)
        events.extend(engine.evaluate(t + LAG_S))
    return events, pod0, read


def _warmed(fleet: Fleet, scrapes: int) -> tuple[Engine, dict[str, TargetIngest], float]:
    """Scrape every target of ``fleet`` at once and evaluate, ``scrapes`` times.

    Return the engine, its ingesters and the last scrape's time.
    """
    engine = Engine()
    ingest = fleet_ingesters(fleet, engine.store)
    t = 0.0
    for t, texts in fleet.scrape_many(scrapes):
        for name, text in texts.items():
            ingest[name].ingest(text, t)
        engine.evaluate(t)
    return engine, ingest, t


def test_a_hold_counts_scrapes_not_evaluations_woken_by_other_targets() -> None:
    """Two evaluations of one scrape are one reading: an incident opens on a later scrape.

    Pod 0 turns into a retry storm; every evaluation woken by pod 1's scrape between two of
    pod 0's would, judged again, let pod 0's first faulty scrape count for the two the hold
    needs. The incident opens at one of pod 0's own scrapes, after the first it was read on.
    """
    fleet = Fleet(FleetSpec(pods=2, models=2, replicas=2, seed=4, fault="retry_storm", fault_at=20))
    events, pod0, read = _staggered(fleet, Engine(), 30)
    opened = [e for e in events if e.event == "opened"]
    assert opened, "the retry storm must open"
    first_read = min(t for t, r in read.items() if r.startswith("retry_storm"))
    assert all(e.at in pod0 and e.at > first_read for e in opened)


def test_between_its_scrapes_a_subject_keeps_its_diagnosis_and_baseline() -> None:
    """An evaluation with nothing new for a subject neither re-judges nor re-learns it.

    Its diagnosis is the same object, and its baseline history takes no second snapshot
    of the same scrape.
    """
    engine, _, t = _warmed(Fleet(FleetSpec(pods=1, models=2, seed=6)), 12)
    held = dict(engine.last_diagnoses)
    snapshots = engine.history.snapshots
    engine.evaluate(t + 3.0)
    assert engine.last_diagnoses == held
    assert all(engine.last_diagnoses[k] is d for k, d in held.items())
    assert engine.history.snapshots == snapshots


def test_a_subject_not_scraped_again_goes_stale_and_is_dropped() -> None:
    """Without new scrapes a subject's diagnosis lasts only while its data counts as fresh.

    After its staleness span nothing reads it as current (``is_fresh``, ``features``), as if
    it had been judged stale, and a new scrape brings it back.
    """
    fleet = Fleet(FleetSpec(pods=1, models=1, seed=2))
    engine, ingest, t = _warmed(fleet, 8)
    (key,) = engine.last_diagnoses
    subject = engine.last_diagnoses[key].subject
    stale_after = engine.t.stale_after(engine.last_diagnoses[key].features.interval_s)
    engine.evaluate(t + stale_after - 1.0)
    assert key in engine.last_diagnoses and engine.is_fresh(subject, t + stale_after - 1.0)
    engine.evaluate(t + stale_after + 1.0)
    assert key not in engine.last_diagnoses
    assert not engine.is_fresh(subject, t + stale_after + 1.0)
    later = t + stale_after + 5.0
    for name, text in fleet.scrape().items():
        ingest[name].ingest(text, later)
    engine.evaluate(later)
    assert key in engine.last_diagnoses
