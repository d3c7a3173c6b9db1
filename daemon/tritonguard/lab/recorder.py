"""Scrape the lab's targets at an interval, as Prometheus would; write trace and labels."""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import json
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

from tritonguard.core.exposition import parse_exposition
from tritonguard.core.samples import Sample, make_labels
from tritonguard.core.trace_writer import render_trace_gz

# What the engine reads; everything else in the expositions (pinned-memory pools, response
# cache, Go runtime, per-mode memory details) only makes the fixtures bigger.
KEEP_PREFIXES: tuple[str, ...] = (
    "nv_inference_",
    "nv_model_load_duration_secs",
    "nv_cpu_utilization",
    "nv_cpu_memory_used_bytes",
    "nv_gpu_",
    "DCGM_FI_",
    "container_cpu_",
    "container_spec_cpu_",
    "container_pressure_cpu_waiting_seconds_total",
    "kube_pod_info",
    "node_cpu_seconds_total",
    "node_load1",
    "node_load5",
    "node_memory_MemAvailable_bytes",
    "node_memory_MemTotal_bytes",
    "nginx_ingress_controller_requests",
)


@dataclass(frozen=True)
class Target:
    """One scrape target and the target labels Prometheus' relabeling would attach to its series."""

    job: str
    url: str
    labels: tuple[tuple[str, str], ...] = ()

    @property
    def instance(self) -> str:
        """The ``host:port`` Prometheus uses as ``instance``."""
        return self.url.split("://", 1)[-1].split("/", 1)[0]


@dataclass
class Scrape:
    """One raw scrape: when, from which target, and the exposition text (None when it failed)."""

    timestamp: float
    job: str
    instance: str
    labels: dict[str, str]
    text: str | None


@dataclass
class Recorder:
    """Scrape ``targets`` every ``interval_s`` seconds until stopped; keep the raw scrapes."""

    targets: list[Target]
    interval_s: float
    scrapes: list[Scrape] = field(default_factory=list)
    _task: asyncio.Task[None] | None = None

    async def _scrape(self, session: aiohttp.ClientSession, target: Target, ts: float) -> None:
        text: str | None
        try:
            timeout = aiohttp.ClientTimeout(total=max(1.0, self.interval_s * 0.8))
            async with session.get(target.url, timeout=timeout) as resp:
                text = await resp.text() if resp.status == 200 else None
        except (aiohttp.ClientError, TimeoutError, OSError):
            # A target that is down yields no samples (Prometheus' up == 0), never zeros.
            text = None
        self.scrapes.append(Scrape(ts, target.job, target.instance, dict(target.labels), text))

    async def _loop(self) -> None:
        async with aiohttp.ClientSession() as session:
            next_at = time.time()
            while True:
                ts = round(time.time(), 3)
                await asyncio.gather(*(self._scrape(session, t, ts) for t in self.targets))
                next_at += self.interval_s
                await asyncio.sleep(max(0.0, next_at - time.time()))

    def start(self) -> Recorder:
        """Start scraping in the running event loop."""
        self._task = asyncio.create_task(self._loop())
        return self

    def retarget(self, job: str, url: str) -> None:
        """Point one job at a new URL (a restarted server listens on new ports)."""
        self.targets = [Target(t.job, url, t.labels) if t.job == job else t for t in self.targets]

    async def stop(self) -> None:
        """Stop scraping (the scrape in flight is finished or dropped)."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    def save_raw(self, path: Path) -> None:
        """Write the raw scrapes as gzipped JSON lines (convertible later with ``convert_raw``)."""
        with gzip.open(path, "wt") as handle:
            for s in self.scrapes:
                handle.write(json.dumps(s.__dict__) + "\n")


def load_raw(path: Path) -> list[Scrape]:
    """Read raw scrapes written by ``Recorder.save_raw``."""
    with gzip.open(path, "rt") as handle:
        return [Scrape(**json.loads(line)) for line in handle if line.strip()]


def scrapes_to_samples(
    scrapes: Iterable[Scrape], keep: Sequence[str] = KEEP_PREFIXES
) -> tuple[list[Sample], dict[str, str]]:
    """Parse raw scrapes into timestamped samples with target labels, keeping only ``keep``."""
    samples: list[Sample] = []
    types: dict[str, str] = {}
    for scrape in scrapes:
        if scrape.text is None:
            continue
        exp = parse_exposition(
            scrape.text,
            source=f"{scrape.job}@{scrape.timestamp}",
            default_timestamp=scrape.timestamp,
        )
        extra = {"job": scrape.job, "instance": scrape.instance, **scrape.labels}
        for sample in exp.samples:
            if not sample.name.startswith(tuple(keep)):
                continue
            labels = dict(sample.labels)
            for key, value in extra.items():
                # honor_labels: false, as Prometheus: a clash renames the exposed label.
                if key in labels and labels[key] != value:
                    labels[f"exported_{key}"] = labels[key]
                labels[key] = value
            samples.append(Sample(sample.name, make_labels(labels), sample.value, scrape.timestamp))
        for name, kind in exp.types.items():
            if name.startswith(tuple(keep)):
                types.setdefault(name, kind)
    return samples, types


def write_trace(scrapes: Iterable[Scrape], out: Path, keep: Sequence[str] = KEEP_PREFIXES) -> int:
    """Render the scrapes as a gzipped OpenMetrics trace at ``out``; return the sample count."""
    samples, types = scrapes_to_samples(scrapes, keep)
    out.write_bytes(render_trace_gz(samples, types))
    return len(samples)


def write_labels(path: Path, labels: dict[str, Any]) -> None:
    """Write the scenario's label file (ground truth for tests and tuning)."""
    path.write_text(json.dumps(labels, indent=2, sort_keys=True) + "\n")
