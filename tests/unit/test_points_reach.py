"""Points are kept only as far back as a reader reads; series outlive their points."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from benchmarks.fleet_gen import Fleet, FleetSpec, scraped_at
from benchmarks.healthy_fleet import fleet_ingesters
from tritonguard.core.derive import _before, points_reach_s
from tritonguard.core.engine import Engine, EngineConfig, reach_of
from tritonguard.core.features import FeatureReader
from tritonguard.core.reload_signs import RESTARTS, restarts_reach_s
from tritonguard.core.samples import Labels, Sample, make_labels
from tritonguard.core.scrape_ingest import TargetIngest
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


def _kept(seconds: float) -> Callable[[float], float]:
    """Return a reach of ``seconds`` whatever the scrape interval."""
    return lambda _interval: seconds


def _scrape_into(
    ingest: list[dict[str, TargetIngest]], texts: dict[str, str], t: float, k: int, every: int
) -> None:
    """Ingest one scrape of a fleet; its exporters only at every ``every``-th scrape."""
    for ingesters in ingest:
        for target, text in texts.items():
            if scraped_at(target, k, every):
                ingesters[target].ingest(text, t)


def test_points_older_than_the_reach_go_but_one_anchor() -> None:
    """A series keeps the points of its reach and the one before it, which a rate there needs.

    The increase over the whole reach is what it was with every point kept.
    """
    full, short = SeriesStore(retention_s=900.0), SeriesStore(900.0, reach=_kept(120.0))
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
    store = SeriesStore(retention_s=300.0, reach=_kept(60.0))
    other = make_labels({"model": "n", "namespace": "prod", "pod": "p"})
    _fill(store, SUCCESS, 100)
    _fill(store, SUCCESS, 390, labels=other)
    assert store.expire(390.0) == 0
    silent = store.stored(SUCCESS, L)
    assert silent is not None and list(silent.times) == [100.0]
    assert store.expire(410.0) == 1 and store.stored(SUCCESS, L) is None


def test_a_family_read_farther_back_keeps_its_own_span() -> None:
    """Restart counters keep two period lookbacks while Triton's counters keep the reach."""
    store = SeriesStore(retention_s=900.0, reach=_kept(100.0), kept_longer={RESTARTS: 300.0})
    _fill(store, SUCCESS, 800)
    _fill(store, RESTARTS, 800)
    store.expire(800.0)
    assert next(store.family(SUCCESS)).times[0] == 690.0
    assert next(store.family(RESTARTS)).times[0] == 490.0


def test_the_reach_is_never_past_the_retention() -> None:
    """A reach longer than the retention is the retention: a series cannot outlive itself."""
    store = SeriesStore(retention_s=100.0, reach=_kept(500.0), kept_longer={RESTARTS: 700.0})
    _fill(store, SUCCESS, 200)
    store.expire(200.0)
    assert store.points_kept_s == 100.0 and store.points_since(RESTARTS, 1000.0) == 900.0


def test_the_reach_follows_the_coarsest_scrape_interval_in_view() -> None:
    """Readers' windows grow with the interval, so the slowest target sets how far back.

    Until a target has been scraped twice no interval is known and nothing is cut.
    """
    store = SeriesStore(retention_s=900.0, reach=lambda interval: 10 * interval)
    slow = make_labels({"model": "m", "namespace": "prod", "pod": "slow"})
    store.add(Sample(SUCCESS, L, 1.0, 0.0), 0.0)
    store.expire(0.0)
    assert store.coarsest_interval() is None and store.points_kept_s == 900.0
    for t in range(0, 601, 10):
        store.add(Sample(SUCCESS, L, float(t), float(t)), float(t))
        if t % 30 == 0:
            store.add(Sample(SUCCESS, slow, float(t), float(t)), float(t))
    store.expire(600.0)
    assert store.coarsest_interval() == 30.0 and store.points_kept_s == 300.0


def test_an_exporter_scraped_less_often_than_triton_does_not_widen_the_reach() -> None:
    """Readers' windows follow Triton's interval: a 30 s cAdvisor beside a 10 s Triton keeps 10 s'.

    The exporter's series keep its point at or before the reach as their anchor. A stream
    without any Triton target (other families alone) is still bounded by its own interval.
    """
    reach = lambda interval: 10 * interval  # noqa: E731 - a reach simple enough to read
    store = SeriesStore(retention_s=900.0, reach=reach)
    usage = "container_cpu_usage_seconds_total"
    pod = make_labels({"container": "triton", "namespace": "prod", "pod": "p"})
    for t in range(0, 601, 10):
        store.add(Sample(SUCCESS, L, float(t), float(t)), float(t))
        if t % 30 == 0:
            store.add(Sample(usage, pod, float(t), float(t)), float(t))
    store.expire(600.0)
    assert store.coarsest_interval() == 10.0 and store.points_kept_s == 100.0
    cpu = store.stored(usage, pod)
    assert cpu is not None and cpu.times[0] == 480.0 and cpu.times[1] == 510.0
    alone = SeriesStore(retention_s=900.0, reach=reach)
    for t in range(0, 601, 30):
        alone.add(Sample(usage, pod, float(t), float(t)), float(t))
    alone.expire(600.0)
    assert alone.coarsest_interval() == 30.0 and alone.points_kept_s == 300.0


def test_the_engines_reach_is_the_diagnosis_or_the_charts() -> None:
    """The engine keeps the diagnosis' reach at the fleet's interval, or a chart's history."""
    t = Thresholds()
    # The lookback, then one scrape, two rate windows and a gauge's staleness before a shift.
    assert points_reach_s(t, 10.0) == 420.0 + 10.0 + 2 * 30.0 + 30.0
    assert points_reach_s(t, 30.0) == 420.0 + 30.0 + 2 * 60.0 + 90.0
    assert reach_of(t)(10.0) == points_reach_s(t, 10.0)
    assert reach_of(t, history_s=720.0)(10.0) == 720.0
    fleet = Fleet(FleetSpec(pods=1, models=2, seed=3))
    configs = {
        "default": EngineConfig(),
        "charts": Settings.model_validate({"slack": {"chart_minutes": 12}}).engine_config(),
        "no charts": Settings.model_validate({"slack": {"charts": False}}).engine_config(),
    }
    engines = {name: Engine(config) for name, config in configs.items()}
    ingest = {name: fleet_ingesters(fleet, e.store) for name, e in engines.items()}
    for t_s, texts in fleet.scrape_many(3):
        for name, engine in engines.items():
            for target, text in texts.items():
                ingest[name][target].ingest(text, t_s)
            engine.evaluate(t_s)
    kept = {name: e.store.points_kept_s for name, e in engines.items()}
    assert kept == {"default": 520.0, "charts": 720.0, "no charts": 520.0}
    assert engines["default"].store.points_since(RESTARTS, 1000.0) == 1000.0 - restarts_reach_s(t)


@pytest.mark.parametrize(
    ("interval", "every"),
    [(2.0, 1), (10.0, 1), (30.0, 1), (10.0, 3), (2.0, 15)],
    ids=["2s", "10s", "30s", "10s-exporters-30s", "2s-exporters-30s"],
)
def test_the_window_before_a_shift_at_the_lookbacks_start_is_read_whole(
    interval: float, every: int
) -> None:
    """The farthest read, the window before a shift that began at the lookback's first scrape.

    Its features (node busy share, compute, rates, gauges) from the store that keeps only
    the reach are those of a store that keeps every point, at 2, 10 and 30 s scrapes, and
    with the exporters scraped every 30 s beside a 10 s and a 2 s Triton (whose interval
    alone sets the reach).
    """
    t = Thresholds()
    fleet = Fleet(FleetSpec(pods=1, models=2, seed=5, interval_s=interval))
    short, full = Engine(), Engine(EngineConfig(history_s=t.retention_s))
    ingest = [fleet_ingesters(fleet, e.store) for e in (short, full)]
    scrapes = int(t.retention_s / interval) + 10
    for k, (t_s, texts) in enumerate(fleet.scrape_many(scrapes)):
        _scrape_into(ingest, texts, t_s, k, every)
    for e in (short, full):
        e.store.expire(t_s)
    assert short.store.points < full.store.points
    assert short.store.points_kept_s == points_reach_s(t, interval)
    reader = FeatureReader(short.store, t, t_s)
    key = reader.subjects()[0]
    succ = next(iter(reader.series(SUCCESS, key)))
    began = next(at for at in succ.times if at > t_s - t.period_lookback_s)
    then, window = began - interval, t.window(interval)
    got = [
        repr(_before(FeatureReader(e.store, t, t_s), key, then, window, t)) for e in (short, full)
    ]
    assert got[0] == got[1]
    assert "compute_per_inference_us=None" not in got[0]


@pytest.mark.parametrize(
    ("spec", "scrapes", "opens", "every"),
    [
        (FleetSpec(pods=4, models=3, seed=7), 75, False, 1),
        (
            FleetSpec(pods=4, models=3, seed=8, interval_s=2.0, fault="restart", fault_at=270),
            360,
            False,
            1,
        ),
        (FleetSpec(pods=4, models=3, seed=9, fault="retry_storm", fault_at=55), 70, True, 1),
        (FleetSpec(pods=4, models=3, seed=10, fault="retry_storm", fault_at=55), 70, True, 3),
    ],
    ids=["healthy-10s", "restart-2s", "retry-storm-10s", "retry-storm-10s-exporters-30s"],
)
def test_diagnoses_are_those_of_a_store_keeping_every_point(
    spec: FleetSpec, scrapes: int, opens: bool, every: int
) -> None:
    """Past the reach, every diagnosis and transition is what the full retention gave.

    Two engines read the same generated fleet, one keeping points for its reach and one for
    the whole 15-minute retention. The runs are longer than the reach, and the faults fall
    after it: a retry storm, which opens an incident, and a container restart, whose counter
    resets its restart counter explains (no incident). The short engine holds fewer points.
    In the last case the exporters (DCGM, cAdvisor, node, kube-state-metrics) are scraped
    every 30 s beside Triton's 10 s, and the short engine keeps Triton's reach.
    """
    fleet = Fleet(spec)
    short = Engine()
    full = Engine(EngineConfig(history_s=Thresholds().retention_s))
    ingest = [fleet_ingesters(fleet, e.store) for e in (short, full)]
    opened = 0
    for k, (t, texts) in enumerate(fleet.scrape_many(scrapes)):
        _scrape_into(ingest, texts, t, k, every)
        events = short.evaluate(t)
        assert events == full.evaluate(t)
        opened += sum(e.event == "opened" for e in events)
        assert repr(short.last_diagnoses) == repr(full.last_diagnoses)
    assert short.store.points < full.store.points
    assert short.store.points_kept_s == points_reach_s(Thresholds(), spec.interval_s)
    assert (opened > 0) is opens
    if spec.fault == "restart":
        assert any(s.resets for s in short.store.family(SUCCESS))


def test_the_flight_recorders_pre_onset_span_is_within_the_reach(tmp_path: Path) -> None:
    """The capture an opening incident takes reaches no farther back than the store keeps."""
    engine = Engine()
    recorder = FlightRecorder(tmp_path, AuditStore(), engine.store)
    assert recorder.pre_s <= engine.store.points_kept_s
