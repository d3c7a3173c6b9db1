"""A quiet model takes the fast path on a short window grown to hold enough requests."""

from __future__ import annotations

from tests.unit.synthetic import START, Phase, samples_of, triton_model
from tritonguard.core.derive import derive, low_rate_points
from tritonguard.core.engine import Engine
from tritonguard.core.features import FeatureReader
from tritonguard.core.recurrence import increases
from tritonguard.core.replay import drive
from tritonguard.core.symptoms import fast_symptom

IV = 2.0
BASE_N = 90  # three minutes of healthy history before the onset
KEY = ("prod", "triton-0", "resnet")


def _readings(phases: list[Phase]) -> tuple[list[float], list[float]]:
    """Return the seconds after START of the evaluations read on the fast path and on the full one.

    The full window's reading is its sustained symptom, which the causes need.
    """
    engine = Engine()
    fast, full = [], []
    series = triton_model(phases, interval=IV)
    for now, _ in drive(engine, samples_of(series, interval=IV), eval_interval_s=1.0):
        reader = FeatureReader(engine.store, engine.t, now)
        derived = derive(reader, KEY, now, engine.history, None, engine.t)
        if derived is not None and derived.fast is not None:
            fast.append(now - START)
        if derived is not None and derived.ctx.symptom.sustained:
            full.append(now - START)
    return fast, full


def _fast_readings(phases: list[Phase]) -> list[float]:
    """Return the seconds after START of every evaluation whose fast path has a reading."""
    return _readings(phases)[0]


def test_a_quiet_model_whose_latency_doubles_is_read_before_the_full_window() -> None:
    """At 2 requests/s and 2 s scrapes a doubled latency is read 10 s after its onset.

    Four scrapes hold 16 requests, under the 20 a mean needs, so the fast path used to be
    off: the short window grows to five scrapes, whose pooled points show the shift before
    the full window's sustained tercile does (18 s after the onset).
    """
    onset = BASE_N * IV
    fast, full = _readings(
        [
            Phase(BASE_N, rps=2.0, queue_ms=1.0, infer_ms=10.0),
            Phase(40, rps=2.0, queue_ms=1.0, infer_ms=21.0),
        ]
    )
    assert fast, "the fast path never read the quiet model's shift"
    assert onset < fast[0] <= onset + 12.0
    assert full and fast[0] < full[0]


def test_a_model_at_one_request_a_second_takes_the_fast_path() -> None:
    """At 1 request/s and 2 s scrapes a doubled latency is read on the fast path.

    Four scrapes hold 8 requests: the short window grows to 12 scrapes of four pooled points
    of 6 requests each, three of them slow, well inside the full window's 30 s.
    """
    onset = BASE_N * IV
    readings = _fast_readings(
        [
            Phase(BASE_N, rps=1.0, queue_ms=1.0, infer_ms=10.0),
            Phase(40, rps=1.0, queue_ms=1.0, infer_ms=21.0),
        ]
    )
    assert readings, "the fast path never read the quiet model's shift"
    assert onset < readings[0] <= onset + 20.0


def test_one_slow_request_among_few_does_not_take_the_fast_path() -> None:
    """A single request ten times slower lifts one pooled point, not three of four.

    The short window is still grown and read (its points are there), but one abnormal
    point is a hiccup, so nothing opens on it.
    """
    phases = [
        Phase(BASE_N, rps=1.0, queue_ms=1.0, infer_ms=10.0),
        # Two requests in the scrape, one of them 20x slow: the scrape's mean is 10x.
        Phase(1, rps=1.0, queue_ms=1.0, infer_ms=110.0),
        Phase(40, rps=1.0, queue_ms=1.0, infer_ms=10.0),
    ]
    assert _fast_readings(phases) == []
    engine = Engine()
    series = triton_model(phases, interval=IV)
    read = 0
    for now, _ in drive(engine, samples_of(series, interval=IV), eval_interval_s=1.0):
        if not BASE_N * IV < now - START < (BASE_N + 8) * IV:
            continue
        base = engine.history.baseline(KEY, now, 30.0, IV, engine.store.started_at)
        assert base is not None
        derived = derive(
            FeatureReader(engine.store, engine.t, now), KEY, now, engine.history, None, engine.t
        )
        assert derived is not None
        inc = _increases(engine, now)
        low = low_rate_points(inc, now, IV, 30.0, engine.t)
        assert low is not None
        scrapes, latency, queue = low
        assert scrapes == 12
        assert len(latency) == 4
        assert fast_symptom(latency, queue, base, engine.t, pooled=True) is None
        read += 1
    assert read > 0


def _increases(
    engine: Engine, now: float
) -> tuple[dict[float, float], dict[float, float], dict[float, float]]:
    """Return the latency, queue and request increases per scrape of the last minute."""
    reader = FeatureReader(engine.store, engine.t, now)
    return (
        increases(reader.series("nv_inference_request_duration_us", KEY), now - 60.0, now),
        increases(reader.series("nv_inference_queue_duration_us", KEY), now - 60.0, now),
        increases(reader.series("nv_inference_request_success", KEY), now - 60.0, now),
    )
