"""The scrape source against real HTTP servers: a Triton capture, down/slow targets, real Triton."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.fixtures_prometheus import MetricsServer, closed_port_url
from tritonguard.clients.metrics_scraper import MetricsScraper, ScrapeTarget
from tritonguard.core.exposition import parse_exposition
from tritonguard.core.samples import Sample, label
from tritonguard.settings import TargetSettings
from tritonguard.sources.scrape import ScrapeSource

CAPTURE = Path(__file__).parents[1] / "fixtures" / "expositions" / "triton_2_models.prom"
CAPTURE_50 = Path(__file__).parents[2] / "benchmarks" / "data" / "triton_50_models.prom"


def _sample_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip() and not line.startswith("#")]


async def test_captured_triton_exposition_becomes_labelled_samples() -> None:
    """Every sample line of a real Triton capture arrives once, labelled and timestamped.

    namespace, pod and instance are added and the scrape time becomes the timestamp.
    """
    text = CAPTURE.read_text()
    server = await MetricsServer(render=lambda: text).start()
    try:
        target = TargetSettings(
            name="triton-0", metrics_url=server.url, namespace="ml", pod="triton-0"
        )
        source = ScrapeSource([target], MetricsScraper(timeout_s=2.0))
        before = time.time()
        result = await source.poll()
        after = time.time()
        await source.close()
    finally:
        await server.stop()

    assert [s.ok for s in result.statuses] == [True]
    assert len(result.samples) == len(_sample_lines(text))
    assert result.statuses[0].samples == len(result.samples)
    for sample in result.samples:
        assert label(sample.labels, "namespace") == "ml"
        assert label(sample.labels, "pod") == "triton-0"
        assert label(sample.labels, "instance") == server.host_port
        assert sample.timestamp is not None and before <= sample.timestamp <= after
    counts = {
        label(s.labels, "model"): s.value for s in result.samples if s.name == "nv_inference_count"
    }
    assert counts == {"model_01": 6.0, "model_00": 4.0}


async def test_fifty_model_capture_yields_every_series_through_the_source() -> None:
    """The daemon's scrape path over a real 50-model exposition (191 KB) keeps every series.

    Each sample the capture holds arrives once with its value, plus the target's labels.
    """
    text = CAPTURE_50.read_text()
    server = await MetricsServer(render=lambda: text).start()
    try:
        target = TargetSettings(name="t50", metrics_url=server.url, namespace="ml", pod="t-0")
        source = ScrapeSource([target], MetricsScraper(timeout_s=5.0))
        results = [await source.poll() for _ in range(2)]
        await source.close()
    finally:
        await server.stop()

    expected = {
        (s.name, s.labels, s.value) for s in parse_exposition(text, source="capture").samples
    }
    assert len(expected) == len(_sample_lines(text))
    for result in results:
        assert [(s.ok, s.error) for s in result.statuses] == [(True, None)]
        added = {("instance", server.host_port), ("namespace", "ml"), ("pod", "t-0")}
        got = {
            (s.name, tuple(kv for kv in s.labels if kv not in added), s.value)
            for s in result.samples
        }
        assert got == expected
        assert len(result.samples) == len(expected) == result.statuses[0].samples
    models = {label(s.labels, "model") for s in results[0].samples} - {""}
    assert len(models) == 50


async def test_down_and_slow_targets_give_error_records_quickly() -> None:
    """A closed port and a too-slow server each yield an error status quickly, no samples.

    The healthy target in the same poll still delivers.
    """
    text = CAPTURE.read_text()
    good = await MetricsServer(render=lambda: text).start()
    slow = await MetricsServer(render=lambda: text, delay_s=10.0).start()
    try:
        targets = [
            TargetSettings(name="good", metrics_url=good.url),
            TargetSettings(name="down", metrics_url=closed_port_url()),
            TargetSettings(name="slow", metrics_url=slow.url),
        ]
        source = ScrapeSource(targets, MetricsScraper(timeout_s=0.5))
        started = time.monotonic()
        result = await source.poll()
        elapsed = time.monotonic() - started
        await source.close()
    finally:
        await good.stop()
        await slow.stop()

    by_target = {s.target: s for s in result.statuses}
    assert by_target["good"].ok and by_target["good"].samples > 0
    assert not by_target["down"].ok and "connection failed" in (by_target["down"].error or "")
    assert not by_target["slow"].ok and "timeout" in (by_target["slow"].error or "")
    assert elapsed < 2.0
    instances = {label(s.labels, "instance") for s in result.samples}
    assert instances == {good.host_port}


async def test_exporter_labels_clashing_with_target_labels_are_renamed() -> None:
    """An exporter's own ``pod`` becomes ``exported_pod`` unless honor_labels (as Prometheus)."""
    body = 'kube_pod_info{namespace="ml",pod="triton-7",node="n1"} 1\n'
    server = await MetricsServer(render=lambda: body).start()
    try:
        plain = TargetSettings(name="ksm", metrics_url=server.url, namespace="kube", pod="ksm-0")
        honoring = plain.model_copy(update={"name": "ksm-h", "honor_labels": True})
        source = ScrapeSource([plain, honoring], MetricsScraper(timeout_s=2.0))
        result = await source.poll()
        await source.close()
    finally:
        await server.stop()

    relabelled, honored = result.samples
    assert dict(relabelled.labels) == {
        "exported_namespace": "ml",
        "exported_pod": "triton-7",
        "namespace": "kube",
        "pod": "ksm-0",
        "node": "n1",
        "instance": server.host_port,
    }
    assert dict(honored.labels) == {
        "namespace": "ml",
        "pod": "triton-7",
        "node": "n1",
        "instance": server.host_port,
    }


async def test_garbled_exposition_is_an_error_with_no_samples() -> None:
    """An unparsable body drops the whole scrape and names the URL and line in the error."""
    body = 'nv_inference_count{model="a"} 1\nnv_inference_count{model="b" 2\n'
    server = await MetricsServer(render=lambda: body).start()
    try:
        source = ScrapeSource(
            [TargetSettings(name="t", metrics_url=server.url)], MetricsScraper(timeout_s=2.0)
        )
        result = await source.poll()
        await source.close()
    finally:
        await server.stop()

    assert result.samples == []
    (status,) = result.statuses
    assert not status.ok
    assert status.error is not None and f"{server.url}:2:" in status.error


async def test_http_error_status_is_an_error_record() -> None:
    """A 404 is reported with its status code rather than parsed."""
    server = await MetricsServer(render=lambda: "").start()
    try:
        scraper = MetricsScraper(timeout_s=2.0)
        result = await scraper.scrape(ScrapeTarget("t", server.url.replace("/metrics", "/nope")))
        await scraper.close()
    finally:
        await server.stop()
    assert not result.ok and result.status == 404 and (result.error or "").startswith("HTTP 404")


async def test_concurrency_is_bounded() -> None:
    """With max_concurrency=1 four 0.2 s scrapes run one after another; with 4 they overlap."""
    servers = [await MetricsServer(render=lambda: "m 1\n", delay_s=0.2).start() for _ in range(4)]
    try:
        targets = [ScrapeTarget(f"t{i}", s.url) for i, s in enumerate(servers)]
        timings = []
        for limit in (1, 4):
            scraper = MetricsScraper(timeout_s=5.0, max_concurrency=limit)
            started = time.monotonic()
            results = await scraper.scrape_all(targets)
            timings.append(time.monotonic() - started)
            await scraper.close()
            assert all(r.ok for r in results)
    finally:
        for server in servers:
            await server.stop()
    serial, parallel = timings
    assert serial >= 0.8
    assert parallel < 0.6


async def test_jitter_spreads_scrape_starts() -> None:
    """Jitter delays each scrape by up to jitter_s, so starts spread over the window."""
    server = await MetricsServer(render=lambda: "m 1\n").start()
    try:
        scraper = MetricsScraper(timeout_s=2.0, jitter_s=0.4)
        results = await scraper.scrape_all([ScrapeTarget(f"t{i}", server.url) for i in range(8)])
        await scraper.close()
    finally:
        await server.stop()
    starts = sorted(r.timestamp for r in results)
    assert all(r.ok for r in results)
    assert starts[-1] - starts[0] > 0.05
    assert starts[-1] - starts[0] < 0.6


@pytest.mark.live
async def test_real_tritonserver_metrics(tmp_path: Path) -> None:
    """A real tritonserver's exposition parses, labelled, and its counters move per request."""
    from tritonguard.lab.repository import ModelSpec, write_model
    from tritonguard.lab.triton_server import TritonServer

    repo = tmp_path / "repo"
    write_model(repo, ModelSpec(name="live_m"))
    async with TritonServer(repo) as triton:
        target = TargetSettings(
            name="triton", metrics_url=triton.metrics_url, namespace="lab", pod="triton-live"
        )
        source = ScrapeSource([target], MetricsScraper(timeout_s=5.0))
        try:
            first = await source.poll()
            await _infer(triton.http_url, "live_m", 3)
            # Triton refreshes its metrics about once a second.
            await asyncio.sleep(2.5)
            second = await source.poll()
        finally:
            await source.close()

    assert first.statuses[0].ok and second.statuses[0].ok
    assert {label(s.labels, "pod") for s in second.samples} == {"triton-live"}
    assert _requests(second.samples) - _requests(first.samples) == 3


def _requests(samples: list[Sample]) -> float:
    """Return successful plus failed requests of the live model."""
    names = ("nv_inference_request_success", "nv_inference_request_failure")
    return sum(s.value for s in samples if s.name in names and label(s.labels, "model") == "live_m")


async def _infer(http_url: str, model: str, count: int) -> None:
    """Send ``count`` inference requests over Triton's KServe v2 HTTP API (any outcome)."""
    body = json.dumps(
        {"inputs": [{"name": "INPUT0", "shape": [1, 16], "datatype": "FP32", "data": [0.0] * 16}]}
    ).encode()

    def send() -> None:
        for _ in range(count):
            req = urllib.request.Request(
                f"{http_url}/v2/models/{model}/infer",
                data=body,
                headers={"Content-Type": "application/json"},
            )
            with (
                contextlib.suppress(urllib.error.HTTPError),
                urllib.request.urlopen(req, timeout=30),
            ):
                pass

    await asyncio.to_thread(send)
