"""The daemon with an alert-matched playbook, in-process or as a process, for webhook tests."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tests import waiting
from tests.fixtures_prometheus import free_port
from tests.playbook_harness import StaticFeatures
from tritonguard.core.action_records import ActionRecord
from tritonguard.core.engine import Engine
from tritonguard.core.findings import Evidence, Fix, IncidentEvent, Subject
from tritonguard.runtime.daemon_app import DaemonApp
from tritonguard.runtime.playbook_service import PlaybookService, build_service
from tritonguard.settings import Settings

ALERT = "TritonSLOBurn"
TOKEN = "am-to-tritonguard-3f1c9a7e5b2d4068"

# The shape of the measured incident: an alert name arms a playbook that changes a server.
PLAYBOOK = f"""
name: reload-on-slo-burn
when:
  alerts: [{ALERT}]
steps:
  - action: triton.update_config
    params:
      set: {{dynamic_batching.max_queue_delay_microseconds: 500}}
"""


def settings(tmp_path: Path, **api: Any) -> Settings:
    """Daemon settings with the alert playbook, an audit file in ``tmp_path`` and ``api``."""
    books = tmp_path / "books"
    books.mkdir(exist_ok=True)
    (books / "alerts.yaml").write_text(PLAYBOOK)
    return Settings(
        listen="127.0.0.1:0",
        evaluation_interval_s=0.2,
        shutdown_grace_s=2.0,
        playbook_dirs=[books],
        audit_db_path=tmp_path / "audit.sqlite3",
        api=api,
    )


def daemon(s: Settings) -> tuple[DaemonApp, PlaybookService]:
    """Build the daemon as `tritonguard run` does, every subject's data fresh.

    No Triton is scraped here, so the stage would skip every playbook as acting on stale data;
    fresh features stand in for a live Triton's, and what is left to decide is the alert match.
    """
    engine = Engine()
    service = build_service(s, engine)
    service.stage.executor.env.features = StaticFeatures(value=1.0)
    app = DaemonApp(s, engine=engine, playbooks=service)
    service.on_change = app.refresh_model_configs
    return app, service


def incident(model: str = "resnet") -> IncidentEvent:
    """Return an incident about ``model`` in ``prod`` as the engine would open it."""
    now = time.time()
    return IncidentEvent(
        event="opened",
        incident_id=f"inc-{model}-{now}",
        cause="batching_delay",
        subject=Subject("prod", model, "triton-0"),
        at=now,
        confidence=0.9,
        summary="requests wait in the batcher",
        evidence={"queue_share": Evidence(0.9, "ratio", 30, "queue / request time")},
        fix=Fix("lower max_queue_delay_microseconds"),
        opened_at=now,
    )


async def armed(service: PlaybookService, model: str = "resnet") -> list[ActionRecord]:
    """Return what the stage decides for a fresh incident on ``model`` (dry-run: planned)."""
    event = incident(model)
    return (await service.stage.run_step([event], event.at)).get(event.incident_id, [])


def alert(fingerprint: str, status: str = "firing", **labels: str) -> dict[str, Any]:
    """Return one alert as Alertmanager's webhook sends it."""
    return {
        "status": status,
        "labels": {"alertname": ALERT, "namespace": "prod", "model": "resnet", **labels},
        "annotations": {"summary": "p99 over its SLO for 5m"},
        "startsAt": "2026-12-01T03:00:00Z",
        "endsAt": "0001-01-01T00:00:00Z",
        "generatorURL": "http://prometheus:9090/graph?g0.expr=x",
        "fingerprint": fingerprint,
    }


def notification(alerts: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Return a version 4 webhook body carrying ``alerts``."""
    return {
        "version": "4",
        "groupKey": f'{{}}:{{alertname="{ALERT}"}}',
        "truncatedAlerts": 0,
        "status": "firing",
        "receiver": "tritonguard",
        "groupLabels": {"alertname": ALERT},
        "commonLabels": {"alertname": ALERT},
        "commonAnnotations": {},
        "externalURL": "http://alertmanager:9093",
        "alerts": list(alerts),
    }


async def wait_until(predicate: Callable[[], bool], timeout_s: float = 10.0) -> None:
    """Poll ``predicate`` until it holds, or fail."""
    await waiting.wait_for(predicate, timeout_s, poll_s=0.05)


@asynccontextmanager
async def running(app: DaemonApp) -> AsyncIterator[str]:
    """Run the daemon; yield its base URL; stop it and require a clean exit."""
    task = asyncio.create_task(app.run(install_signals=False))
    await wait_until(lambda: app.http is not None and app.http.port != 0, 5.0)
    assert app.http is not None
    try:
        yield f"http://127.0.0.1:{app.http.port}"
    finally:
        if not task.done():
            app.request_stop("test finished")
        await asyncio.wait_for(task, timeout=10)


def metric(text: str, series: str) -> float:
    """Return the value of one series in a /metrics exposition."""
    for line in text.splitlines():
        if line.startswith(series + " "):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"{series} not in /metrics")


@dataclass
class DaemonProcess:
    """`tritonguard run` in a subprocess on a free loopback port; its log is JSON lines."""

    proc: subprocess.Popen[bytes]
    base: str
    log_path: Path

    @property
    def pid(self) -> int:
        """Return the daemon's process id."""
        return self.proc.pid

    def rss_kib(self) -> int:
        """Return the daemon's resident set size (VmRSS) in KiB."""
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
        raise AssertionError("no VmRSS in /proc status")

    def log_lines(self) -> list[dict[str, Any]]:
        """Return the JSON log lines written so far."""
        lines = self.log_path.read_text(errors="replace").splitlines()
        return [json.loads(line) for line in lines if line.startswith("{")]

    def stop(self) -> None:
        """SIGTERM the daemon and wait (kill it if it lingers)."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)


def start_daemon(tmp_path: Path, **api: Any) -> DaemonProcess:
    """Write a config (the alert playbook, ``api`` settings) and start the daemon on it."""
    books = tmp_path / "books"
    books.mkdir(exist_ok=True)
    (books / "alerts.yaml").write_text(PLAYBOOK)
    port = free_port()
    config = {
        "listen": f"127.0.0.1:{port}",
        "playbook_dirs": [str(books)],
        "audit_db_path": str(tmp_path / "audit.sqlite3"),
        "api": {k: str(v) if isinstance(v, Path) else v for k, v in api.items()},
    }
    config_path = tmp_path / "tritonguard.yaml"
    config_path.write_text(yaml.safe_dump(config))
    log_path = tmp_path / "daemon.log"
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "tritonguard.cli.main", "run", "--config", str(config_path)],
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, "TRITONGUARD_CONFIG": ""},
        )
    daemon = DaemonProcess(proc, f"http://127.0.0.1:{port}", log_path)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"daemon exited early:\n{log_path.read_text()}")
        try:
            with urllib.request.urlopen(f"{daemon.base}/healthz", timeout=1) as resp:
                if resp.status == 200:
                    return daemon
        except OSError:
            time.sleep(0.1)
    daemon.stop()
    raise AssertionError(f"daemon not healthy after 30s:\n{log_path.read_text()}")
