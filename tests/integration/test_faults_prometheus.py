"""Prometheus down, or up with nothing to say: nothing opens or resolves on the absence.

The daemon reads a real Prometheus (the Debian binary) that scrapes a synthetic Triton stuck
in its batcher. Once the incident is open, either Prometheus goes away or its target does
(Prometheus answers, with nothing new). Either way the subject's data is unknown: the
incident stays open, the playbook due later is stopped by the ``stale`` guard, and no value
reads as zero. A Prometheus scraping nothing from the start opens nothing.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.fault_harness import FAST, STALE_REASON, TELL, readiness, running, until
from tests.fault_servers import Answer, FaultProxy
from tests.fixtures_prometheus import MetricsServer, closed_port_url
from tests.synthetic_triton import BatchingTriton
from tritonguard.core.engine import Engine
from tritonguard.core.findings import IncidentEvent, Subject
from tritonguard.core.samples import label
from tritonguard.lab.prometheus_server import PrometheusServer, ScrapeJob
from tritonguard.runtime.daemon_app import DaemonApp
from tritonguard.runtime.playbook_service import PlaybookService, build_service
from tritonguard.settings import Settings

pytestmark = pytest.mark.live

SUBJECT = Subject("search", "ranker", "ranker-0")
# Prometheus scrapes every 0.5 s and the daemon reads it as often: rate windows of 3 s
# see six scrapes, and data is stale 3 s after its last sample.
THRESHOLDS = FAST.model_copy(update={"rate_window_s": 3.0, "stale_after_min_s": 3.0})


@dataclass
class Watch:
    """The daemon reading Prometheus, and what it announced."""

    app: DaemonApp
    service: PlaybookService
    events: list[IncidentEvent] = field(default_factory=list)

    def opened(self) -> IncidentEvent | None:
        """Return the first incident the daemon opened on the subject."""
        return next((e for e in self.events if e.event == "opened"), None)

    def trail(self) -> list[tuple[str, str, str, str]]:
        """Return (action, status, guard, reason) of each decision on the first incident."""
        first = self.opened()
        if first is None:
            return []
        return [
            (r.action, r.status, r.guard, r.reason)
            for r in self.service.store.decisions(first.incident_id)
        ]


def settings(tmp_path: Path, prometheus_url: str) -> Settings:
    """Daemon settings reading only Prometheus, twice a second, dry-run."""
    books = tmp_path / "books"
    books.mkdir(exist_ok=True)
    (books / "tell.yaml").write_text(TELL)
    return Settings(
        prometheus_url=prometheus_url,
        prometheus_interval_s=0.5,
        prometheus_timeout_s=2.0,
        prometheus_backfill_s=30.0,
        evaluation_interval_s=0.25,
        listen="127.0.0.1:0",
        shutdown_grace_s=2.0,
        playbook_dirs=[books],
        audit_db_path=tmp_path / "audit.sqlite3",
        thresholds=THRESHOLDS,
    )


@asynccontextmanager
async def watching(
    tmp_path: Path, prometheus_url: str, on_open: Callable[[], Awaitable[None]] | None = None
) -> AsyncIterator[tuple[Watch, str]]:
    """Run the daemon on ``prometheus_url``; ``on_open`` runs when the first incident opens."""
    s = settings(tmp_path, prometheus_url)
    engine = Engine(s.engine_config())
    service = build_service(s, engine)
    watch: Watch

    async def on_events(events: list[IncidentEvent]) -> None:
        first = watch.opened() is None
        watch.events.extend(events)
        if first and on_open is not None and watch.opened() is not None:
            await on_open()

    app = DaemonApp(s, engine=engine, playbooks=service, on_events=on_events)
    watch = Watch(app, service)
    async with running(app) as base:
        yield watch, base


@pytest.fixture
async def triton() -> AsyncIterator[MetricsServer]:
    """Serve a synthetic Triton whose requests wait 90 ms in the batcher."""
    server = await MetricsServer(render=BatchingTriton().render).start()
    try:
        yield server
    finally:
        await server.stop()


def prometheus_for(target: str) -> PrometheusServer:
    """Return a Prometheus scraping ``target`` twice a second as pod ranker-0 (not started)."""
    labels = {"namespace": "search", "pod": "ranker-0"}
    return PrometheusServer([ScrapeJob("triton", [target], interval_s=0.5, labels=labels)])


async def frozen(watch: Watch, base: str) -> tuple[int, dict[str, object]]:
    """Wait until the playbook was stopped as stale, then a while more; return /readyz."""

    def stale() -> bool:
        return any(guard == "stale" for _, _, guard, _ in watch.trail())

    await until(stale, 40.0, watch.trail)
    # Well past resolve_after (1 s) and the stale horizon (3 s): a zero would show by now.
    await asyncio.sleep(3.0)
    return await readiness(base)


def assert_unknown_and_open(watch: Watch) -> None:
    """Check that the subject's data is unknown, its incident open, and nothing acted on it."""
    engine, now = watch.app.engine, watch.app.clock()
    assert [e.event for e in watch.events if e.subject == SUBJECT] == ["opened"]
    assert engine.book.is_open(SUBJECT)
    assert not engine.is_fresh(SUBJECT, now)
    assert engine.feature_value(SUBJECT, "queue_share", now) is None
    assert engine.feature_value(SUBJECT, "request_rate", now) is None
    assert watch.trail() == [("*", "skipped", "stale", STALE_REASON)]


async def test_prometheus_going_down_leaves_the_incident_open_and_the_playbook_stopped(
    tmp_path: Path, triton: MetricsServer
) -> None:
    """Prometheus stops after the incident opened: unknown, not zero; /readyz says why.

    Every query group reports the connection failure, the daemon is not ready (it has no
    source left), and the incident neither resolves nor reopens.
    """
    prom = await asyncio.to_thread(prometheus_for(triton.host_port).start)
    try:
        async with watching(tmp_path, prom.url, lambda: asyncio.to_thread(prom.stop)) as (w, base):
            status, ready = await frozen(w, base)
            assert_unknown_and_open(w)
    finally:
        await asyncio.to_thread(prom.stop)
    assert status == 503
    targets = ready["targets"]
    assert isinstance(targets, dict)
    groups = {k: v for k, v in targets.items() if k.startswith("prometheus/")}
    assert "prometheus/triton" in groups
    for entry in groups.values():
        assert entry["ok"] is False
        assert "connection failed (is Prometheus running?)" in entry["error"]


async def test_prometheus_with_nothing_new_leaves_the_incident_open_and_the_playbook_stopped(
    tmp_path: Path, triton: MetricsServer
) -> None:
    """Prometheus's target goes away after the incident opened: Prometheus answers, emptily.

    Queries succeed with nothing new (the old samples were delivered already, the staleness
    markers carry no value), so the source is healthy while the subject's data is unknown.
    """
    prom = await asyncio.to_thread(prometheus_for(triton.host_port).start)
    try:
        async with watching(tmp_path, prom.url, triton.stop) as (w, base):
            status, ready = await frozen(w, base)
            assert_unknown_and_open(w)
    finally:
        await asyncio.to_thread(prom.stop)
    targets = ready["targets"]
    assert isinstance(targets, dict)
    assert targets["prometheus/triton"]["ok"] is True  # it answered: with nothing
    assert status == 200


async def test_prometheus_scraping_nothing_opens_nothing(tmp_path: Path) -> None:
    """A Prometheus whose Triton target never answers gives no series and no incident."""
    prom = await asyncio.to_thread(prometheus_for(closed_port_url("").split("/")[2]).start)
    try:
        async with watching(tmp_path, prom.url) as (w, base):
            await until(lambda: w.app.engine.evaluations >= 20, 20.0)
            await asyncio.sleep(3.0)
            status, ready = await readiness(base)
            series = len(w.app.engine.store)
    finally:
        await asyncio.to_thread(prom.stop)
    assert w.events == []
    assert series == 0
    assert status == 200 and ready["targets"]["prometheus/triton"]["ok"] is True


async def test_a_gap_in_the_daemons_queries_is_read_back_once_they_succeed(
    tmp_path: Path, triton: MetricsServer
) -> None:
    """Prometheus scrapes on while the daemon's queries fail; the next good poll fills the gap.

    A proxy in front of Prometheus answers every query with 503 for four seconds: /readyz
    shows the failure meanwhile. Once queries pass again the daemon reads back from its last
    good poll, so the samples Prometheus stored during the gap arrive, in order: nothing is
    lost but time.
    """
    prom = await asyncio.to_thread(prometheus_for(triton.host_port).start)
    try:
        async with FaultProxy(prom.url) as proxy, watching(tmp_path, proxy.url) as (w, base):
            await until(lambda: len(scrape_times(w)) >= 6, 30.0)
            blocked = proxy.add("*", r"/api/v1/query", Answer(503, "unavailable"), times=10**6)
            gap_from = time.time()
            await until(lambda: bool(proxy.faulted("Answer")), 10.0)
            await asyncio.sleep(4.0)
            _, during = await readiness(base)
            blocked.times = 0
            gap_to = time.time()
            await until(lambda: max(scrape_times(w)) > gap_to + 1.0, 20.0)
            times = scrape_times(w)
    finally:
        await asyncio.to_thread(prom.stop)
    targets = during["targets"]
    assert isinstance(targets, dict) and targets["prometheus/triton"]["ok"] is False
    assert "503" in targets["prometheus/triton"]["error"]
    inside = [t for t in times if gap_from < t < gap_to]
    # Prometheus scraped every 0.5 s throughout; allow for a scrape or two at the edges.
    assert len(inside) >= (gap_to - gap_from) / 0.5 - 3, (gap_to - gap_from, inside)
    assert times == sorted(times)


def scrape_times(watch: Watch) -> list[float]:
    """Return the timestamps the engine holds for the subject's request counter."""
    for series in watch.app.engine.store.family("nv_inference_request_success"):
        if label(series.labels, "pod") == SUBJECT.pod:
            return list(series.times)
    return []
