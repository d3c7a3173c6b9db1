"""The PromQL source against a real Prometheus scraping a local server, and against a down one."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.fixtures_prometheus import (
    MetricsServer,
    PrometheusProcess,
    ScrapeJob,
    closed_port_url,
)
from tritonguard.clients.prometheus_query import PrometheusQueryClient, PrometheusQueryError
from tritonguard.core.metric_names import READ_QUANTILES, UNREAD_FAMILIES
from tritonguard.core.samples import Sample, label
from tritonguard.sources.prometheus import DEFAULT_GROUPS, PrometheusSource

CAPTURE = Path(__file__).parents[1] / "fixtures" / "expositions" / "triton_2_models.prom"


class CountingExposition:
    """Serves the Triton capture plus a counter that grows by 10 on every scrape."""

    ANCHOR = 'nv_inference_count{model="model_00",version="1"} 4\n'

    def __init__(self) -> None:
        self.text = CAPTURE.read_text()
        assert self.ANCHOR in self.text
        self.scrapes = 0

    def __call__(self) -> str:
        """Render the next scrape's body."""
        self.scrapes += 1
        bumped = f'nv_inference_count{{model="bumped",version="1"}} {10 * self.scrapes}\n'
        return self.text.replace(self.ANCHOR, self.ANCHOR + bumped)


@pytest.mark.live
async def test_raw_samples_come_with_prometheus_timestamps(
    prometheus_factory: Callable[..., PrometheusProcess],
) -> None:
    """The source returns each stored sample once, with its scrape timestamp and labels.

    A second poll returns only samples Prometheus stored since the first, and counter values
    are the raw cumulative values (not rates), in time order.
    """
    render = CountingExposition()
    server = await MetricsServer(render=render).start()
    try:
        prom = prometheus_factory(
            [
                ScrapeJob(
                    "triton",
                    [server.host_port],
                    labels={"namespace": "ml", "pod": "triton-0"},
                )
            ]
        )
        await asyncio.to_thread(
            prom.wait_for_samples, 'nv_inference_count{model="bumped"}[1m]', count=3
        )
        source = PrometheusSource(
            PrometheusQueryClient(prom.url, timeout_s=5.0), interval_s=1.0, backfill_s=60.0
        )
        first = await source.poll()
        await asyncio.to_thread(
            prom.wait_for_samples,
            'nv_inference_count{model="bumped"}[1m]',
            count=len(_bumped(first.samples)) + 2,
        )
        second = await source.poll()
        await source.close()
    finally:
        await server.stop()

    statuses = {s.target: s for s in first.statuses}
    assert set(statuses) == {g.name for g in DEFAULT_GROUPS}
    assert all(s.ok for s in first.statuses + second.statuses)
    assert statuses["triton"].samples == len([s for s in first.samples if s.name.startswith("nv_")])

    bumped_first = _bumped(first.samples)
    bumped_second = _bumped(second.samples)
    assert len(bumped_first) >= 3 and len(bumped_second) >= 1
    # Values are the server's raw cumulative counter, one step of 10 per scrape.
    values = [s.value for s in bumped_first + bumped_second]
    assert values == sorted(values) and all(v % 10 == 0 for v in values)
    assert len(set(values)) == len(values)
    timestamps = [s.timestamp or 0.0 for s in bumped_first + bumped_second]
    assert timestamps == sorted(timestamps) and len(set(timestamps)) == len(timestamps)
    # Prometheus's own timestamps: at the scrape, not at query time, milliseconds precision.
    assert all(abs(ts * 1000 - round(ts * 1000)) < 1e-3 for ts in timestamps)
    assert max(timestamps) <= time.time()

    sample = bumped_first[0]
    assert label(sample.labels, "namespace") == "ml"
    assert label(sample.labels, "pod") == "triton-0"
    assert label(sample.labels, "instance") == server.host_port
    assert label(sample.labels, "job") == "triton"
    assert "__name__" not in dict(sample.labels)

    # Every series of the capture that a feature reads is there (Prometheus adds up,
    # scrape_* of its own), and the capture's summary counts and sums and its unread
    # quantiles are not even in the answer.
    names = {s.name for s in first.samples}
    assert "nv_inference_queue_duration_us" in names and "up" not in names
    assert not names & UNREAD_FAMILIES
    # One matcher for every summary: the union of the quantiles read (the store drops the
    # queue's median, which only the request and compute summaries need).
    quantiles = {
        (s.name, label(s.labels, "quantile")) for s in first.samples if s.name in READ_QUANTILES
    }
    assert quantiles == {(n, q) for n in READ_QUANTILES for q in ("0.5", "0.99")}
    served = CAPTURE.read_text()
    assert "nv_inference_request_summary_us_count{" in served and 'quantile="0.9"' in served


@pytest.mark.live
async def test_prometheus_outage_gives_errors_and_no_samples() -> None:
    """A Prometheus that does not answer yields an error per group and no samples, fast."""
    url = closed_port_url(path="")
    source = PrometheusSource(PrometheusQueryClient(url, timeout_s=2.0), interval_s=1.0)
    started = time.monotonic()
    result = await source.poll()
    elapsed = time.monotonic() - started
    await source.close()

    assert result.samples == []
    assert len(result.statuses) == len(DEFAULT_GROUPS)
    assert not result.ok
    for status in result.statuses:
        assert not status.ok
        assert status.error is not None and "connection failed" in status.error
    assert elapsed < 5.0


@pytest.mark.live
async def test_bad_query_is_reported_not_raised_as_crash(
    prometheus_factory: Callable[..., PrometheusProcess],
) -> None:
    """Prometheus rejecting a query surfaces as PrometheusQueryError with its reason."""
    prom = prometheus_factory([])
    client = PrometheusQueryClient(prom.url, timeout_s=5.0)
    with pytest.raises(PrometheusQueryError, match="HTTP Status Code 400"):
        await client.instant_query("sum(")
    await client.close()


def _bumped(samples: list[Sample]) -> list[Sample]:
    return [
        s
        for s in samples
        if s.name == "nv_inference_count" and label(s.labels, "model") == "bumped"
    ]
