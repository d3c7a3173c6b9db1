"""A real Prometheus (the Debian binary) on loopback with a generated scrape config, for the lab."""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

import yaml

from tritonguard.lab.triton_server import free_port


class PrometheusServerError(RuntimeError):
    """Prometheus is missing, or did not get ready."""


@dataclass(frozen=True)
class ScrapeJob:
    """One static scrape job: ``targets`` are ``host:port``; ``labels`` are added as target labels."""

    name: str
    targets: Sequence[str]
    interval_s: float = 5.0
    labels: Mapping[str, str] = field(default_factory=dict)


def _duration(seconds: float) -> str:
    return f"{max(1, round(seconds * 1000))}ms"


def render_config(jobs: Sequence[ScrapeJob]) -> str:
    """Return the prometheus.yml for ``jobs`` (each with its own scrape interval)."""
    config = {
        "global": {"scrape_interval": "5s", "evaluation_interval": "5s"},
        "scrape_configs": [
            {
                "job_name": job.name,
                "scrape_interval": _duration(job.interval_s),
                "scrape_timeout": _duration(min(job.interval_s, 10.0)),
                "static_configs": [{"targets": list(job.targets), "labels": dict(job.labels)}],
            }
            for job in jobs
        ],
    }
    return yaml.safe_dump(config, sort_keys=False)


class PrometheusServer:
    """Start Prometheus on a free loopback port; ``stop()`` (or the context) ends it."""

    def __init__(self, jobs: Sequence[ScrapeJob], *, binary: str = "prometheus") -> None:
        self.jobs = list(jobs)
        self.binary = binary
        self.workdir = Path(tempfile.mkdtemp(prefix="tritonguard-prometheus-"))
        self.port = 0
        self._proc: subprocess.Popen[bytes] | None = None

    @staticmethod
    def available(binary: str = "prometheus") -> bool:
        """Return True when the Prometheus binary is installed."""
        return shutil.which(binary) is not None

    @property
    def url(self) -> str:
        """Base URL of the HTTP API."""
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout_s: float = 30.0) -> PrometheusServer:
        """Write the config, start Prometheus and block until ``/-/ready`` answers."""
        binary = shutil.which(self.binary)
        if binary is None:
            raise PrometheusServerError(
                f"{self.binary} is not installed; run `make system-deps` (Debian package prometheus)"
            )
        config = self.workdir / "prometheus.yml"
        config.write_text(render_config(self.jobs))
        self.port = free_port()
        with (self.workdir / "prometheus.log").open("wb") as log:
            self._proc = subprocess.Popen(
                [
                    binary,
                    f"--config.file={config}",
                    f"--storage.tsdb.path={self.workdir / 'data'}",
                    f"--web.listen-address=127.0.0.1:{self.port}",
                    "--storage.tsdb.retention.time=1h",
                    "--log.level=warn",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=self.workdir,
                start_new_session=True,
            )
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                tail = self.log_tail()
                self.stop()
                raise PrometheusServerError(f"prometheus exited during start:\n{tail}")
            with (
                contextlib.suppress(OSError, urllib.error.URLError),
                urllib.request.urlopen(f"{self.url}/-/ready", timeout=1) as resp,
            ):
                if resp.status == 200:
                    return self
            time.sleep(0.1)
        tail = self.log_tail()
        self.stop()
        raise PrometheusServerError(f"prometheus not ready after {timeout_s}s:\n{tail}")

    def log_tail(self, lines: int = 20) -> str:
        """Return the end of Prometheus's log."""
        try:
            text = (self.workdir / "prometheus.log").read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def stop(self) -> None:
        """Terminate Prometheus (kill it if it lingers) and remove its storage."""
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(timeout=5)
        shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self) -> PrometheusServer:
        return self.start()

    def __exit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
