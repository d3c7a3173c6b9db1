"""Kubernetes discovery in the daemon: pods in the fake API server, followed through real HTTP.

The daemon talks to the fake through the official client, as in a cluster; the pods point at
real metrics servers (and, in the live test, real Tritons) on loopback.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests import waiting
from tests.fakes.kube import FakeKube
from tests.fixtures_prometheus import MetricsServer
from tritonguard.core.findings import Subject
from tritonguard.runtime.daemon_app import DaemonApp
from tritonguard.runtime.playbook_service import TritonDirectory
from tritonguard.settings import Settings, TargetSettings

NS = "ml"
CAPTURE = Path(__file__).parents[1] / "fixtures" / "expositions" / "triton_2_models.prom"
INTERVAL_S = 0.5


def _settings(kubeconfig: Path, **discovery: Any) -> Settings:
    return Settings(
        scrape_interval_s=INTERVAL_S,
        scrape_timeout_s=INTERVAL_S,
        scrape_jitter_s=0.0,
        evaluation_interval_s=0.5,
        listen="127.0.0.1:0",
        shutdown_grace_s=2.0,
        kube={"kubeconfig": kubeconfig},
        discovery={"namespaces": [NS], "label_selector": "app=triton", **discovery},
    )


def _kubeconfig(fake: FakeKube, tmp_path: Path) -> Path:
    path = tmp_path / "kubeconfig"
    path.write_text(fake.kubeconfig(namespace=NS))
    return path


@asynccontextmanager
async def _running(app: DaemonApp) -> AsyncIterator[str]:
    task = asyncio.create_task(app.run(install_signals=False))
    await waiting.wait_for(lambda: app.http is not None and app.http.port != 0, 10.0)
    assert app.http is not None
    try:
        yield f"http://127.0.0.1:{app.http.port}"
    finally:
        if not task.done():
            app.request_stop("test finished")
        await asyncio.wait_for(task, timeout=10)


def _scraped_ok(app: DaemonApp, name: str) -> bool:
    target = app.readiness()[1]["targets"].get(f"scrape/{name}")
    return bool(target and target["ok"])


def _urls(app: DaemonApp) -> dict[str, str]:
    source = app.scrape_source
    assert source is not None
    return {t.name: t.metrics_url for t in source.targets}


def _add_metrics_pod(fake: FakeKube, name: str, server: MetricsServer, **extra: Any) -> None:
    port = int(server.host_port.rsplit(":", 1)[1])
    fake.add_pod(
        NS,
        name,
        labels={"app": "triton"},
        ip="127.0.0.1",
        ports={"metrics": port, "http": port},
        **extra,
    )


def _errors(app: DaemonApp, kind: str) -> float:
    value = app.registry.get_sample_value(
        "tritonguard_discovery_watch_errors_total", {"namespace": NS, "kind": kind}
    )
    return value or 0.0


async def _ready(base: str) -> tuple[int, dict[str, Any]]:
    async with aiohttp.ClientSession() as http, http.get(f"{base}/readyz") as resp:
        return resp.status, await resp.json()


@pytest.fixture
async def metrics_servers() -> AsyncIterator[list[MetricsServer]]:
    """Two metrics servers answering with a real Triton exposition."""
    text = CAPTURE.read_text()
    servers = [await MetricsServer(render=lambda: text).start() for _ in range(2)]
    yield servers
    for server in servers:
        await server.stop()


async def test_relist_after_410_drops_pods_deleted_while_the_watch_was_away(
    fake_kube: FakeKube, metrics_servers: list[MetricsServer], tmp_path: Path
) -> None:
    """A watch that gets 410 Gone relists: a pod deleted meanwhile stops being scraped."""
    a, b = metrics_servers
    _add_metrics_pod(fake_kube, "triton-a", a)
    _add_metrics_pod(fake_kube, "triton-b", b)
    fake_kube.watch_log_size = 1  # every change but the latest is forgotten at once
    app = DaemonApp(_settings(_kubeconfig(fake_kube, tmp_path), watch_timeout_s=5))
    async with _running(app):
        await waiting.wait_for(
            lambda: _scraped_ok(app, "ml/triton-a") and _scraped_ok(app, "ml/triton-b"), 10.0
        )
        # Drop the open watch, change twice behind its back, compact: its resume gets 410.
        await fake_kube.stop()
        fake_kube.delete_pod(NS, "triton-a")
        fake_kube.add_pod(NS, "unrelated", labels={"app": "other"})
        fake_kube.compact()
        await fake_kube.start()
        await waiting.wait_for(lambda: "ml/triton-a" not in _urls(app), 15.0)
        assert set(_urls(app)) == {"ml/triton-b"}
        assert "scrape/ml/triton-a" not in app.readiness()[1]["targets"]
        relists = [
            r
            for r in fake_kube.requests
            if r.method == "GET" and "/pods" in r.path and "watch" not in r.query
        ]
        assert len(relists) >= 2  # the first list and the one after 410


async def test_watch_disconnect_is_resumed_and_new_pods_are_followed(
    fake_kube: FakeKube, metrics_servers: list[MetricsServer], tmp_path: Path
) -> None:
    """A dropped watch is resumed from its resourceVersion; a pod added after it is found."""
    a, b = metrics_servers
    _add_metrics_pod(fake_kube, "triton-a", a)
    app = DaemonApp(_settings(_kubeconfig(fake_kube, tmp_path)))
    async with _running(app):
        await waiting.wait_for(lambda: _scraped_ok(app, "ml/triton-a"), 10.0)
        await fake_kube.stop()  # every open watch ends; the client reconnects
        await fake_kube.start()
        _add_metrics_pod(fake_kube, "triton-b", b)
        await waiting.wait_for(lambda: _scraped_ok(app, "ml/triton-b"), 15.0)
        watches = [r for r in fake_kube.requests if "watch" in r.query]
        assert len(watches) >= 2
        assert all(r.query.get("allowWatchBookmarks") == "true" for r in watches)
        assert watches[-1].query.get("resourceVersion") not in (None, "", "0")


async def test_api_down_at_start_reports_not_ready_then_recovers(
    metrics_servers: list[MetricsServer], tmp_path: Path
) -> None:
    """With the API server away the daemon serves, says discovery is not ready, then recovers."""
    fake = FakeKube()
    await fake.start()
    _add_metrics_pod(fake, "triton-a", metrics_servers[0])
    kubeconfig = _kubeconfig(fake, tmp_path)
    await fake.stop()
    app = DaemonApp(_settings(kubeconfig))
    async with _running(app) as base:
        await waiting.wait_for(lambda: _errors(app, "down") > 0, 10.0)
        status, body = await _ready(base)
        assert status == 503
        assert body["discovery"]["ready"] is False
        assert "unreachable" in body["discovery"]["namespaces"][NS]["last_error"]
        await fake.start()  # the same cluster state, back on the same address
        try:
            await waiting.wait_for(lambda: _scraped_ok(app, "ml/triton-a"), 20.0)

            async def ready() -> bool:
                return (await _ready(base))[0] == 200

            await waiting.wait_for(ready, 10.0)
            _, body = await _ready(base)
            assert body["discovery"]["namespaces"][NS]["synced"] is True
            found = app.registry.get_sample_value(
                "tritonguard_discovery_targets", {"namespace": NS}
            )
            assert found == 1
        finally:
            await fake.stop()


async def test_pods_that_are_not_ready_are_not_scraped_until_ready(
    fake_kube: FakeKube, metrics_servers: list[MetricsServer], tmp_path: Path
) -> None:
    """A pod starting up is skipped with its reason; once ready it is scraped."""
    _add_metrics_pod(fake_kube, "triton-a", metrics_servers[0], phase="Pending")
    app = DaemonApp(_settings(_kubeconfig(fake_kube, tmp_path)))
    async with _running(app) as base:
        await waiting.wait_for(lambda: app.discovery is not None and app.discovery.ready(), 10.0)
        _, body = await _ready(base)
        assert "Pending" in body["discovery"]["namespaces"][NS]["skipped"]["triton-a"]
        assert _urls(app) == {}
        fake_kube.set_pod_phase(NS, "triton-a", "Running")
        await waiting.wait_for(lambda: _scraped_ok(app, "ml/triton-a"), 10.0)


def test_triton_directory_follows_discovered_endpoints() -> None:
    """Actions find a discovered pod's Triton API; a pod gone or moved loses its old client."""

    async def scenario() -> None:
        directory = TritonDirectory()
        pod = Subject(namespace=NS, model="m", pod="triton-a")
        assert directory.for_subject(pod) is None
        first = TargetSettings(
            name="ml/triton-a",
            metrics_url="http://10.0.0.1:8002/metrics",
            triton_url="http://10.0.0.1:8000",
            namespace=NS,
            pod="triton-a",
        )
        directory.use_targets([first])
        client = directory.for_subject(pod)
        assert client is not None
        moved = first.model_copy(update={"triton_url": "http://10.0.0.2:8000"})
        directory.use_targets([moved])
        assert directory.for_subject(pod) is not client
        directory.use_targets([])
        assert directory.for_subject(pod) is None
        await directory.close()

    asyncio.run(scenario())
