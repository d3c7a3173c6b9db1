"""A real daemon killed while its Triton load call is in flight, then started again.

The daemon scrapes a synthetic Triton stuck in its batcher and acts on a real tritonserver,
reached through a transparent proxy that counts the load requests. The model's new config
hangs in initialize(), so the load call is still open when the daemon gets SIGKILL (or
SIGTERM, whose grace runs out). The step wrote its undo (the previous config) to the audit
file before the call, as an intent. What holds: the audit file is intact, the run is there,
the restarted daemon finds the intent without an outcome and loads the previous config again
(Triton queues it behind the stuck load), and it never sends the change again (the cooldown
holds). When the stuck load finishes, the restore replaces it: the server ends where it was.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml

from tests.fault_servers import FaultProxy
from tests.fixtures_prometheus import MetricsServer
from tests.stalling_repo import install, load_started
from tests.synthetic_triton import BatchingTriton
from tritonguard.clients.triton_api import TritonClient
from tritonguard.core.guards import RunRecord
from tritonguard.lab.repository import DynamicBatching, ModelSpec
from tritonguard.lab.triton_server import TritonServer, free_port
from tritonguard.runtime.audit_store import AuditStore

pytestmark = pytest.mark.live

DELAY_US = 100_000
PLAYBOOK = """
name: lower-delay
when: {causes: [batching_delay]}
guards: {dry_run: false, cooldown: 1h}
steps:
  - action: triton.update_config
    params:
      model: ranker
      set: {dynamic_batching.max_queue_delay_microseconds: 500}
      ready_timeout: 120s
"""


@dataclass
class Outcome:
    """What the audit file and the server showed at each point of the scenario."""

    signal: str
    trail_after_stop: list[tuple[str, str]] = field(default_factory=list)
    reasons_after_stop: list[str] = field(default_factory=list)
    runs_after_stop: list[RunRecord] = field(default_factory=list)
    trail_after_restart: list[tuple[str, str, str]] = field(default_factory=list)
    loads_while_stuck: int = 0
    delay_during_stall: int = 0
    final_delay: int = 0
    final_loads: int = 0
    final_trail: list[tuple[str, str]] = field(default_factory=list)
    restores: list[tuple[str, str, str]] = field(default_factory=list)
    restarted_steps: list[tuple[str, str]] = field(default_factory=list)
    pending_undos: int = 0
    pending_intents: int = 0


@pytest.fixture(scope="module")
def triton(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[TritonServer, Path]]:
    """Yield a real Triton serving ``ranker`` (100 ms batcher delay) and its stall file."""
    repo = tmp_path_factory.mktemp("repo")
    stall = tmp_path_factory.mktemp("stall") / "stall-ranker"
    install(repo, ModelSpec(name="ranker", dynamic_batching=DynamicBatching(DELAY_US)), stall)
    with TritonServer(repo) as server:
        yield server, stall


def write_config(tmp_path: Path, metrics_url: str, triton_url: str) -> Path:
    """Write the daemon's config: scrape the synthetic metrics, act through the proxy."""
    books = tmp_path / "books"
    books.mkdir()
    (books / "lower.yaml").write_text(PLAYBOOK)
    doc = {
        "targets": [
            {
                "name": "ranker-0",
                "metrics_url": metrics_url,
                "triton_url": triton_url,
                "namespace": "search",
                "pod": "ranker-0",
            }
        ],
        "scrape_interval_s": 0.25,
        "scrape_timeout_s": 0.25,
        "scrape_jitter_s": 0.0,
        "evaluation_interval_s": 0.25,
        "listen": f"127.0.0.1:{free_port()}",
        "shutdown_grace_s": 2.0,
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


def stop(proc: subprocess.Popen[bytes], how: signal.Signals) -> None:
    """Signal the daemon and wait for it to exit (kill it if it lingers)."""
    if proc.poll() is None:
        proc.send_signal(how)
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def audit(db: Path) -> AuditStore | None:
    """Open the audit file (None while it does not exist yet)."""
    return AuditStore(db) if db.exists() else None


def trail(db: Path) -> list[tuple[str, str, str]]:
    """Return (action, status, guard) of every decision in the audit file."""
    store = audit(db)
    if store is None:
        return []
    try:
        return [(r.action, r.status, r.guard) for r in store.decisions()]
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


async def delay(url: str) -> int:
    """Return the live max_queue_delay_microseconds of ``ranker``."""
    async with TritonClient(url) as client:
        config = await client.model_config("ranker")
    return int(config["dynamic_batching"]["max_queue_delay_microseconds"])


async def settled_delay(url: str, timeout_s: float = 60.0) -> int:
    """Return the delay once it has held still for two seconds."""
    deadline = time.monotonic() + timeout_s
    last, since = await delay(url), time.monotonic()
    while time.monotonic() < deadline:
        await asyncio.sleep(0.5)
        now = await delay(url)
        if now != last:
            last, since = now, time.monotonic()
        elif time.monotonic() - since >= 2.0:
            return now
    raise AssertionError(f"ranker's config did not settle within {timeout_s:.0f}s")


async def scenario(
    tmp_path: Path, server: TritonServer, stall: Path, how: signal.Signals
) -> Outcome:
    """Kill (or stop) the daemon mid-load, restart it, let the load finish; record each step."""
    out = Outcome(signal=how.name)
    async with TritonClient(server.http_url) as client:
        config = await client.model_config("ranker")
        config["dynamic_batching"]["max_queue_delay_microseconds"] = DELAY_US
        await client.load("ranker", config)
    for marker in stall.parent.glob(f"{stall.name}.started-*"):
        marker.unlink()
    metrics = await MetricsServer(render=BatchingTriton().render).start()
    db, log = tmp_path / "audit.sqlite3", tmp_path / "daemon.log"
    try:
        async with FaultProxy(server.http_url) as proxy:

            def loads() -> int:
                return sum(1 for s in proxy.seen if s.path.endswith("/ranker/load"))

            cfg = write_config(tmp_path, metrics.url, proxy.url)
            # Blocking calls go to a thread: this loop serves the proxy and the metrics.
            await asyncio.to_thread(stall.touch)
            try:
                first = start(cfg, log)
                try:
                    await until("the load hangs in initialize()", lambda: load_started(stall), 60)
                    await until("the proxy forwarded the load", lambda: loads() == 1, 10)
                finally:
                    await asyncio.to_thread(stop, first, how)
                store = AuditStore(db)
                try:
                    out.trail_after_stop = [(r.action, r.status) for r in store.decisions()]
                    out.reasons_after_stop = [r.reason for r in store.decisions()]
                    out.runs_after_stop = store.history(0.0)
                finally:
                    store.close()
                second = start(cfg, log)
                try:
                    seen = len(out.trail_after_stop)

                    def held_back() -> bool:
                        # Busy while its restore waits behind the stuck load, then cooldown.
                        return any(s == "skipped" for _, s, _ in trail(db)[seen:])

                    await until("the restarted daemon is held back", held_back, 60)
                    await until("the restore reached Triton", lambda: loads() == 2, 30)
                    out.trail_after_restart = trail(db)[seen:]
                    out.loads_while_stuck = loads()
                    out.delay_during_stall = await delay(server.http_url)
                    await asyncio.to_thread(stall.unlink)

                    def restored() -> bool:
                        return ("triton.load", "rolled_back", "") in trail(db)[seen:]

                    await until("the restore finished", restored, 60)
                    out.final_delay = await settled_delay(server.http_url)

                    def cooled() -> bool:
                        return ("*", "skipped", "cooldown") in trail(db)[seen:]

                    # Once the restore is done the subject is no longer busy: the incident,
                    # still open, meets the cooldown of the run that was interrupted.
                    await until("the cooldown holds after the restore", cooled, 30)
                    await asyncio.sleep(2.0)  # give the restarted daemon its chance to react
                    out.final_loads = loads()
                finally:
                    await asyncio.to_thread(stop, second, signal.SIGTERM)
            finally:
                await asyncio.to_thread(stall.unlink, missing_ok=True)
    finally:
        await metrics.stop()
    store = AuditStore(db)
    try:
        decisions = store.decisions()
        out.final_trail = [(r.action, r.status) for r in decisions]
        out.restores = [(r.action, r.phase, r.reason) for r in decisions if r.phase != "step"]
        after_restart = decisions[len(out.trail_after_stop) :]
        out.restarted_steps = [
            (r.action, r.status) for r in after_restart if r.phase == "step" and r.action != "*"
        ]
        out.pending_undos = sum(len(store.pending_undos(i)) for i in _incidents(store))
        out.pending_intents = len(store.pending_intents())
    finally:
        store.close()
    return out


def _incidents(store: AuditStore) -> list[str]:
    return [str(i["incident_id"]) for i in store.incidents()]


@pytest.fixture(scope="module", params=[signal.SIGKILL, signal.SIGTERM], ids=["SIGKILL", "SIGTERM"])
def outcome(
    request: pytest.FixtureRequest,
    triton: tuple[TritonServer, Path],
    tmp_path_factory: pytest.TempPathFactory,
) -> Outcome:
    """Run the scenario once per signal; the tests read what it saw."""
    server, stall = triton
    how: signal.Signals = request.param
    return asyncio.run(scenario(tmp_path_factory.mktemp(how.name), server, stall, how))


def test_the_trail_survives_the_stop_and_the_restart_does_not_reload_again(
    outcome: Outcome,
) -> None:
    """Killed or stopped mid-load: the run is on file and the change is never sent twice.

    A kill leaves no decision for the step (its record is written when the call returns);
    a stop whose grace runs out records the step as cancelled, outcome unknown, the previous
    state to be put back. Either way the run was written before the call, so the restarted
    daemon, seeing the incident again, is held back (busy while it restores, then by the
    cooldown): Triton gets the change once and the restore once, and nothing after that.
    """
    runs = [r for r in outcome.runs_after_stop if r.playbook == "lower-delay"]
    assert len(runs) == 1 and not runs[0].dry_run and runs[0].reload
    if outcome.signal == "SIGKILL":
        assert outcome.trail_after_stop == []
    else:
        assert outcome.trail_after_stop == [("triton.update_config", "cancelled")]
        assert "its outcome on the server is unknown" in outcome.reasons_after_stop[0]
        assert "puts back the state from before it" in outcome.reasons_after_stop[0]
    assert outcome.trail_after_restart
    assert all(status == "skipped" for _, status, _ in outcome.trail_after_restart)
    # The change, then the restore queued behind it; the restarted daemon never re-sends it.
    assert outcome.loads_while_stuck == 2
    assert outcome.final_loads == 2
    assert outcome.restarted_steps == []
    # While the load hangs, Triton still serves the previous config.
    assert outcome.delay_during_stall == DELAY_US


def test_the_restart_accounts_for_the_reload_that_was_in_flight(outcome: Outcome) -> None:
    """The change that lands after the daemon died is put back by the restarted daemon.

    The step's intent (the previous config) was on file before the load; the restarted
    daemon loads it again, recorded in one line as a rollback saying why, and the server ends
    at the previous config once the stuck load has finished. No intent or undo is left over.
    """
    assert outcome.final_delay == DELAY_US, (
        f"{outcome.signal}: the server ended at {outcome.final_delay} us with "
        f"{outcome.pending_undos} undos; trail {outcome.final_trail}"
    )
    [(action, phase, reason)] = outcome.restores
    assert (action, phase) == ("triton.load", "rollback")
    assert "triton.update_config was in flight when the daemon stopped" in reason
    assert "the change is not repeated" in reason and "\n" not in reason
    assert outcome.pending_intents == 0 and outcome.pending_undos == 0
