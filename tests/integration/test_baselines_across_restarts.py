"""A daemon restarted just before a fault diagnoses it as if it had never stopped."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest

from tests.fixtures_prometheus import MetricsServer
from tests.integration.test_daemon_playbooks import (
    FAST,
    daemon,
    metrics,
    running,
    settings,
    wait_for,
)
from tests.synthetic_triton import BatchingTriton
from tritonguard.core.engine import Engine
from tritonguard.core.replay import drive
from tritonguard.core.samples import Sample
from tritonguard.runtime.baseline_keeper import BaselineKeeper, baselines_path
from tritonguard.sources.replay import load_trace

__all__ = ["metrics"]  # the fixture, used by name

TRACES = Path(__file__).resolve().parents[1] / "fixtures" / "traces_v2" / "tuning"
# The restart happens this long before onset: too short for a baseline of its own (the
# gap and the minimum span alone are longer), as a rollout of the daemon would leave it.
RESTART_BEFORE_ONSET_S = 15.0


def _first_opened(engine: Engine, samples: list[Sample], onset: float) -> tuple[str, int] | None:
    for t, events in drive(engine, samples):
        for e in events:
            if e.event == "opened":
                return e.cause, round(t - onset)
    return None


@pytest.mark.parametrize("name", ["memory_copy_vision_t", "too_many_instances_tiny_t"])
def test_a_restart_before_onset_keeps_the_diagnosis(name: str, tmp_path: Path) -> None:
    """Saved baselines make the restarted engine open the same cause at the same second.

    The first engine sees the healthy part and saves at the restart; the second takes the
    file back and sees only the rest, through the same file code the daemon runs. Without
    the saved baselines the second engine has no reference: on these two traces it names
    another cause (too_few_instances) or stays silent.
    """
    labels = json.loads((TRACES / f"{name}.labels.json").read_text())
    onset = float(labels["onset"])
    samples = list(load_trace(TRACES / f"{name}.om.gz"))
    restart = onset - RESTART_BEFORE_ONSET_S
    before = [s for s in samples if s.timestamp is not None and s.timestamp < restart]
    after = [s for s in samples if s.timestamp is not None and s.timestamp >= restart]

    uninterrupted = _first_opened(Engine(), samples, onset)
    assert uninterrupted is not None and uninterrupted[0] == labels["cause"]

    path = baselines_path(tmp_path / "audit.sqlite")
    first = Engine()
    for _ in drive(first, before):
        pass
    asyncio.run(BaselineKeeper(first, path, clock=lambda: restart).save())

    second = Engine()
    assert BaselineKeeper(second, path, clock=lambda: restart).restore() == 1
    assert _first_opened(second, after, onset) == uninterrupted


async def test_the_daemon_saves_its_baselines_at_stop_and_the_next_start_takes_them(
    tmp_path: Path, metrics: tuple[BatchingTriton, MetricsServer]
) -> None:
    """A stopped daemon leaves its baselines in the state volume; the next one starts with them.

    The daemon scrapes a healthy model until it has a baseline, stops (the save a SIGTERM
    makes), and a new daemon on the same audit path has the subject's baseline as carried
    from its first moment, before it scraped anything.
    """
    model, server = metrics
    model.healthy = True
    fast = FAST.model_copy(update={"baseline_min_span_s": 1.0})
    s = settings(tmp_path, server, thresholds=fast)
    app, _ = daemon(s)
    async with running(app):
        await wait_for(lambda: app.engine.export_baselines(time.time()) != [], 20.0)
    saved = baselines_path(s.audit_db_path)
    assert saved.exists()

    again, _ = daemon(s)
    key = ("search", "ranker-0", "ranker")
    async with running(again):
        # Read back in the baselines task, in a thread, as the daemon starts.
        await wait_for(lambda: again.engine.history.carried(key, time.time()) is not None, 10.0)
        carried = again.engine.history.carried(key, time.time())
    assert carried is not None and carried.source == "carried"
    assert carried.get("queue_share") is not None
