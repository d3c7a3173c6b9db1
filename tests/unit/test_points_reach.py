"""Points are kept only as far back as a reader reads; series outlive their points."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.fleet_gen import Fleet, FleetSpec
from benchmarks.healthy_fleet import fleet_ingesters
from tritonguard.core.engine import Engine, EngineConfig, points_reach_s
from tritonguard.core.reload_signs import RESTARTS, restarts_reach_s
from tritonguard.core.samples import Labels, Sample, make_labels
from tritonguard.core.series_store import SeriesStore
from tritonguard.core.thresholds import Thresholds
from tritonguard.runtime.audit_store import AuditStore
from tritonguard.runtime.flight_recorder import FlightRecorder
from tritonguard.settings import Settings

L = make_labels({"model": "m", "namespace": "prod", "pod": "p"})
SUCCESS = "nv_inference_request_success"


def _fill(store: SeriesStore, name: str, until: int, labels: Labels = L) -> None:
    """Add a counter rising by 10 a scrape, every 10 s from 0 to ``until``."""
    for t in range(0, until + 1, 10):
        store.add(Sample(name, labels, float(t), float(t)), float(t))


def test_points_older_than_the_reach_go_but_one_anchor() -> None:
    """A series keeps the points of its reach and the one before it, which a rate there needs.

    The increase over the whole reach is what it was with every point kept.
    """
    full, short = SeriesStore(retention_s=900.0), SeriesStore(900.0, points_kept_s=120.0)
    for store in (full, short):
        _fill(store, SUCCESS, 600)
        store.expire(600.0)
    kept = next(short.family(SUCCESS))
    assert kept.times[0] == 470.0 and kept.times[1] == 480.0
    assert short.points == len(kept.times) == 14
    assert next(full.family(SUCCESS)).delta(480.0, 600.0) == kept.delta(480.0, 600.0)


def test_a_silent_series_outlives_its_points_until_the_retention() -> None:
    """A pod that stopped reporting keeps its series (its last point) for the whole retention.

    Its points beyond the reach go, but it is dropped only once silent for the retention,
    so a returning pod's counter still has its reference for a reset.
    """
    store = SeriesStore(retention_s=300.0, points_kept_s=60.0)
    other = make_labels({"model": "n", "namespace": "prod", "pod": "p"})
    _fill(store, SUCCESS, 100)
    _fill(store, SUCCESS, 390, labels=other)
    assert store.expire(390.0) == 0
    silent = store.stored(SUCCESS, L)
    assert silent is not None and list(silent.times) == [100.0]
    assert store.expire(410.0) == 1 and store.stored(SUCCESS, L) is None


def test_a_family_read_farther_back_keeps_its_own_span() -> None:
    """Restart counters keep two period lookbacks while Triton's counters keep the reach."""
    store = SeriesStore(retention_s=900.0, points_kept_s=100.0, kept_longer={RESTARTS: 300.0})
    _fill(store, SUCCESS, 800)
    _fill(store, RESTARTS, 800)
    store.expire(800.0)
    assert next(store.family(SUCCESS)).times[0] == 690.0
    assert next(store.family(RESTARTS)).times[0] == 490.0


def test_the_reach_is_never_past_the_retention() -> None:
    """A reach longer than the retention is the retention: a series cannot outlive itself."""
    store = SeriesStore(retention_s=100.0, points_kept_s=500.0, kept_longer={RESTARTS: 700.0})
    assert store.points_kept_s == 100.0 and store.points_since(RESTARTS, 1000.0) == 900.0


def test_the_engines_reach_is_the_diagnosis_or_the_charts() -> None:
    """The engine keeps its period lookback, or a chart's history where charts are drawn."""
    t = Thresholds()
    assert points_reach_s(t) == t.period_lookback_s
    assert Engine().store.points_kept_s == t.period_lookback_s
    assert Engine().store.points_since(RESTARTS, 1000.0) == 1000.0 - restarts_reach_s(t)
    charts = Settings.model_validate({"slack": {"chart_minutes": 12}})
    assert Engine(charts.engine_config()).store.points_kept_s == 720.0
    none = Settings.model_validate({"slack": {"charts": False}})
    assert Engine(none.engine_config()).store.points_kept_s == t.period_lookback_s


@pytest.mark.parametrize(
    ("spec", "scrapes", "opens"),
    [
        (FleetSpec(pods=4, models=3, seed=7), 75, False),
        (
            FleetSpec(pods=4, models=3, seed=8, interval_s=2.0, fault="restart", fault_at=240),
            330,
            False,
        ),
        (FleetSpec(pods=4, models=3, seed=9, fault="retry_storm", fault_at=55), 70, True),
    ],
    ids=["healthy-10s", "restart-2s", "retry-storm-10s"],
)
def test_diagnoses_are_those_of_a_store_keeping_every_point(
    spec: FleetSpec, scrapes: int, opens: bool
) -> None:
    """Past the reach, every diagnosis and transition is what the full retention gave.

    Two engines read the same generated fleet, one keeping points for its reach and one for
    the whole 15-minute retention. The runs are longer than the reach, and the faults fall
    after it: a retry storm, which opens an incident, and a container restart, whose counter
    resets its restart counter explains (no incident). The short engine holds fewer points.
    """
    fleet = Fleet(spec)
    short = Engine()
    full = Engine(EngineConfig(history_s=Thresholds().retention_s))
    ingest = [fleet_ingesters(fleet, e.store) for e in (short, full)]
    opened = 0
    for t, texts in fleet.scrape_many(scrapes):
        for ingesters in ingest:
            for name, text in texts.items():
                ingesters[name].ingest(text, t)
        events = short.evaluate(t)
        assert events == full.evaluate(t)
        opened += sum(e.event == "opened" for e in events)
        assert repr(short.last_diagnoses) == repr(full.last_diagnoses)
    assert short.store.points < full.store.points
    assert (opened > 0) is opens
    if spec.fault == "restart":
        assert any(s.resets for s in short.store.family(SUCCESS))


def test_the_flight_recorders_pre_onset_span_is_within_the_reach(tmp_path: Path) -> None:
    """The capture an opening incident takes reaches no farther back than the store keeps."""
    engine = Engine()
    recorder = FlightRecorder(tmp_path, AuditStore(), engine.store)
    assert recorder.pre_s <= engine.store.points_kept_s
