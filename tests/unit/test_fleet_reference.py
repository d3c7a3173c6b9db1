"""A new pod is judged against the same model on its other pods from its first scrapes."""

from __future__ import annotations

from tests.unit.synthetic import Phase, opened, run_engine, triton_model

IV = 5.0
BASE_N = 36  # three minutes of the first pod before the second joins


def _scale_out(first: Phase) -> dict[str, str]:
    """Pod triton-0 serves resnet; triton-1 joins at BASE_N with ``first`` as its first scrape."""
    series = triton_model([Phase(BASE_N + 24, rps=20, infer_ms=30)], interval=IV)
    joined = triton_model([first, Phase(23, rps=20, infer_ms=30)], interval=IV, pod="triton-1")
    series.update({k: f"_x{BASE_N - 1} {v}" for k, v in joined.items()})
    return series


def test_a_pod_joining_cold_is_a_cold_start_against_its_peers() -> None:
    """Its first scrape runs 5x the peers' compute with requests queued: cold_start at once.

    Its own first scrape is all it has, so no decay is visible yet; the peers' healthy 30 ms
    per execution is the reference that exists at birth.
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
