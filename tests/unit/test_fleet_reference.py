"""A new pod is judged against the same model on its other pods from its first scrapes."""

from __future__ import annotations

from tests.unit.synthetic import Phase, opened, run_engine, samples_of, triton_model
from tritonguard.core.engine import Engine
from tritonguard.core.replay import drive

IV = 5.0
BASE_N = 36  # three minutes of the first pod before the second joins


def _scale_out(first: Phase) -> dict[str, str]:
    """Pod triton-0 serves resnet; triton-1 joins at BASE_N with ``first`` as its first scrape."""
    series = triton_model([Phase(BASE_N + 24, rps=20, infer_ms=30)], interval=IV)
    joined = triton_model([first, Phase(23, rps=20, infer_ms=30)], interval=IV, pod="triton-1")
    series.update({k: f"_x{BASE_N - 1} {v}" for k, v in joined.items()})
    return series


def test_a_pod_joining_cold_is_a_cold_start_against_its_peers() -> None:
    """Its first scrape runs 5x the peers' compute with requests queued: cold_start next scrape.

    The peers' healthy 30 ms per execution is the reference that exists at birth; without a
    compute summary to show cold executions among warm ones, its own second scrape, back at
    30 ms, shows the warm-up's decay (slower code would stay slow).
    """
    events = run_engine(_scale_out(Phase(1, rps=20, infer_ms=150, queue_ms=400)), interval=IV)
    cold = [(c, t) for c, m, t in opened(events) if c == "cold_start"]
    assert cold, opened(events)
    assert cold[0][1] - BASE_N * IV <= 3 * IV
    first = next(e for e in events if e.event == "opened" and e.cause == "cold_start")
    assert first.subject.pod == "triton-1"
    ratio = first.evidence["early_vs_reference"].value
    assert ratio is not None and 4.5 <= ratio <= 5.5


def test_a_pod_joining_warm_opens_nothing() -> None:
    """Warm-up before Ready: its first scrape already runs at the peers' compute and queue."""
    events = run_engine(_scale_out(Phase(1, rps=20, infer_ms=30, queue_ms=1)), interval=IV)
    assert opened(events) == []


def test_a_newborn_without_reference_waits_for_cold_start_to_judge() -> None:
    """A new model with no peers queues from birth: nothing but cold_start may open early.

    Its first queue could be its cold start's; the other causes wait out the birth span
    (30 s at a 5 s scrape) and only then read the steady queue as the batcher's.
    """
    series = triton_model([Phase(BASE_N + 24, rps=20, infer_ms=30)], interval=IV)
    born = triton_model(
        [Phase(24, rps=6, queue_ms=80, infer_ms=2, batch=1.2)], interval=IV, model="ranker"
    )
    series.update({k: f"_x{BASE_N - 1} {v}" for k, v in born.items()})
    cfg = {
        "max_batch_size": 8,
        "dynamic_batching": {"max_queue_delay_microseconds": "100000"},
        "instance_group": [{"count": 1, "kind": "KIND_GPU"}],
    }
    events = run_engine(series, interval=IV, configs={"ranker": cfg})
    birth = (BASE_N - 1) * IV  # its first sample
    early = [(c, t - birth) for c, m, t in opened(events) if m == "ranker"]
    assert early and all(c == "cold_start" or at > 30 for c, at in early), early


def test_a_pod_there_before_the_stream_began_is_not_judged_by_its_peers() -> None:
    """Only a pod born under observation takes its peers' reference.

    triton-1 was serving when the stream began, at half the peers' speed and a tenth of
    their traffic (another share of the load): it learns its own baseline. Judged by its
    peers it read as 2x slower than baseline, and a healthy fleet of 2,000 subjects opened
    five incidents that way.
    """
    series = triton_model([Phase(BASE_N + 24, rps=20, infer_ms=30)], interval=IV)
    slow = [Phase(8, rps=0.5, infer_ms=60), Phase(BASE_N + 16, rps=2, infer_ms=60)]
    series |= triton_model(slow, interval=IV, pod="triton-1")
    engine = Engine()
    sources: set[str | None] = set()
    reasons: set[str] = set()
    for _ in drive(engine, samples_of(series, interval=IV), eval_interval_s=IV):
        diagnosis = engine.last_diagnoses.get(("prod", "triton-1", "resnet"))
        if diagnosis is not None:
            sources.add(diagnosis.baseline.source if diagnosis.baseline else None)
            reasons.update(diagnosis.symptom_reasons)
    assert sources == {None, "own"}
    assert reasons == set()
