"""Two shard daemons with the same configured targets: pods split, shared exporters filtered.

Each configured Triton pod is scraped by its workload's shard only. A kube-state-metrics-like
exporter (``honor_labels``) and a node exporter are scraped by both; of the first each shard
keeps only its own pods' series, of the second everything.
"""

from __future__ import annotations

from pathlib import Path

from tests.fixtures_prometheus import MetricsServer
from tritonguard.core.samples import label
from tritonguard.core.shards import shard_of, workload_from_pod_name
from tritonguard.runtime.daemon_app import DaemonApp
from tritonguard.settings import Settings, TargetSettings

CAPTURE = Path(__file__).parents[1] / "fixtures" / "expositions" / "triton_2_models.prom"
PODS = (
    "triton-a-7d9f8c6b5-x2k4q",
    "triton-a-7d9f8c6b5-p9wzt",
    "triton-b-5c4d8f9b7-h6mlr",
    "bert-0",
)
NODE = 'node_load1 0.5\nnode_cpu_seconds_total{cpu="0",mode="idle"} 100\n'


def _kube_state(pods: tuple[str, ...]) -> str:
    return "".join(
        f'kube_pod_info{{namespace="ml",pod="{p}",node="gpu-node-1"}} 1\n'
        f'kube_pod_container_status_restarts_total{{namespace="ml",pod="{p}",container="t"}} 0\n'
        for p in pods
    )


async def test_configured_pods_split_by_workload_and_shared_exporters_by_series() -> None:
    """A shard scrapes its Triton pods only, keeps its pods' kube-state series, and the node."""
    text = CAPTURE.read_text()
    tritons = {pod: await MetricsServer(render=lambda: text).start() for pod in PODS}
    ksm = await MetricsServer(render=lambda: _kube_state(PODS)).start()
    node = await MetricsServer(render=lambda: NODE).start()
    targets = [
        *(
            TargetSettings(name=pod, metrics_url=s.url, namespace="ml", pod=pod)
            for pod, s in tritons.items()
        ),
        TargetSettings(name="kube-state", metrics_url=ksm.url, honor_labels=True),
        TargetSettings(name="node", metrics_url=node.url),
    ]
    apps = [
        DaemonApp(Settings(targets=targets, listen="127.0.0.1:0", shard={"count": 2, "index": i}))
        for i in range(2)
    ]
    try:
        for app in apps:
            source = app.scrape_source
            assert source is not None
            result = await app.poll(source)
            assert all(s.ok for s in result.statuses)
            await source.close()
    finally:
        for server in (*tritons.values(), ksm, node):
            await server.stop()

    expected = [
        {p for p in PODS if shard_of("ml", workload_from_pod_name(p), 2) == i} for i in (0, 1)
    ]
    assert all(expected), expected  # the fixture's workloads land on both shards
    assert all(s.hits == 1 for s in tritons.values())  # each pod scraped once, by one shard
    assert (ksm.hits, node.hits) == (2, 2)
    for i, app in enumerate(apps):
        assert {t.name for t in app.static_targets} == expected[i] | {"kube-state", "node"}
        store = app.engine.store
        assert {label(s.labels, "pod") for s in store.family("nv_inference_count")} == expected[i]
        assert {label(s.labels, "pod") for s in store.family("kube_pod_info")} == expected[i]
        assert len(list(store.family("node_cpu_seconds_total"))) == 1
