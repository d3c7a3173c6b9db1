"""Two shard daemons reading one real Prometheus: each keeps its workloads' pods, both the node.

Prometheus scrapes Triton expositions labelled as pods of two Deployments and a StatefulSet,
and a node exporter's series that name no pod. Each daemon reads the whole fleet through the
PromQL source and keeps only its own shard's pods, plus the node every pod may run on.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.fixtures_prometheus import MetricsServer, PrometheusProcess, ScrapeJob
from tritonguard.core.samples import label
from tritonguard.core.shards import shard_of, workload_from_pod_name
from tritonguard.runtime.daemon_app import DaemonApp
from tritonguard.settings import Settings

CAPTURE = Path(__file__).parents[1] / "fixtures" / "expositions" / "triton_2_models.prom"
NODE = (
    "# TYPE node_cpu_seconds_total counter\n"
    'node_cpu_seconds_total{cpu="0",mode="idle"} 100\n'
    'node_cpu_seconds_total{cpu="0",mode="user"} 20\n'
)
PODS = (
    "triton-a-7d9f8c6b5-x2k4q",
    "triton-a-7d9f8c6b5-p9wzt",
    "triton-b-5c4d8f9b7-h6mlr",
    "triton-b-5c4d8f9b7-q2vzn",
    "bert-0",
    "bert-1",
)


@pytest.mark.live
async def test_each_shard_keeps_its_own_pods_and_every_shard_the_node(
    prometheus_factory: Callable[..., PrometheusProcess],
) -> None:
    """No series of another shard's pod reaches a shard's engine; node series reach both."""
    text = CAPTURE.read_text()
    tritons = {pod: await MetricsServer(render=lambda: text).start() for pod in PODS}
    node = await MetricsServer(render=lambda: NODE).start()
    try:
        jobs = [
            ScrapeJob(f"triton-{i}", [s.host_port], labels={"namespace": "ml", "pod": pod})
            for i, (pod, s) in enumerate(tritons.items())
        ]
        prom = prometheus_factory([*jobs, ScrapeJob("node", [node.host_port])])
        every_pod = 'count by (pod) (nv_inference_count{model="model_00"})'
        await asyncio.to_thread(prom.wait_for_samples, every_pod, len(PODS))
        await asyncio.to_thread(prom.wait_for_samples, "node_cpu_seconds_total")
        apps = [
            DaemonApp(
                Settings(
                    prometheus_url=prom.url,
                    prometheus_backfill_s=60.0,
                    listen="127.0.0.1:0",
                    shard={"count": 2, "index": i},
                )
            )
            for i in range(2)
        ]
        for app in apps:
            (source,) = app.sources
            result = await app.poll(source)
            assert all(s.ok for s in result.statuses)
            await source.close()
    finally:
        for server in (*tritons.values(), node):
            await server.stop()

    expected = [
        {p for p in PODS if shard_of("ml", workload_from_pod_name(p), 2) == i} for i in (0, 1)
    ]
    assert all(expected), expected  # the fixture's workloads land on both shards
    for i, app in enumerate(apps):
        pods = {label(s.labels, "pod") for s in app.engine.store.family("nv_inference_count")}
        assert pods == expected[i]
        assert any(True for _ in app.engine.store.family("node_cpu_seconds_total"))
        this = app.registry.get_sample_value(
            "tritonguard_shard_pods", {"source": "prometheus", "owner": "this"}
        )
        other = app.registry.get_sample_value(
            "tritonguard_shard_pods", {"source": "prometheus", "owner": "other"}
        )
        assert (this, other) == (len(expected[i]), len(expected[1 - i]))
