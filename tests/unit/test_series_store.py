"""Series store: counter resets like rate(), staleness, bounded memory, births mid-stream."""

from __future__ import annotations

from daemon.core.samples import Sample, make_labels
from daemon.core.series_store import SeriesStore

L = make_labels({"model": "m", "namespace": "prod", "pod": "p"})


def test_counter_reset_is_handled_like_rate() -> None:
    """A restarted server's counter drops to zero; the increase keeps counting across it."""
    store = SeriesStore()
    for t, v in [(0, 100.0), (5, 150.0), (10, 20.0), (15, 70.0)]:
        store.add(Sample("nv_inference_request_success", L, v, float(t)), float(t))
    s = next(store.family("nv_inference_request_success"))
    assert s.delta(0, 15) == (150.0 - 100.0 + 20.0 + 50.0, 15.0)
    assert s.resets == [10.0]


def test_gauges_do_not_treat_drops_as_resets() -> None:
    """Pending requests going down is a value, not a reset."""
    store = SeriesStore()
    for t, v in [(0, 10.0), (5, 2.0)]:
        store.add(Sample("nv_inference_pending_request_count", L, v, float(t)), float(t))
    s = next(store.family("nv_inference_pending_request_count"))
    assert s.values == [10.0, 2.0] and s.resets == []


def test_stale_values_are_unknown() -> None:
    """A gauge not refreshed within max_age reads as unknown, never as its old value or zero."""
    store = SeriesStore()
    store.add(Sample("nv_inference_pending_request_count", L, 3.0, 0.0), 0.0)
    s = next(store.family("nv_inference_pending_request_count"))
    assert s.latest(10.0, max_age=20.0) == 3.0
    assert s.latest(100.0, max_age=20.0) is None


def test_vanished_series_are_dropped_after_retention() -> None:
    """Memory stays bounded: a series that stops arriving is forgotten after the retention."""
    store = SeriesStore(retention_s=60)
    store.add(Sample("nv_inference_request_success", L, 1.0, 0.0), 0.0)
    other = make_labels({"model": "n", "namespace": "prod", "pod": "p"})
    for t in range(0, 200, 10):
        store.add(Sample("nv_inference_request_success", other, float(t), float(t)), float(t))
    assert store.expire(200.0) == 1
    assert len(store) == 1
    kept = next(store.family("nv_inference_request_success"))
    assert kept.times[0] >= 130.0  # trimmed to the window plus one anchor point


def test_counter_born_mid_stream_starts_from_zero() -> None:
    """A model that appears later started its counters at zero after the previous scrape."""
    store = SeriesStore(birth_grace_s=0)
    other = make_labels({"model": "old", "namespace": "prod", "pod": "p"})
    for t in (0.0, 5.0, 10.0):
        store.add(Sample("nv_inference_request_success", other, t, t), t)
    store.add(Sample("nv_inference_request_success", L, 40.0, 15.0), 15.0)
    born = next(s for s in store.family("nv_inference_request_success") if s.labels == L)
    assert born.born == 10.0
    assert born.delta(0, 15) == (40.0, 15.0)  # zero before birth: the increase spans the window
    assert born.delta(10, 15) == (40.0, 5.0)


def test_birth_is_placed_at_its_own_targets_previous_scrape_in_any_arrival_order() -> None:
    """A new model's counters start at its own target's previous scrape, whatever the order.

    A range read returns series by series and other targets scrape at other times: a model
    that appeared in pod p's scrape at 15 started after p's scrape at 10.
    """
    store = SeriesStore(birth_grace_s=0)
    old = make_labels({"model": "old", "namespace": "prod", "pod": "p"})
    elsewhere = make_labels({"model": "x", "namespace": "prod", "pod": "q"})
    for t in (0.0, 5.0, 10.0, 15.0, 20.0):
        store.add(Sample("nv_inference_request_success", old, t, t), 20.0)
    for t in (2.0, 7.0, 12.0, 17.0):
        store.add(Sample("nv_inference_request_success", elsewhere, t, t), 20.0)
    # The new model's samples come last in the batch, older than the newest time seen.
    for t, v in ((15.0, 40.0), (20.0, 90.0)):
        store.add(Sample("nv_inference_request_success", L, v, t), 20.0)
    born = next(s for s in store.family("nv_inference_request_success") if s.labels == L)
    assert born.born == 10.0
    assert born.delta(10, 20) == (90.0, 10.0)


def test_unconsumed_families_are_not_stored() -> None:
    """Series no feature reads (e.g. go_* runtime metrics) cost no memory."""
    store = SeriesStore()
    store.add(Sample("go_goroutines", (), 5.0, 0.0), 0.0)
    assert len(store) == 0


def test_model_features_sum_across_pods() -> None:
    """A model served by two pods has per-pod features and a model-wide request rate."""
    from daemon.core.engine import Engine
    from daemon.core.findings import Subject
    from tests.unit.synthetic import Phase, samples_of, triton_model

    series = triton_model([Phase(12, rps=10)], interval=5.0, pod="a")
    series.update(triton_model([Phase(12, rps=30)], interval=5.0, pod="b"))
    engine = Engine()
    samples = samples_of(series, interval=5.0)
    engine.ingest(samples, 0.0)
    now = max(s.timestamp or 0 for s in samples)
    assert engine.feature_value(Subject("prod", "resnet", "a"), "request_rate", now) == 10.0
    assert engine.feature_value(Subject("prod", "resnet", "b"), "request_rate", now) == 30.0
    assert engine.feature_value(Subject("prod", "resnet", ""), "request_rate", now) == 40.0


def test_nan_samples_are_ignored() -> None:
    """A NaN quantile (no observations yet) neither creates an empty series nor breaks expiry."""
    store = SeriesStore()
    store.add(
        Sample("nv_inference_request_summary_us", (*L, ("quantile", "0.99")), float("nan"), 0.0),
        0.0,
    )
    assert len(store) == 0
    assert store.expire(1000.0) == 0
