"""Histogram quantiles: histogram_quantile's interpolation, and a p99 that adds up across pods."""

from __future__ import annotations

import math

from tests.unit.synthetic import START, Phase, notation, samples_of, triton_model
from tritonguard.core.engine import Engine
from tritonguard.core.findings import Subject
from tritonguard.core.histograms import bucket_quantile

IV = 5.0
INF = math.inf
FAMILY = "nv_inference_request_duration_histogram_us_bucket"


def test_interpolates_inside_the_bucket_holding_the_rank() -> None:
    """100 observations, 90 under 10 ms and 10 between 10 and 100 ms: p99 at 91 ms."""
    buckets = [(10_000.0, 90.0), (100_000.0, 100.0), (INF, 100.0)]
    p99 = bucket_quantile(0.99, buckets)
    assert p99 is not None and abs(p99 - 91_000.0) < 1e-6
    p50 = bucket_quantile(0.5, buckets)
    assert p50 is not None and abs(p50 - 10_000.0 * 50 / 90) < 1e-6


def test_a_rank_in_the_inf_bucket_is_the_highest_finite_bound() -> None:
    """Beyond the last finite bucket the buckets only say 'more than 100 ms'."""
    assert bucket_quantile(0.99, [(100_000.0, 50.0), (INF, 100.0)]) == 100_000.0


def test_no_observations_or_no_inf_bucket_is_unknown() -> None:
    """An idle window, or buckets without +Inf (total unknown), give no quantile."""
    assert bucket_quantile(0.99, [(10.0, 0.0), (INF, 0.0)]) is None
    assert bucket_quantile(0.99, [(10.0, 5.0)]) is None


def _histogram(pod: str, slow_per_scrape: float, n: int = 12) -> dict[str, str]:
    """Return buckets of 100 requests a scrape on ``pod``, ``slow_per_scrape`` of them 10-100 ms."""
    sel = f'model="resnet",version="1",namespace="prod",pod="{pod}"'
    fast = 100.0 - slow_per_scrape
    return {
        f'{FAMILY}{{{sel},le="10000"}}': notation([(fast, n)]),
        f'{FAMILY}{{{sel},le="100000"}}': notation([(100.0, n)]),
        f'{FAMILY}{{{sel},le="+Inf"}}': notation([(100.0, n)]),
    }


def test_features_read_p99_from_histograms_without_summaries() -> None:
    """A server exporting histograms and no summaries still gives the window's p50 and p99."""
    series = triton_model([Phase(12, rps=20)], interval=IV)
    series.update(_histogram("triton-0", slow_per_scrape=5))
    engine = Engine()
    engine.ingest(samples_of(series, interval=IV), START)
    f = engine.features(Subject("prod", "resnet", "triton-0"), START + 11 * IV)
    assert f is not None and f.p99_us is not None and f.p50_us is not None
    # 5 % of requests between 10 and 100 ms: p99 at 80 % of that bucket.
    assert abs(f.p99_us - (10_000 + 90_000 * 0.8)) < 1.0
    assert f.p50_us < 10_000


def test_the_model_p99_adds_buckets_across_pods() -> None:
    """One pod slow in 10 % of requests, one never: the model's p99 is the pooled one."""
    series = triton_model([Phase(12, rps=20)], interval=IV)
    series.update(triton_model([Phase(12, rps=20)], interval=IV, pod="triton-1"))
    series.update(_histogram("triton-0", slow_per_scrape=10))
    series.update(_histogram("triton-1", slow_per_scrape=0))
    engine = Engine()
    engine.ingest(samples_of(series, interval=IV), START)
    f = engine.features(Subject("prod", "resnet", ""), START + 11 * IV)
    assert f is not None and f.p99_us is not None
    # Pooled: 5 % slow, so p99 sits 80 % into the 10-100 ms bucket, not 90 % as on triton-0.
    assert abs(f.p99_us - (10_000 + 90_000 * 0.8)) < 1.0
