"""Cold-execution bursts: a reload that keeps its counters is still seen, contention is not."""

from __future__ import annotations

import math
import random

from tritonguard.core.reload_signs import cold_bursts, cold_tail_scrapes
from tritonguard.core.series_store import Series
from tritonguard.core.thresholds import Thresholds

_LABELS = (("model", "m"),)


def _counter(name: str, increments: list[float]) -> Series:
    s = Series(name=name, labels=_LABELS, counter=True)
    total = 0.0
    s.add(0.0, total)
    for k, inc in enumerate(increments, start=1):
        total += inc
        s.add(5.0 * k, total)
    return s


def _bursts(per_exec_us: list[float], healthy_us: float | None = None) -> list[float]:
    n = len(per_exec_us)
    succ = _counter("nv_inference_request_success", [20.0] * n)
    comp = _counter("nv_inference_compute_infer_duration_us", [20.0 * v for v in per_exec_us])
    # Latency per request follows compute plus a fixed 2 ms of queue and network.
    lat = _counter("nv_inference_request_duration_us", [20.0 * (v + 2000.0) for v in per_exec_us])
    return cold_bursts(
        [comp], [succ], [lat], horizon=-1.0, now=5.0 * n, t=Thresholds(), healthy_us=healthy_us
    )


def test_a_short_burst_of_cold_executions_that_ended_is_a_reload_sign() -> None:
    """Two scrapes at 20x the warm compute, then warm again, give one sign at the burst start."""
    warm = [1000.0] * 10
    assert _bursts([*warm, 20000.0, 20000.0, *warm]) == [55.0]


def test_a_burst_still_running_is_not_yet_a_sign() -> None:
    """The newest scrapes being slow could be contention starting: no sign until it ends."""
    assert _bursts([1000.0] * 10 + [20000.0] * 2) == []


def test_a_long_slowdown_is_contention_not_a_reload() -> None:
    """Slow executions for longer than a model takes to warm read as a level change."""
    t = Thresholds()
    long_run = int(t.reload_burst_max_s // 5) + 3
    assert _bursts([1000.0] * 20 + [20000.0] * long_run + [1000.0] * 3) == []


def test_a_mild_slowdown_is_not_cold() -> None:
    """Compute 1.5x the median (batching, a busier GPU) is below the cold factor."""
    assert _bursts([1000.0] * 10 + [1500.0] * 2 + [1000.0] * 5) == []


def test_worst_scrapes_of_a_slowdown_are_not_bursts() -> None:
    """Under contention the scrapes between the worst ones stay slow: no reload ends there."""
    warm = [1000.0] * 10
    contention = [4000.0, 9000.0, 4500.0, 3800.0, 9500.0, 4200.0, 4000.0]
    assert _bursts([*warm, *contention]) == []


def test_a_slowdown_that_became_the_median_is_judged_against_the_baseline() -> None:
    """Once contention fills the lookback its level is the median; healthy compute still rules.

    Judged against the median alone, the worst scrapes of a lasting slowdown end in a
    "warm" scrape at the slowed level and read as reloads.
    """
    slowed = [4000.0, 4200.0, 3900.0] * 6
    trace = [*slowed, 20000.0, 4000.0, *slowed]
    assert _bursts(trace) == [95.0]
    assert _bursts(trace, healthy_us=1000.0) == []


def _summary(quantile: str, values: list[float]) -> Series:
    s = Series(
        name="nv_inference_compute_infer_summary_us",
        labels=(*_LABELS, ("quantile", quantile)),
        counter=False,
    )
    for k, v in enumerate(values, start=1):
        s.add(10.0 * k, v)
    return s


def _tails(mean_us: float, p50_us: float, p99_us: float) -> list[float]:
    n = 3
    succ = Series(name="nv_inference_request_success", labels=_LABELS, counter=True)
    infer = Series(name="nv_inference_compute_infer_duration_us", labels=_LABELS, counter=True)
    for k in range(n + 1):
        succ.add(10.0 * k, 100.0 * k)
        infer.add(10.0 * k, 100.0 * k * mean_us)
    summary = [_summary("0.5", [p50_us] * n), _summary("0.99", [p99_us] * n)]
    return cold_tail_scrapes(summary, [infer], [succ], horizon=-1.0, now=10.0 * n, t=Thresholds())


def test_a_few_cold_executions_show_in_the_compute_tail() -> None:
    """Mean 2x the p50 with a p99 10x the mean: a few executions were cold, at every scrape."""
    assert _tails(mean_us=20_000, p50_us=10_000, p99_us=200_000) == [10.0, 20.0, 30.0]


def test_every_execution_slower_is_not_a_cold_tail() -> None:
    """Contention: the mean far above a lagging p50, but the p99 only 2x the mean."""
    assert _tails(mean_us=80_000, p50_us=15_000, p99_us=160_000) == []


def test_a_healthy_scrape_has_no_cold_tail() -> None:
    """Mean near the median: nothing slow in the scrape, whatever the tail."""
    assert _tails(mean_us=10_500, p50_us=10_000, p99_us=60_000) == []


def test_cold_compute_without_a_latency_spike_is_no_burst() -> None:
    """A cold scrape needs its latency at the spike bar too: compute alone does not make one."""
    n = 14
    succ = _counter("nv_inference_request_success", [20.0] * n)
    per_exec = [1000.0] * 10 + [20000.0, 20000.0] + [1000.0] * 2
    comp = _counter("nv_inference_compute_infer_duration_us", [20.0 * v for v in per_exec])
    lat = _counter("nv_inference_request_duration_us", [20.0 * 5000.0] * n)
    t = Thresholds()
    assert cold_bursts([comp], [succ], [lat], horizon=-1.0, now=5.0 * n, t=t) == []


def _reference_tails(
    mean: list[float], p50: list[float], p99: list[float], t: Thresholds
) -> list[float]:
    """Return the scrapes the cold-tail rule picks, as its docstring states it, one by one."""
    return [
        10.0 * k
        for k, (m, lo, hi) in enumerate(zip(mean, p50, p99, strict=True), start=1)
        if lo and hi and m >= t.tail_mean_over_p50 * lo and hi >= t.tail_p99_over_mean * m
    ]


def test_cold_tails_match_the_rule_scrape_by_scrape() -> None:
    """Random scrapes near both bars, one or two summary series a quantile, NaN and zero p50s.

    The check skips the per-scrape sums when the summaries alone rule every scrape out; what
    it returns must be what the rule gives at each scrape.
    """
    rng = random.Random(7)
    t = Thresholds()
    for trial in range(300):
        n = rng.randint(1, 8)
        if trial % 2:
            p50 = [
                rng.choice([0.0, math.nan, 10.0, 1000.0, rng.uniform(1, 2000)]) for _ in range(n)
            ]
            p99 = [rng.uniform(1, 30000) for _ in range(n)]
        else:
            # Healthy summaries, the p99 a few times the p50: the summaries alone rule out most.
            p50 = [rng.uniform(100, 2000) for _ in range(n)]
            p99 = [v * rng.uniform(1.0, 9.0) for v in p50]
        mean = [rng.uniform(1, 3000) for _ in range(n)]
        succ = Series(name="nv_inference_request_success", labels=_LABELS, counter=True)
        infer = Series(name="nv_inference_compute_infer_duration_us", labels=_LABELS, counter=True)
        total = 0.0
        succ.add(0.0, 0.0)
        infer.add(0.0, 0.0)
        for k in range(1, n + 1):
            total += 100.0 * mean[k - 1]
            succ.add(10.0 * k, 100.0 * k)
            infer.add(10.0 * k, total)
        means = [
            (infer.values[k] - infer.values[k - 1]) / (succ.values[k] - succ.values[k - 1])
            for k in range(1, n + 1)
        ]
        if trial % 3 == 0:
            # Two versions' summaries: the quantiles are summed per scrape.
            halves = [
                _summary("0.5", [v / 2 for v in p50]),
                _summary("0.5", [v / 2 for v in p50]),
                _summary("0.99", [v / 2 for v in p99]),
                _summary("0.99", [v / 2 for v in p99]),
            ]
            summed50 = [0.0 + v / 2 + v / 2 for v in p50]
            summed99 = [0.0 + v / 2 + v / 2 for v in p99]
            want = _reference_tails(means, summed50, summed99, t)
            summary = halves
        else:
            want = _reference_tails(means, p50, p99, t)
            summary = [_summary("0.5", p50), _summary("0.99", p99)]
        got = cold_tail_scrapes(summary, [infer], [succ], horizon=-1.0, now=10.0 * n, t=t)
        assert got == want, (p50, mean, p99)


def test_a_compute_stall_on_latency_already_up_is_no_reload() -> None:
    """A scrape of doubled compute inside a lasting latency rise is a stall, not a reload.

    Requests waiting out a raised batcher delay keep every scrape above the spike bar; a
    scheduling stall then doubles one scrape's compute and the next is warm again. That is
    the shape of a reload's burst in all but the warm floor before it.
    """
    n = 16
    per_exec = [1000.0] * 10 + [1000.0, 2500.0, 1000.0, 1000.0, 1000.0, 1000.0]
    queue = [2000.0] * 10 + [40000.0] * 6
    succ = _counter("nv_inference_request_success", [20.0] * n)
    comp = _counter("nv_inference_compute_infer_duration_us", [20.0 * v for v in per_exec])
    lat = _counter(
        "nv_inference_request_duration_us",
        [20.0 * (v + q) for v, q in zip(per_exec, queue, strict=True)],
    )
    t = Thresholds()
    assert cold_bursts([comp], [succ], [lat], horizon=-1.0, now=5.0 * n, t=t) == []
    # The same stall on a warm floor is a burst: only the floor before it tells them apart.
    warm_lat = _counter(
        "nv_inference_request_duration_us",
        [20.0 * (v + 2000.0 + (40000.0 if k == 11 else 0.0)) for k, v in enumerate(per_exec)],
    )
    assert cold_bursts([comp], [succ], [warm_lat], horizon=-1.0, now=5.0 * n, t=t) == [60.0]


def test_a_burst_in_the_first_scrape_of_the_lookback_has_no_floor() -> None:
    """With no scrape before it, a burst cannot show it struck a warm model: no sign."""
    assert _bursts([20000.0, *[1000.0] * 10]) == []
