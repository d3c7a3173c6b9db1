"""A shift too small to open anything still stays out of the baseline it is judged against."""

from __future__ import annotations

from tests.unit.synthetic import Phase, samples_of, triton_model
from tritonguard.core.engine import Engine, EngineConfig
from tritonguard.core.replay import drive
from tritonguard.core.thresholds import Thresholds

IV = 5.0


def _baseline_latency_ms(phases: list[Phase]) -> float:
    engine = Engine()
    series = triton_model(phases, interval=IV)
    for _ in drive(engine, samples_of(series, interval=IV), eval_interval_s=IV):
        pass
    diagnosis = engine.last_diagnoses[("prod", "triton-0", "resnet")]
    assert diagnosis.baseline is not None
    mean = diagnosis.baseline.get("mean_latency_us")
    assert mean is not None
    return mean / 1000


def test_a_modest_shift_does_not_become_its_own_reference() -> None:
    """Five minutes at +13 % latency (below the symptom gate) leave the baseline at 11.2 ms.

    Without the freeze the shifted snapshots outnumber the healthy ones and the median moves
    to the faulty level, so the fault erodes the very reference that would reveal it.
    """
    healthy = Phase(40, rps=20, queue_ms=1.0, infer_ms=10.0)
    shifted = Phase(60, rps=20, queue_ms=1.0, infer_ms=11.5)
    assert abs(_baseline_latency_ms([healthy, shifted]) - 11.2) < 0.3


def test_a_shift_that_outlives_the_lookback_is_the_new_normal() -> None:
    """Past the baseline lookback (600 s) the old reference is gone and the new level is learnt."""
    healthy = Phase(40, rps=20, queue_ms=1.0, infer_ms=10.0)
    shifted = Phase(200, rps=20, queue_ms=1.0, infer_ms=11.5)
    assert abs(_baseline_latency_ms([healthy, shifted]) - 12.7) < 0.3


def test_a_window_too_thin_to_judge_is_not_learnt_as_healthy() -> None:
    """A model queueing from its first request keeps no baseline; the queue stays a symptom.

    While traffic is light its windows hold fewer than ``min_requests`` requests: no symptom
    can be read in them, and no health either. Learnt as healthy they became the reference
    (queue share 0.94) and, once traffic grew, the model read as normal.
    """
    # Short windows, as a daemon scraping every second may run: 5 s hold 10 requests at 2/s.
    engine = Engine(EngineConfig(Thresholds(rate_window_s=5.0)))
    light = Phase(45, rps=2, queue_ms=130.0, infer_ms=8.0)
    busier = Phase(30, rps=6, queue_ms=130.0, infer_ms=8.0)
    series = triton_model([light, busier], interval=1.0)
    for _ in drive(engine, samples_of(series, interval=1.0), eval_interval_s=1.0):
        pass
    diagnosis = engine.last_diagnoses[("prod", "triton-0", "resnet")]
    assert diagnosis.baseline is None
    assert any("wait longer than they compute" in r for r in diagnosis.symptom_reasons)
