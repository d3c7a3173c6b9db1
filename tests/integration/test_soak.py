"""A soak: thousands of evaluations over churning pods, through the real engine and stage.

Pods come and go (each lives five minutes: healthy, stuck in its batcher, healthy again),
so incidents open and resolve all the time and the shipped playbooks are planned for them
in dry-run. After a warm-up longer than every window the engine keeps (retention, baseline
lookback), what the process holds must stay flat: Python's live memory blocks and the RSS,
the asyncio tasks, and the engine's own tables.
"""

from __future__ import annotations

import asyncio
import gc
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from tritonguard.core.engine import Engine, EngineConfig
from tritonguard.core.guards import GuardSettings
from tritonguard.core.samples import Labels, Sample, make_labels
from tritonguard.runtime.audit_store import AuditStore
from tritonguard.runtime.playbook_executor import ExecutorEnv, PlaybookExecutor
from tritonguard.runtime.playbook_files import SHIPPED_PLAYBOOKS, load_playbook_files
from tritonguard.runtime.playbook_stage import PlaybookStage

INTERVAL_S = 5.0
LIFE_TICKS = 60  # five minutes: healthy, stuck, healthy, a third each
CHURNING, STEADY, MODELS = 6, 2, 3
# Well past the longest window the engine keeps anything for (retention, 900 s): 4000 s.
WARM_UP_TICKS = 800
TICKS = 2400
CHECK_EVERY = 400
# The run is deterministic, so live blocks repeat closely (within a few dozen here); a
# leak of one object every other tick would exceed this by the end.
BLOCKS_SLACK = 600


@dataclass
class Pod:
    """One Triton pod's counters, advanced by one scrape interval per tick."""

    name: str
    born: int
    life: int  # 0: lives for ever
    labels: Labels = ()
    served: float = 0.0
    queued_us: float = 0.0

    def __post_init__(self) -> None:
        model = f"m{int(self.name.rsplit('-', 1)[1]) % MODELS}"
        self.labels = make_labels(
            {
                "model": model,
                "version": "1",
                "namespace": "prod",
                "pod": self.name,
                "instance": f"{self.name}:8002",
            }
        )

    def stuck(self, tick: int) -> bool:
        """Whether the pod's requests wait in the batcher at ``tick`` (its middle third)."""
        age = tick - self.born
        return self.life > 0 and self.life // 3 <= age < 2 * self.life // 3

    def scrape(self, tick: int, at: float) -> list[Sample]:
        """Return the pod's samples at ``tick``: 20 req/s, 90 ms queued while stuck."""
        requests = 20.0 * INTERVAL_S
        self.served += requests
        self.queued_us += requests * (90_000.0 if self.stuck(tick) else 500.0)
        n = 10_000 + self.served
        values = {
            "nv_inference_request_success": n,
            "nv_inference_count": n,
            "nv_inference_exec_count": n,
            "nv_inference_queue_duration_us": 5e6 + self.queued_us,
            "nv_inference_compute_input_duration_us": n * 50.0,
            "nv_inference_compute_infer_duration_us": n * 5_000.0,
            "nv_inference_compute_output_duration_us": n * 20.0,
        }
        values["nv_inference_request_duration_us"] = (
            values["nv_inference_queue_duration_us"] + n * 5_070.0
        )
        values["nv_inference_pending_request_count"] = 0.0
        return [Sample(name, self.labels, value, at) for name, value in values.items()]


@dataclass
class Fleet:
    """The pods alive now; every pod that reaches the end of its life is replaced."""

    pods: dict[str, Pod] = field(default_factory=dict)
    born: int = 0

    def __post_init__(self) -> None:
        for i in range(STEADY):
            self._add(0, life=0, name=f"steady-{i}")
        for i in range(CHURNING):
            # Staggered, so a pod comes and one goes every LIFE_TICKS / CHURNING ticks.
            self._add(-i * (LIFE_TICKS // CHURNING), life=LIFE_TICKS)

    def _add(self, tick: int, *, life: int, name: str = "") -> None:
        name = name or f"triton-{self.born}"
        self.born += 1
        self.pods[name] = Pod(name, tick, life)

    def churn(self, tick: int) -> None:
        """Retire pods at the end of their life and start their replacements."""
        for name, pod in list(self.pods.items()):
            if pod.life and tick - pod.born >= pod.life:
                del self.pods[name]
                self._add(tick, life=LIFE_TICKS)

    def scrape(self, tick: int, at: float) -> list[Sample]:
        """Return every live pod's samples."""
        return [s for pod in self.pods.values() for s in pod.scrape(tick, at)]


@dataclass(frozen=True)
class Reading:
    """What the process and the engine held at one checkpoint."""

    tick: int
    blocks: int
    rss: int
    tasks: int
    series: int
    subjects: int
    baselines: int


def rss_bytes() -> int:
    """Return this process's resident set size."""
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * 4096


def reading(tick: int, engine: Engine) -> Reading:
    """Measure after a full collection, so only what is still referenced counts."""
    gc.collect()
    return Reading(
        tick=tick,
        blocks=sys.getallocatedblocks(),
        rss=rss_bytes(),
        tasks=len(asyncio.all_tasks()),
        series=len(engine.store),
        subjects=len(engine.last_diagnoses),
        baselines=engine.history.approx_bytes,
    )


async def test_thousands_of_ticks_with_pod_churn_keep_memory_and_tasks_flat(
    tmp_path: Path,
) -> None:
    """2400 evaluations (3.3 h of 5 s scrapes) with a pod born and one retired every 50 s.

    Incidents open and resolve throughout; the shipped playbooks are planned in dry-run or
    held back by their cooldowns. From the end of the warm-up on, Python's live memory
    blocks stay within a few hundred of their level then (and RSS within 16 MiB), no asyncio
    task outlives its step, and the engine's series, subjects and baselines keep their
    size: departed pods are forgotten, not accumulated.
    """
    engine = Engine(EngineConfig())
    clock = [1_700_000_000.0]
    store = AuditStore(tmp_path / "audit.sqlite3")
    stage = PlaybookStage(
        load_playbook_files([SHIPPED_PLAYBOOKS]),
        PlaybookExecutor(store, ExecutorEnv(features=engine, clock=lambda: clock[0])),
        settings=GuardSettings(dry_run=True, action_budget_per_hour=10_000),
        open_incidents=engine.announced_incidents,
    )
    fleet = Fleet()
    tasks_before = len(asyncio.all_tasks())
    readings: list[Reading] = []
    started = time.monotonic()
    try:
        for tick in range(TICKS + 1):
            clock[0] += INTERVAL_S
            fleet.churn(tick)
            engine.ingest(fleet.scrape(tick, clock[0]), clock[0])
            await stage.run_step(engine.evaluate(clock[0]), clock[0])
            if tick >= WARM_UP_TICKS and tick % CHECK_EVERY == 0:
                readings.append(reading(tick, engine))
        decided = [(d.status, d.guard) for d in store.decisions(limit=100_000)]
    finally:
        store.close()
    took = time.monotonic() - started

    first, *later = readings
    assert len(later) >= 3, readings
    planned = sum(1 for status, _ in decided if status == "planned")
    skipped = sum(1 for status, _ in decided if status == "skipped")
    # The stage must work: plans, and guards (cooldowns, reload cooldowns) holding them back.
    assert planned >= 10 and skipped >= 100, (planned, skipped)
    for r in later:
        assert r.tasks == tasks_before, r
        assert r.blocks <= first.blocks + BLOCKS_SLACK, (first, r)
        assert r.rss <= first.rss + 16 * 2**20, (first, r)
        assert r.series <= first.series * 1.1 + 10, (first, r)
        assert r.subjects <= first.subjects + 2, (first, r)
        assert r.baselines <= first.baselines * 1.1 + 4096, (first, r)
    assert stage.in_flight() == [] and stage.busy() == frozenset()
    assert not stage.executor.verifying
    print(f"soak: {TICKS} ticks in {took:.1f}s; {planned} planned, {skipped} skipped; {readings}")
