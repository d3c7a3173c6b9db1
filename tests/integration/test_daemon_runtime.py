"""The daemon in-process against local metrics servers: HTTP endpoints, restarts, shutdown."""

from __future__ import annotations

import asyncio
import itertools
import os
import signal
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests import waiting
from tests.fixtures_prometheus import MetricsServer, closed_port_url
from tritonguard.runtime.alertmanager_webhook import Alert
from tritonguard.runtime.daemon_app import DaemonApp
from tritonguard.runtime.supervisor import Supervisor
from tritonguard.settings import Settings, TargetSettings

CAPTURE = Path(__file__).parents[1] / "fixtures" / "expositions" / "triton_2_models.prom"


def _settings(*targets: TargetSettings, **extra: Any) -> Settings:
    values: dict[str, Any] = {
        "targets": list(targets),
        "scrape_interval_s": 0.2,
        "scrape_timeout_s": 0.2,
        "scrape_jitter_s": 0.0,
        "evaluation_interval_s": 0.2,
        "listen": "127.0.0.1:0",
        "shutdown_grace_s": 2.0,
        **extra,
    }
    return Settings(**values)


@asynccontextmanager
async def _running(app: DaemonApp, *, install_signals: bool = False) -> AsyncIterator[str]:
    """Run the app in a task; yield its base URL; stop it and require a clean exit."""
    task = asyncio.create_task(app.run(install_signals=install_signals))

    async def listening() -> bool:
        return app.http is not None and app.http.port != 0

    await waiting.wait_for(listening, 5.0)
    assert app.http is not None
    try:
        yield f"http://127.0.0.1:{app.http.port}"
    finally:
        if not task.done():
            app.request_stop("test finished")
        await asyncio.wait_for(task, timeout=10)


async def test_health_ready_metrics_and_incidents_endpoints() -> None:
    """/healthz, /readyz, /metrics and /api/incidents answer for a daemon scraping a target."""
    text = CAPTURE.read_text()
    server = await MetricsServer(render=lambda: text).start()
    app = DaemonApp(_settings(TargetSettings(name="t0", metrics_url=server.url)))
    try:
        async with _running(app) as base, aiohttp.ClientSession() as http:
            async with http.get(f"{base}/healthz") as resp:
                assert resp.status == 200

            async def ready() -> bool:
                async with http.get(f"{base}/readyz") as resp:
                    return resp.status == 200

            await waiting.wait_for(ready, 5.0)
            # The source keeps polling on its interval.
            await waiting.wait_for(lambda: server.hits >= 3, 5.0)
            async with http.get(f"{base}/metrics") as resp:
                metrics = await resp.text()
            async with http.get(f"{base}/api/incidents") as resp:
                incidents = await resp.json()
    finally:
        await server.stop()

    assert 'tritonguard_source_up{source="scrape",target="t0"} 1.0' in metrics
    assert _value(metrics, 'tritonguard_samples_ingested_total{source="scrape"}') > 0
    assert _value(metrics, "tritonguard_evaluations_total") > 0
    assert 'tritonguard_source_poll_duration_seconds_count{source="scrape",target="t0"}' in metrics
    # The injected registry holds only the daemon's metrics, not the process collectors.
    assert "process_cpu_seconds_total" not in metrics
    assert incidents == {"incidents": []}


async def test_not_ready_while_every_target_is_down() -> None:
    """With only a dead target /readyz is 503 and names the error; /healthz stays 200."""
    app = DaemonApp(_settings(TargetSettings(name="dead", metrics_url=closed_port_url())))
    async with _running(app) as base, aiohttp.ClientSession() as http:
        await asyncio.sleep(0.6)
        async with http.get(f"{base}/healthz") as resp:
            assert resp.status == 200
        async with http.get(f"{base}/readyz") as resp:
            status, body = resp.status, await resp.json()
        async with http.get(f"{base}/metrics") as resp:
            metrics = await resp.text()
    assert status == 503
    assert body["sources_fresh"] is False
    assert "connection failed" in body["targets"]["scrape/dead"]["error"]
    assert (
        _value(metrics, 'tritonguard_source_poll_errors_total{source="scrape",target="dead"}') >= 2
    )


async def test_crashing_task_is_restarted_and_counted() -> None:
    """A root task that raises is restarted with backoff; the daemon keeps serving."""
    text = CAPTURE.read_text()
    server = await MetricsServer(render=lambda: text).start()
    app = DaemonApp(_settings(TargetSettings(name="t0", metrics_url=server.url)))
    runs: list[float] = []

    async def flaky() -> None:
        runs.append(time.monotonic())
        if len(runs) <= 3:
            raise RuntimeError(f"boom {len(runs)}")
        await app.supervisor.stopping.wait()

    app.supervisor.backoff_s = 0.05
    app.build()
    app.supervisor.add("flaky", flaky)
    task = asyncio.create_task(app.supervisor.run())
    try:

        async def recovered() -> bool:
            return len(runs) >= 4

        await waiting.wait_for(recovered, 5.0)
        assert app.http is not None
        await waiting.wait_for(_port_open(app.http.port), 5.0)
        async with aiohttp.ClientSession() as http:
            async with http.get(f"http://127.0.0.1:{app.http.port}/metrics") as resp:
                metrics = await resp.text()
            async with http.get(f"http://127.0.0.1:{app.http.port}/readyz") as resp:
                tasks = (await resp.json())["tasks"]
    finally:
        app.request_stop("test")
        await asyncio.wait_for(task, timeout=10)
        await server.stop()

    assert _value(metrics, 'tritonguard_task_restarts_total{task="flaky"}') == 3
    assert tasks["flaky"] == {"running": True, "restarts": 3, "last_error": "RuntimeError: boom 3"}
    gaps = [b - a for a, b in itertools.pairwise(runs)]
    # Backoff doubles: 0.05, 0.1, 0.2 s.
    assert gaps[0] >= 0.04 and gaps[2] >= 0.18 and gaps[2] > gaps[0]


async def test_sigterm_stops_everything_within_the_deadline() -> None:
    """SIGTERM stops sources, evaluator, dispatcher and HTTP, and frees the port, fast."""
    text = CAPTURE.read_text()
    server = await MetricsServer(render=lambda: text).start()
    app = DaemonApp(_settings(TargetSettings(name="t0", metrics_url=server.url)))
    task = asyncio.create_task(app.run(install_signals=True))
    try:
        await waiting.wait_for(lambda: app.http is not None and app.http.port != 0, 5.0)
        assert app.http is not None
        port = app.http.port
        await waiting.wait_for(lambda: server.hits >= 2, 5.0)
        started = time.monotonic()
        os.kill(os.getpid(), signal.SIGTERM)
        await asyncio.wait_for(task, timeout=5)
        elapsed = time.monotonic() - started
        hits_at_stop = server.hits
        await asyncio.sleep(0.5)
    finally:
        if not task.done():
            task.cancel()
        await server.stop()
    assert elapsed < 3.0
    assert server.hits == hits_at_stop
    assert not any(st.running for st in app.supervisor.states().values())
    assert not await _port_open(port)()


async def test_shutdown_lets_in_flight_work_finish_within_grace() -> None:
    """A stage with grace finishes its in-flight work; one past its grace is cancelled."""
    sup = Supervisor()
    finished: list[str] = []
    cancelled: list[str] = []

    def worker(name: str, work_s: float) -> Any:
        async def body() -> None:
            await sup.stopping.wait()
            try:
                await asyncio.sleep(work_s)  # an action finishing after the stop request
                finished.append(name)
            except asyncio.CancelledError:
                cancelled.append(name)
                raise

        return body

    sup.add("quick", worker("quick", 0.2), stage=0, grace_s=2.0)
    sup.add("stuck", worker("stuck", 30.0), stage=1, grace_s=0.3)
    task = asyncio.create_task(sup.run())
    await asyncio.sleep(0.05)
    started = time.monotonic()
    sup.request_stop("test")
    await asyncio.wait_for(task, timeout=5)
    elapsed = time.monotonic() - started
    assert finished == ["quick"] and cancelled == ["stuck"]
    assert 0.45 <= elapsed < 1.5


async def test_alertmanager_webhook_passes_alerts_and_rejects_bad_bodies() -> None:
    """A v4 webhook body with the bearer token reaches the callback as alerts.

    A malformed one gets a 400 reason; one without the token never reaches the callback.
    """
    received: list[Alert] = []

    async def on_alerts(alerts: list[Alert]) -> None:
        received.extend(alerts)

    app = DaemonApp(_settings(api={"token": "s3cret-for-this-test"}), on_alerts=on_alerts)
    auth = {"Authorization": "Bearer s3cret-for-this-test"}
    payload = {
        "version": "4",
        "groupKey": '{}:{alertname="TritonP99High"}',
        "status": "firing",
        "receiver": "tritonguard",
        "groupLabels": {"alertname": "TritonP99High"},
        "commonLabels": {},
        "commonAnnotations": {},
        "externalURL": "http://alertmanager.local",
        "truncatedAlerts": 0,
        "alerts": [
            {
                "status": "firing",
                "labels": {"alertname": "TritonP99High", "namespace": "ml", "model": "resnet"},
                "annotations": {"summary": "p99 over SLO"},
                "startsAt": "2026-11-30T10:00:00Z",
                "endsAt": "0001-01-01T00:00:00Z",
                "generatorURL": "http://prometheus.local/graph",
                "fingerprint": "abc123",
            },
            {"status": "resolved", "labels": {"alertname": "TritonQueueHigh"}},
        ],
    }
    async with _running(app) as base, aiohttp.ClientSession(headers=auth) as http:
        async with http.post(f"{base}/api/alertmanager", json=payload) as resp:
            ok = (resp.status, await resp.json())
        async with http.post(f"{base}/api/alertmanager", json={"version": "3"}) as resp:
            bad_version = (resp.status, await resp.json())
        async with http.post(f"{base}/api/alertmanager", data=b"{not json") as resp:
            not_json = (resp.status, await resp.json())
        anonymous = {"Authorization": ""}
        async with http.post(f"{base}/api/alertmanager", json=payload, headers=anonymous) as resp:
            unauthenticated = resp.status
        async with http.get(f"{base}/metrics") as resp:
            metrics = await resp.text()
    assert ok == (200, {"received": 2})
    assert [(a.status, a.name) for a in received] == [
        ("firing", "TritonP99High"),
        ("resolved", "TritonQueueHigh"),
    ]
    assert received[0].labels["model"] == "resnet" and received[0].fingerprint == "abc123"
    assert bad_version[0] == 400 and "version" in bad_version[1]["error"]
    assert not_json == (400, {"error": "body is not JSON"})
    assert unauthenticated == 401
    assert _value(metrics, 'tritonguard_alertmanager_alerts_total{status="firing"}') == 1


async def test_events_reach_the_observer_and_failures_are_contained() -> None:
    """on_events gets each batch; a raising observer is logged and the next batch still runs."""
    from tritonguard.core.findings import Evidence, Fix, IncidentEvent, Subject

    calls: list[int] = []

    async def on_events(events: list[IncidentEvent]) -> None:
        calls.append(len(events))
        if len(calls) == 1:
            raise RuntimeError("observer bug")

    app = DaemonApp(_settings(), on_events=on_events)
    event = IncidentEvent(
        event="opened",
        incident_id="i1",
        cause="batching_delay",
        subject=Subject("ml", "resnet"),
        at=1.0,
        confidence=0.9,
        summary="s",
        evidence={"x": Evidence(1.0, "us", 60.0, "x")},
        fix=Fix("lower max_queue_delay_microseconds"),
        opened_at=1.0,
    )
    await app.dispatch([event], 1.0)
    await app.dispatch([event, event], 2.0)
    assert calls == [1, 2]


def _value(metrics: str, series: str) -> float:
    for line in metrics.splitlines():
        if line.startswith(series + " "):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"{series} not in /metrics")


def _port_open(port: int) -> Callable[[], Awaitable[bool]]:
    async def check() -> bool:
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            return False
        writer.close()
        return True

    return check


@pytest.fixture(autouse=True)
def _restore_sigterm() -> Any:
    """Keep the test process's own signal disposition whatever a test installs."""
    before = signal.getsignal(signal.SIGTERM)
    yield
    signal.signal(signal.SIGTERM, before)


@pytest.mark.live
async def test_daemon_reads_model_configs_from_a_real_triton(tmp_path: Path) -> None:
    """Scraping a real Triton with a triton_url makes the daemon fetch each seen model's config."""
    from tritonguard.lab.repository import ModelSpec, write_model
    from tritonguard.lab.triton_server import TritonServer

    repo = tmp_path / "repo"
    write_model(repo, ModelSpec(name="cfg_m", instance_count=2, warmup_count=1))
    async with TritonServer(repo) as triton:
        target = TargetSettings(
            name="triton",
            metrics_url=triton.metrics_url,
            triton_url=triton.http_url,
            namespace="lab",
            pod="triton-0",
        )
        app = DaemonApp(_settings(target, scrape_interval_s=0.5))
        async with _running(app) as base, aiohttp.ClientSession() as http:

            async def configured() -> bool:
                return app.engine.model_config(("lab", "triton-0", "cfg_m")) is not None

            await waiting.wait_for(configured, 15.0)
            async with http.get(f"{base}/readyz") as resp:
                ready = resp.status
    config = app.engine.model_config(("lab", "triton-0", "cfg_m"))
    assert config is not None
    assert ready == 200
    assert config.instance_count == 2 and config.has_warmup is True
