"""Series store: counter resets like rate(), staleness, bounded memory, births mid-stream."""

from __future__ import annotations

import pytest

from tritonguard.core.samples import Sample, make_labels
from tritonguard.core.series_store import SeriesStore

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
    assert list(s.values) == [10.0, 2.0] and s.resets == []


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
    assert born.delta(0, 15) == (40.0, 5.0)  # zero before birth: its increase over its age
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
    from tests.unit.synthetic import Phase, samples_of, triton_model
    from tritonguard.core.engine import Engine
    from tritonguard.core.findings import Subject

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


def test_another_exporter_of_the_pod_seen_first_does_not_make_tritons_series_born() -> None:
    """Triton's first scrape after the pod's cAdvisor scrape is not a birth of its models.

    Prometheus scrapes each job at its own offset, so the pod's other exporters are often
    seen a scrape before Triton. Counting Triton's long-running counters as born there would
    start them from zero (a false burst of work) and read a deploy later as a second reload.
    """
    store = SeriesStore(birth_grace_s=30)
    cpu = make_labels({"namespace": "prod", "pod": "p", "container": "triton"})
    store.add(Sample("container_cpu_usage_seconds_total", cpu, 500.0, 0.0), 0.0)
    store.add(Sample("nv_inference_request_success", L, 12_000.0, 1.5), 1.5)
    store.add(Sample("nv_inference_request_success", L, 12_040.0, 3.5), 3.5)
    s = next(store.family("nv_inference_request_success"))
    assert s.born is None
    assert s.delta(0.0, 3.5) == (40.0, 2.0)


def test_new_version_on_a_serving_triton_is_born_at_that_tritons_previous_scrape() -> None:
    """A version missing from Triton's previous scrape and present in this one began in between."""
    store = SeriesStore(birth_grace_s=30)
    v1 = make_labels({"model": "m", "namespace": "prod", "pod": "p", "version": "1"})
    v2 = make_labels({"model": "m", "namespace": "prod", "pod": "p", "version": "2"})
    cpu = make_labels({"namespace": "prod", "pod": "p", "container": "triton"})
    for t in (0.0, 2.0, 4.0):
        store.add(Sample("nv_inference_request_success", v1, 100.0 + t, t), t)
        store.add(Sample("container_cpu_usage_seconds_total", cpu, t, t + 1.0), t + 1.0)
    store.add(Sample("nv_inference_request_success", v2, 8.0, 6.0), 6.0)
    born = next(s for s in store.family("nv_inference_request_success") if s.labels == v2)
    assert born.born == 4.0  # Triton's own previous scrape, not cAdvisor's at 5.0


def test_a_pod_first_seen_late_with_a_long_history_is_not_taken_as_born() -> None:
    """A target discovered after the grace whose counters hold far more than a start from zero.

    Its first value (hours of requests) against what it gains per scrape shows it was serving
    long before the daemon saw it; taking it as born would invent a burst of work.
    """
    store = SeriesStore(birth_grace_s=10)
    other = make_labels({"model": "m", "namespace": "prod", "pod": "q"})
    for t in (0.0, 5.0, 10.0, 15.0, 20.0):
        store.add(Sample("nv_inference_request_success", other, t, t), t)
    store.add(Sample("nv_inference_request_success", L, 90_000.0, 22.0), 22.0)
    s = next(x for x in store.family("nv_inference_request_success") if x.labels == L)
    assert s.born == 20.0  # provisional until its own growth says otherwise
    store.add(Sample("nv_inference_request_success", L, 90_050.0, 27.0), 27.0)
    assert s.born is None
    assert s.delta(20.0, 27.0) == (50.0, 5.0)


def test_a_pod_that_really_started_keeps_its_birth() -> None:
    """A new pod whose first value fits its later growth started from zero and stays born."""
    store = SeriesStore(birth_grace_s=10)
    other = make_labels({"model": "m", "namespace": "prod", "pod": "q"})
    for t in (0.0, 5.0, 10.0, 15.0, 20.0):
        store.add(Sample("nv_inference_request_success", other, t, t), t)
    store.add(Sample("nv_inference_request_success", L, 30.0, 25.0), 25.0)
    store.add(Sample("nv_inference_request_success", L, 80.0, 30.0), 30.0)
    s = next(x for x in store.family("nv_inference_request_success") if x.labels == L)
    assert s.born == 20.0
    assert s.delta(20.0, 30.0) == (80.0, 10.0)


def _churned(i: int) -> Sample:
    """Return a sample of a series that appears once (a pod that came and went)."""
    labels = make_labels({"model": f"m{i % 20}", "namespace": "prod", "pod": f"triton-{i // 20}"})
    return Sample("nv_inference_request_success", labels, 1.0, float(i // 1000))


def test_churn_stays_within_the_memory_bound_and_new_series_are_shed() -> None:
    """60 k series that come and go never push the store past its bound; what is shed counts.

    Series that are already stored keep their history: the bound turns away new ones.
    """
    import tracemalloc

    from tritonguard.core.series_store import SERIES_BYTES

    bound = 1_500 * SERIES_BYTES
    store = SeriesStore(retention_s=30.0, max_bytes=bound)
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        for i in range(60_000):
            store.add(_churned(i), float(i // 1000))
            if i % 1000 == 999:
                store.expire(float(i // 1000))
                assert store.approx_bytes <= bound
        held = tracemalloc.get_traced_memory()[0] - base
    finally:
        tracemalloc.stop()
    assert store.series_shed > 0
    assert len(store) <= bound // SERIES_BYTES
    assert held <= bound * 1.2  # what the bound counts is what memory holds


def test_over_the_bound_each_series_keeps_an_equal_share_of_points() -> None:
    """History that outgrows the bound is cut oldest first, evenly, never below a floor."""
    from tritonguard.core.series_store import MIN_POINTS_KEPT, POINT_BYTES, SERIES_BYTES

    labels = [make_labels({"model": f"m{k}", "namespace": "p", "pod": "a"}) for k in range(10)]
    bound = 10 * SERIES_BYTES + 10 * 40 * POINT_BYTES
    store = SeriesStore(retention_s=1e9, max_bytes=bound)
    for t in range(200):
        for lb in labels:
            store.add(Sample("nv_inference_request_success", lb, float(t), float(t)), float(t))
    store.expire(199.0)
    assert store.approx_bytes <= bound
    kept = [len(s.times) for s in store.family("nv_inference_request_success")]
    assert kept == [40] * 10 and store.points_shed == 10 * 160
    assert all(s.times[-1] == 199.0 for s in store.family("nv_inference_request_success"))
    tight = SeriesStore(retention_s=1e9, max_bytes=10 * SERIES_BYTES + 10 * 2 * POINT_BYTES)
    for t in range(100):
        for lb in labels:
            tight.add(Sample("nv_inference_request_success", lb, float(t), float(t)), float(t))
    tight.expire(99.0)
    assert [len(s.times) for s in tight.family("nv_inference_request_success")] == [
        MIN_POINTS_KEPT
    ] * 10


def _expire_trimming_all(store: SeriesStore, now: float) -> None:
    """Expiry as a trim of every stored series (the reference the store's own must match)."""
    horizon = now - store.retention_s
    for series in list(store.family("nv_inference_request_success")) + list(
        store.family("nv_inference_pending_request_count")
    ):
        if series.last_time < horizon:
            store.points -= len(series.times)
            del store._by_name[series.name][series.labels]
            store._count -= 1
        else:
            store.points -= series.trim(horizon)
    if store.max_bytes is not None and store.over_budget() and len(store):
        store._squeeze(store.max_bytes)


def _state(store: SeriesStore) -> list[tuple[object, ...]]:
    return [
        (s.name, s.labels, list(s.times), list(s.values), list(s.resets), s.born)
        for name in ("nv_inference_request_success", "nv_inference_pending_request_count")
        for s in store.family(name)
    ]


def test_expiry_that_passes_young_series_over_trims_as_trimming_every_series_would() -> None:
    """Expiry leaves the store as a trim of every series at every tick would.

    Counters with resets and gaps, gauges, a counter gone for longer than the retention and
    born again, with and without a memory bound whose squeeze leaves resets older than a
    series' oldest point: expiry skips series with nothing past the horizon and drops a
    single aged point in place, so points, resets, births and the point count come out the
    same.
    """
    import random

    from tritonguard.core.series_store import POINT_BYTES, SERIES_BYTES

    labels = [make_labels({"model": f"m{k}", "namespace": "p", "pod": "a"}) for k in range(12)]
    for bound in (None, 12 * SERIES_BYTES + 12 * 20 * POINT_BYTES):
        rng = random.Random(3)
        stores = [SeriesStore(retention_s=120.0, max_bytes=bound) for _ in range(2)]
        born = False
        for tick in range(80):
            t = 5.0 * tick
            for k, lb in enumerate(labels):
                if (k + tick) % 7 == 0 or (k == 4 and 20 <= tick < 60):
                    continue  # a missed scrape, and one series gone for a while
                name = (
                    "nv_inference_request_success"
                    if k % 3
                    else "nv_inference_pending_request_count"
                )
                value = float(rng.randrange(0, 50) if rng.random() < 0.1 else 100 * tick + k)
                for store in stores:
                    store.add(Sample(name, lb, value, t), t)
            stores[0].expire(t)
            _expire_trimming_all(stores[1], t)
            assert _state(stores[0]) == _state(stores[1])
            assert stores[0].points == stores[1].points
            born = born or any(s[5] is not None for s in _state(stores[0]))
        assert any(s[4] for s in _state(stores[0])) and born  # resets kept, a birth met
        assert (stores[0].points_shed > 0) == (bound is not None)


def test_a_counter_reset_twice_reads_each_reset_from_the_raw_values() -> None:
    """Resets are found from raw values before and after an offset, by both ingest paths.

    Until the first reset the raw last value is the stored one; after it, the store keeps
    it apart (the stored value carries the offset), so a second drop is still a reset and a
    rise after the first is not. A series never reset holds no resets list at all.
    """
    labels = make_labels({"model": "m", "namespace": "p", "pod": "a"})
    raws = [10.0, 20.0, 5.0, 8.0, 3.0, 4.0]
    stores = [SeriesStore(), SeriesStore()]
    for k, raw in enumerate(raws):
        stores[0].add(Sample("nv_inference_request_success", labels, raw, 10.0 * k), 10.0 * k)
    key = stores[1].scrape_key(labels, "triton")
    first = stores[1].new_series("nv_inference_request_success", labels, key)
    stores[1].append_scrape([first], [raws[0]], 0.0)
    held = stores[1].stored("nv_inference_request_success", labels)
    assert held is not None
    for k, raw in enumerate(raws[1:], start=1):
        stores[1].append_scrape([held], [raw], 10.0 * k)
    for store in stores:
        (s,) = store.family("nv_inference_request_success")
        assert list(s.values) == [10.0, 20.0, 25.0, 28.0, 31.0, 32.0]
        assert s.resets == [20.0, 40.0] and s.last_raw == 4.0 and s.offset == 28.0
        store.expire(50.0 + store.retention_s - 5.0)  # both resets now older than the horizon
        assert s.resets == [] and s._resets is None
    (gauge,) = [stores[0].new_series("nv_inference_pending_request_count", labels, key)]
    assert gauge._resets is None


def _expire_every_series(store: SeriesStore, now: float) -> int:
    """Expiry as a trim of every series to its family's horizon (the reference to match)."""
    from tritonguard.core.series_store import _forget_quiet

    horizon = now - store.retention_s
    store.points_kept_s = store._points_kept()
    dropped = 0
    for name, family in store._by_name.items():
        since = store.points_since(name, now)
        for series in list(family.values()):
            if series.last_time < horizon:
                store.points -= len(series.times)
                del family[series.labels]
                store._count -= 1
                dropped += 1
            else:
                store.points -= series.trim(since)
    _forget_quiet(store._scrapes, horizon)
    _forget_quiet(store._exporter_scrapes, horizon)
    if store.max_bytes is not None and store.over_budget() and len(store):
        store._squeeze(store.max_bytes)
    return dropped


def _every_state(store: SeriesStore) -> list[tuple[object, ...]]:
    return [
        (s.name, s.labels, list(s.times), list(s.values), list(s.resets), s.born)
        for family in store._by_name.values()
        for s in family.values()
    ]


@pytest.mark.parametrize(
    ("intervals", "reach", "retention"),
    [((2.0, 5.0, 10.0), 40.0, 120.0), ((1.0, 5.0, 10.0), 300.0, 360.0)],
    ids=["reach-40s", "reach-past-the-remembered-scrapes"],
)
def test_expiry_that_passes_whole_targets_over_trims_as_trimming_every_series_would(
    intervals: tuple[float, float, float], reach: float, retention: float
) -> None:
    """Expiry every second over targets scraped at their own pace leaves what trimming all would.

    Six pods at three intervals, each ingested a few seconds late (timestamps before the
    last expiry, as a Prometheus read lags), with counter resets, models appearing
    mid-stream (births), a pod gone for longer than the retention and back, restart
    counters kept longer than the rest, and with and without a memory bound. Expiry passes
    over a target whose members have nothing to trim or drop; points, resets, births, drops
    and the point count come out as a trim of every series at every expiry. In the second
    case a 1 s pod's reach holds more scrapes than a target remembers, so its bound is read
    from its members.
    """
    import random

    from tritonguard.core.series_store import POINT_BYTES, SERIES_BYTES

    restarts = "kube_pod_container_status_restarts_total"
    pods = [(f"p{k}", intervals[k % 3], float(k % 4)) for k in range(6)]
    for bound in (None, 40 * SERIES_BYTES + 40 * 12 * POINT_BYTES):
        rng = random.Random(11)
        stores = [
            SeriesStore(
                retention_s=retention,
                max_bytes=bound,
                reach=lambda _interval: reach,
                kept_longer={restarts: 2 * reach},
            )
            for _ in range(2)
        ]
        counts: dict[tuple[str, int], float] = {}
        passed = 0
        met = {"reset": False, "birth": False}
        drops = 0
        for wall in range(0, 400 + 2 * int(retention)):
            now = float(wall)
            dropped = [stores[0].expire(now), _expire_every_series(stores[1], now)]
            assert dropped[0] == dropped[1]
            drops += dropped[0]
            assert _every_state(stores[0]) == _every_state(stores[1])
            assert stores[0].points == stores[1].points and len(stores[0]) == len(stores[1])
            state = _every_state(stores[0])
            met["reset"] = met["reset"] or any(s[4] for s in state)
            met["birth"] = met["birth"] or any(s[5] is not None for s in state)
            passed += sum(
                t.due >= now - reach and t.newest >= now - retention
                for t in stores[0]._exporter_scrapes.values()
            )
            for pod, interval, lag in pods:
                at = now - lag
                if at < 0 or at % interval or (pod == "p3" and 100 <= at < 110 + retention):
                    continue
                models = 2 if at < 150 else 3  # a model appears on every pod
                samples = []
                for m in range(models):
                    key = (pod, m)
                    reset = rng.random() < 0.03
                    counts[key] = 0.0 if reset else counts.get(key, 0.0) + rng.randrange(1, 9)
                    labels = make_labels({"model": f"m{m}", "namespace": "n", "pod": pod})
                    samples.append(Sample("nv_inference_request_success", labels, counts[key], at))
                    samples.append(
                        Sample("nv_inference_pending_request_count", labels, rng.random(), at)
                    )
                pod_labels = make_labels({"container": "triton", "namespace": "n", "pod": pod})
                samples.append(Sample(restarts, pod_labels, float(at // 200), at))
                for store in stores:
                    store.add_many(samples, now)
        assert met == {"reset": True, "birth": True} and drops > 0
        assert passed > 0  # whole targets were passed over
        assert (stores[0].points_shed > 0) == (bound is not None)


def test_a_series_first_seen_with_an_old_timestamp_is_dropped_at_the_next_expiry() -> None:
    """A target passed over whole still drops a newcomer older than the retention.

    A Prometheus read can bring a series' first sample long after it was scraped. Its
    target's other series are fresh, yet the newcomer has vanished already, and the next
    expiry drops it as a trim of every series would.
    """
    store = SeriesStore(retention_s=120.0, reach=lambda _interval: 40.0)
    fresh = make_labels({"model": "a", "namespace": "n", "pod": "p"})
    late = make_labels({"model": "b", "namespace": "n", "pod": "p"})
    for t in range(0, 601, 10):
        store.add(Sample("nv_inference_request_success", fresh, float(t), float(t)), float(t))
        store.expire(float(t))
    store.add(Sample("nv_inference_request_success", late, 5.0, 470.0), 601.0)
    assert store.stored("nv_inference_request_success", late) is not None
    assert store.expire(601.0) == 1
    assert store.stored("nv_inference_request_success", late) is None
    assert store.stored("nv_inference_request_success", fresh) is not None
