"""A real daemon process stopped or killed mid-verify: the restarted daemon rolls the fix back."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import pytest
import yaml

from tests.fixtures_prometheus import MetricsServer
from tests.synthetic_triton import BatchingTriton
from tritonguard.clients.triton_api import TritonClient
from tritonguard.lab.repository import DynamicBatching, ModelSpec, write_model
from tritonguard.lab.triton_server import TritonServer, free_port
from tritonguard.runtime.audit_store import AuditStore

pytestmark = pytest.mark.live

DELAY_US = 100_000
# The fix lowers the batcher's delay; the synthetic metrics keep showing the queue, so the
# verify step fails once it is judged and the change must come off the real server.
PLAYBOOK = """
name: lower-delay-then-verify
when: {causes: [batching_delay]}
guards: {dry_run: false, cooldown: 1h}
steps:
  - action: triton.update_config
    params:
      model: ranker
      set: {dynamic_batching.max_queue_delay_microseconds: 500}
verify:
  wait: 15s
  checks: [{feature: queue_share, below: 0.5}]
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TritonServer]:
    """Yield a real Triton in explicit mode serving ``ranker`` with a 100 ms batcher delay."""
    repo = tmp_path_factory.mktemp("repo")
    write_model(repo, ModelSpec(name="ranker", dynamic_batching=DynamicBatching(DELAY_US)))
    with TritonServer(repo) as srv:
        yield srv


@pytest.fixture
async def metrics() -> AsyncIterator[MetricsServer]:
    """Serve the exposition of ``ranker`` stuck in its batcher."""
    server = await MetricsServer(render=BatchingTriton().render).start()
    try:
        yield server
    finally:
        await server.stop()


def config(tmp_path: Path, metrics: MetricsServer, triton: TritonServer) -> Path:
    """Write the daemon's config: scrape the synthetic metrics, act on the real Triton."""
    books = tmp_path / "books"
    books.mkdir()
    (books / "lower.yaml").write_text(PLAYBOOK)
    doc = {
        "targets": [
            {
                "name": "ranker-0",
                "metrics_url": metrics.url,
                "triton_url": triton.http_url,
                "namespace": "search",
                "pod": "ranker-0",
            }
        ],
        "scrape_interval_s": 0.25,
        "scrape_timeout_s": 0.25,
        "scrape_jitter_s": 0.0,
        "evaluation_interval_s": 0.25,
        "listen": f"127.0.0.1:{free_port()}",
        "shutdown_grace_s": 1.0,
        "playbook_dirs": [str(books)],
        "audit_db_path": str(tmp_path / "audit.sqlite3"),
        "dry_run": False,
        "log_level": "warning",
        "thresholds": {
            "rate_window_s": 1.5,
            "stale_after_min_s": 2.0,
            "hold_s": 0.5,
            "resolve_after_s": 1.0,
            "resolve_after_scrapes": 2.0,
        },
    }
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def start(cfg: Path, log: Path) -> subprocess.Popen[bytes]:
    """Start ``tritonguard run`` as its own process."""
    with log.open("ab") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "tritonguard.cli.main", "run", "--config", str(cfg)],
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )


def trail(db: Path) -> list[tuple[str, str]]:
    """Return action and status of every decision in the audit file."""
    if not db.exists():
        return []
    store = AuditStore(db)
    try:
        return [(r.action, r.status) for r in store.decisions()]
    finally:
        store.close()


def pending(db: Path) -> int:
    """Return how many verifications the audit file holds without a verdict."""
    store = AuditStore(db)
    try:
        return len(store.pending_verifications())
    finally:
        store.close()


async def until(what: str, check: Callable[[], object], timeout_s: float) -> None:
    """Poll ``check`` until it is truthy."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check():
            return
        await asyncio.sleep(0.2)
    raise AssertionError(f"{what}: not within {timeout_s:.0f}s")


async def delay(triton: TritonServer) -> int:
    """Return the live max_queue_delay_microseconds of ``ranker``."""
    async with TritonClient(triton.http_url) as client:
        config = await client.model_config("ranker")
    return int(config["dynamic_batching"]["max_queue_delay_microseconds"])


@pytest.mark.parametrize("how", [signal.SIGTERM, signal.SIGKILL])
async def test_the_restarted_daemon_judges_the_verification_and_rolls_the_fix_back(
    tmp_path: Path, metrics: MetricsServer, server: TritonServer, how: signal.Signals
) -> None:
    """Stopped (SIGTERM) or killed (SIGKILL) while verifying, nothing is lost.

    The first daemon lowers the delay on the real Triton and starts its 15 s verify wait. It
    is signalled mid-wait: a stop records the verify step as cancelled, a kill records
    nothing more. The next daemon on the same audit file does not repeat the change (cooldown),
    judges the verification when due, finds the queue still there, and puts the previous
    config back on the server.
    """
    async with TritonClient(server.http_url) as client:
        cfg_now = await client.model_config("ranker")
        cfg_now["dynamic_batching"]["max_queue_delay_microseconds"] = DELAY_US
        await client.load("ranker", cfg_now)
    cfg = config(tmp_path, metrics, server)
    db = tmp_path / "audit.sqlite3"
    log = tmp_path / "daemon.log"
    first = start(cfg, log)
    try:
        await until("update_config ran", lambda: ("triton.update_config", "ran") in trail(db), 60)
        await until("verify pending", lambda: pending(db) == 1, 10)
        assert await delay(server) == 500
        first.send_signal(how)
        first.wait(timeout=15)
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()
    stopped = trail(db)
    if how == signal.SIGTERM:
        assert stopped == [("triton.update_config", "ran"), ("verify", "cancelled")], stopped
    else:
        assert stopped == [("triton.update_config", "ran")], stopped
    assert pending(db) == 1
    assert await delay(server) == 500  # still changed: nothing has judged it yet

    second = start(cfg, log)
    try:
        await until("rolled back", lambda: ("triton.load", "rolled_back") in trail(db), 60)
    finally:
        second.send_signal(signal.SIGTERM)
        second.wait(timeout=15)
    after = trail(db)[len(stopped) :]
    assert ("verify", "failed") in after
    assert ("triton.update_config", "ran") not in after  # the change was not made again
    assert pending(db) == 0
    assert await delay(server) == DELAY_US, log.read_text()[-3000:]
