"""Start a real Prometheus (the Debian binary) on loopback for tests, and serve metrics to it."""

from __future__ import annotations

import contextlib
import json
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from aiohttp import web


def free_port() -> int:
    """Return a TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def closed_port_url(path: str = "/metrics") -> str:
    """Return a loopback URL nothing listens on (connection refused at once)."""
    return f"http://127.0.0.1:{free_port()}{path}"


def prometheus_binary() -> str | None:
    """Return the path of the prometheus binary, or None when it is not installed."""
    return shutil.which("prometheus")


@dataclass
class ScrapeJob:
    """One static scrape job for the generated Prometheus config."""

    name: str
    targets: Sequence[str]
    labels: Mapping[str, str] = field(default_factory=dict)
    metrics_path: str = "/metrics"


@dataclass
class PrometheusProcess:
    """A running Prometheus on 127.0.0.1 with its own config and storage directory."""

    proc: subprocess.Popen[bytes]
    url: str
    workdir: Path

    def query(self, promql: str) -> list[dict[str, Any]]:
        """Run an instant query over plain HTTP (independent of the code under test)."""
        qs = urllib.parse.urlencode({"query": promql})
        with urllib.request.urlopen(f"{self.url}/api/v1/query?{qs}", timeout=5) as resp:
            body = json.load(resp)
        result: list[dict[str, Any]] = body["data"]["result"]
        return result

    def wait_ready(self, timeout_s: float = 30.0) -> None:
        """Block until /-/ready answers 200, or fail with the log tail."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"prometheus exited early:\n{self.log_tail()}")
            with (
                contextlib.suppress(OSError, urllib.error.URLError),
                urllib.request.urlopen(f"{self.url}/-/ready", timeout=1) as resp,
            ):
                if resp.status == 200:
                    return
            time.sleep(0.1)
        raise RuntimeError(f"prometheus not ready after {timeout_s}s:\n{self.log_tail()}")

    def wait_for_samples(self, promql: str, count: int = 1, timeout_s: float = 30.0) -> None:
        """Block until ``promql`` (a range selector, e.g. ``m[1m]``) has ``count`` samples."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError, urllib.error.URLError, KeyError):
                result = self.query(promql)
                points = sum(len(s.get("values", [s.get("value")])) for s in result)
                if points >= count:
                    return
            time.sleep(0.2)
        raise RuntimeError(f"no {count} samples for {promql} after {timeout_s}s")

    def log_tail(self, lines: int = 20) -> str:
        """Return the end of Prometheus's log."""
        log = self.workdir / "prometheus.log"
        return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])

    def stop(self) -> None:
        """Terminate the process (kill it if it lingers)."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)


def start_prometheus(
    workdir: Path, jobs: Sequence[ScrapeJob], scrape_interval: str = "1s"
) -> PrometheusProcess:
    """Write a config for ``jobs`` and start Prometheus on a free loopback port."""
    binary = prometheus_binary()
    if binary is None:
        raise RuntimeError("prometheus is not installed; run `make system-deps`")
    workdir.mkdir(parents=True, exist_ok=True)
    config = {
        "global": {"scrape_interval": scrape_interval, "scrape_timeout": scrape_interval},
        "scrape_configs": [
            {
                "job_name": job.name,
                "metrics_path": job.metrics_path,
                "static_configs": [{"targets": list(job.targets), "labels": dict(job.labels)}],
            }
            for job in jobs
        ],
    }
    return launch_prometheus(binary, workdir, config)


def launch_prometheus(
    binary: str, workdir: Path, config: Mapping[str, object]
) -> PrometheusProcess:
    """Write ``config`` into ``workdir`` and start Prometheus on it on a free loopback port.

    Returns once Prometheus answers ready; a Prometheus that never does is stopped.
    """
    config_path = workdir / "prometheus.yml"
    config_path.write_text(yaml.safe_dump(dict(config)))
    port = free_port()
    log = (workdir / "prometheus.log").open("wb")
    proc = subprocess.Popen(
        [
            binary,
            f"--config.file={config_path}",
            f"--storage.tsdb.path={workdir / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
            "--storage.tsdb.retention.time=1h",
            "--log.level=warn",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        cwd=workdir,
    )
    log.close()
    prom = PrometheusProcess(proc=proc, url=f"http://127.0.0.1:{port}", workdir=workdir)
    try:
        prom.wait_ready()
    except BaseException:
        prom.stop()
        raise
    return prom


@pytest.fixture
def prometheus_factory(
    tmp_path: Path,
) -> Iterator[Callable[..., PrometheusProcess]]:
    """Yield a function starting Prometheus for given scrape jobs; every one is stopped after."""
    started: list[PrometheusProcess] = []

    def factory(jobs: Sequence[ScrapeJob], scrape_interval: str = "1s") -> PrometheusProcess:
        prom = start_prometheus(tmp_path / f"prom{len(started)}", jobs, scrape_interval)
        started.append(prom)
        return prom

    yield factory
    for prom in started:
        prom.stop()


@dataclass
class MetricsServer:
    """A local aiohttp server whose /metrics body is produced by a callable on each request."""

    render: Callable[[], str]
    delay_s: float = 0.0
    url: str = ""
    hits: int = 0
    _runner: web.AppRunner | None = None

    async def start(self) -> MetricsServer:
        """Listen on a free loopback port."""
        import asyncio

        async def handle(request: web.Request) -> web.Response:
            self.hits += 1
            if self.delay_s:
                await asyncio.sleep(self.delay_s)
            return web.Response(text=self.render(), content_type="text/plain", charset="utf-8")

        app = web.Application()
        app.router.add_get("/metrics", handle)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        port = free_port()
        site = web.TCPSite(self._runner, "127.0.0.1", port)
        await site.start()
        self.url = f"http://127.0.0.1:{port}/metrics"
        return self

    @property
    def host_port(self) -> str:
        """Return ``127.0.0.1:PORT`` as Prometheus's target and ``instance`` label."""
        return self.url.split("/")[2]

    async def stop(self) -> None:
        """Stop listening."""
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
