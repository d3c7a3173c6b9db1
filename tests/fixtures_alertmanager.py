"""Start a real Alertmanager (the Debian binary) on loopback for tests, and post alerts to it.

``alertmanager`` is the fixture that starts one on a config (``webhook_config``: the shipped
example pointed at a daemon) and stops every one started when the test ends.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import shutil
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.fixtures_prometheus import free_port
from tests.webhook_harness import ALERT

EXAMPLE = Path(__file__).parents[1] / "deploy" / "examples" / "alertmanager.yaml"


def alertmanager_binary() -> str | None:
    """Return the path of the alertmanager binary, or None when it is not installed."""
    return shutil.which("prometheus-alertmanager") or shutil.which("alertmanager")


@dataclass
class AlertmanagerProcess:
    """A running Alertmanager on 127.0.0.1 with its own config and storage, clustering off."""

    proc: subprocess.Popen[bytes]
    url: str
    workdir: Path

    def post_alerts(self, alerts: Sequence[Mapping[str, Any]]) -> None:
        """Post alerts to Alertmanager's own API (``POST /api/v2/alerts``), as Prometheus does."""
        request = urllib.request.Request(
            f"{self.url}/api/v2/alerts",
            data=json.dumps(list(alerts)).encode(),
            headers={"Content-Type": "application/json"},
            method="POST",
        )
        with urllib.request.urlopen(request, timeout=5) as resp:
            assert resp.status == 200

    def metric(self, series: str) -> float:
        """Return one series of Alertmanager's own /metrics (0 when absent)."""
        with urllib.request.urlopen(f"{self.url}/metrics", timeout=5) as resp:
            text = resp.read().decode()
        for line in text.splitlines():
            if line.startswith(series + " "):
                return float(line.rsplit(" ", 1)[1])
        return 0.0

    def log_tail(self, lines: int = 30) -> str:
        """Return the end of Alertmanager's log."""
        log = self.workdir / "alertmanager.log"
        return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])

    def wait_ready(self, timeout_s: float = 30.0) -> None:
        """Block until /-/ready answers 200, or fail with the log tail."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"alertmanager exited early:\n{self.log_tail()}")
            with (
                contextlib.suppress(OSError, urllib.error.URLError),
                urllib.request.urlopen(f"{self.url}/-/ready", timeout=1) as resp,
            ):
                if resp.status == 200:
                    return
            time.sleep(0.1)
        raise RuntimeError(f"alertmanager not ready after {timeout_s}s:\n{self.log_tail()}")

    def stop(self) -> None:
        """Terminate the process (kill it if it lingers)."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)


def start_alertmanager(workdir: Path, config: Mapping[str, Any]) -> AlertmanagerProcess:
    """Write ``config`` as alertmanager.yml and start Alertmanager on a free loopback port."""
    binary = alertmanager_binary()
    if binary is None:
        raise RuntimeError("prometheus-alertmanager is not installed; run `make system-deps`")
    workdir.mkdir(parents=True, exist_ok=True)
    config_path = workdir / "alertmanager.yml"
    config_path.write_text(yaml.safe_dump(dict(config), sort_keys=False))
    port = free_port()
    log = (workdir / "alertmanager.log").open("wb")
    proc = subprocess.Popen(
        [
            binary,
            f"--config.file={config_path}",
            f"--storage.path={workdir / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
            # An empty address turns clustering (gossip on 9094) off.
            "--cluster.listen-address=",
            "--log.level=debug",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        cwd=workdir,
    )
    log.close()
    am = AlertmanagerProcess(proc=proc, url=f"http://127.0.0.1:{port}", workdir=workdir)
    try:
        am.wait_ready()
    except BaseException:
        am.stop()
        raise
    return am


StartAlertmanager = Callable[[Mapping[str, Any]], AlertmanagerProcess]


@pytest.fixture(name="alertmanager")
def alertmanager_starter(tmp_path: Path) -> Iterator[StartAlertmanager]:
    """Yield a function starting Alertmanager on a config; each one started is stopped after."""
    started: list[AlertmanagerProcess] = []

    def start(config: Mapping[str, Any]) -> AlertmanagerProcess:
        am = start_alertmanager(tmp_path / f"alertmanager{len(started)}", config)
        started.append(am)
        return am

    yield start
    for am in started:
        am.stop()


def webhook_config(daemon_base: str, credentials: Path) -> dict[str, Any]:
    """Return the shipped example, pointed at this daemon and token file, notifying at once."""
    config: dict[str, Any] = yaml.safe_load(EXAMPLE.read_text())
    (route,) = config["route"]["routes"]
    route.update(group_wait="0s", group_interval="1s")
    (receiver,) = [r for r in config["receivers"] if r["name"] == "tritonguard"]
    (hook,) = receiver["webhook_configs"]
    hook["url"] = f"{daemon_base}/api/alertmanager"
    authorization = hook["http_config"]["authorization"]
    assert authorization["type"] == "Bearer" and "credentials_file" in authorization
    authorization["credentials_file"] = str(credentials)
    return config


def prometheus_alert(*, resolved: bool = False) -> dict[str, Any]:
    """Return an alert as Prometheus posts it to Alertmanager's API."""
    now = dt.datetime.now(dt.UTC)
    ends = now - dt.timedelta(seconds=1) if resolved else now + dt.timedelta(hours=1)
    return {
        "labels": {"alertname": ALERT, "namespace": "prod", "model": "resnet", "severity": "page"},
        "annotations": {"summary": "resnet p99 over its SLO for 5m"},
        "startsAt": (now - dt.timedelta(minutes=5)).isoformat(),
        "endsAt": ends.isoformat(),
        "generatorURL": "http://prometheus:9090/graph",
    }
