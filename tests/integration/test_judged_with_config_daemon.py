"""The daemon judges a shifting model once its config read is in, and never waits on a stalled API.

A synthetic Triton starts waiting 90 ms in its batcher. Its latency shift asks for a config
read (``Engine.configs_wanted``); the engine holds that scrape's judgment until the read is
in. The daemon then evaluates at once rather than at the next scrape, and a repository API
that never answers holds the judgment for ``CONFIG_WAIT_S`` at most.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from typing import Any

from tests import waiting
from tests.fixtures_prometheus import MetricsServer
from tests.integration.test_daemon_playbooks import FAST
from tests.synthetic_triton import BatchingTriton
from tritonguard.core.engine import CONFIG_WAIT_S, Engine, EngineConfig
from tritonguard.runtime.daemon_app import DaemonApp
from tritonguard.settings import Settings, TargetSettings

KEY = ("search", "ranker-0", "ranker")
SCRAPE_S = 2.0
CONFIG = {"max_batch_size": 8, "dynamic_batching": {"max_queue_delay_microseconds": 100_000}}


class Repository:
    """A repository API that answers the daemon's first read, then answers or stalls.

    At the shift's read it notes the time and the subject's diagnosis then, the judgment of
    the scrape before: the scrape that asked is judged once that diagnosis is replaced.
    """

    def __init__(self, engine: Engine, *, stall: bool) -> None:
        self.engine = engine
        self.stall = stall
        self.calls = 0
        self.asked: tuple[float, object] | None = None

    async def fetch(self, target: TargetSettings, model: str) -> Mapping[str, Any] | None:
        """Answer the start's read; answer or hang on the shift's."""
        self.calls += 1
        if self.calls == 2:
            self.asked = (time.monotonic(), self.engine.last_diagnoses.get(KEY))
            if self.stall:
                await asyncio.sleep(3600)
        return CONFIG


async def _ask_to_judgment(*, stall: bool) -> float:
    """Run the daemon on the waiting batcher; return seconds from the shift's ask to judgment."""
    model = BatchingTriton()
    server = await MetricsServer(render=model.render).start()
    settings = Settings(
        targets=[
            TargetSettings(
                name="t0",
                metrics_url=server.url,
                triton_url="http://127.0.0.1:9",
                namespace="search",
                pod="ranker-0",
            )
        ],
        scrape_interval_s=SCRAPE_S,
        scrape_timeout_s=1.0,
        scrape_jitter_s=0.0,
        # Only a scrape or a read wakes the evaluator within the test.
        evaluation_interval_s=30.0,
        evaluation_min_gap_s=0.1,
        listen="127.0.0.1:0",
        shutdown_grace_s=5.0,
        # A history seconds long: the SLO is the symptom's reference (90 ms against 25 ms).
        thresholds=FAST.model_copy(update={"rate_window_s": 2 * SCRAPE_S, "slo_mean_us": 25_000}),
    )
    engine = Engine(EngineConfig(thresholds=settings.thresholds))
    repo = Repository(engine, stall=stall)
    app = DaemonApp(settings, engine=engine, config_fetcher=repo.fetch)
    task = asyncio.create_task(app.run(install_signals=False))
    try:
        # Healthy past the window of the start's read, which would otherwise be in force.
        model.healthy = True
        await waiting.wait_for(lambda: KEY in engine.last_diagnoses, 15, what="a judgment")
        await asyncio.sleep(settings.thresholds.rate_window_s)
        model.healthy = False
        await waiting.wait_for(lambda: repo.asked, 30, what="the shift's read", poll_s=0.01)
        assert repo.asked is not None
        asked_at, before = repo.asked
        await waiting.wait_for(
            lambda: engine.last_diagnoses.get(KEY) is not before,
            10,
            what="the judgment",
            poll_s=0.01,
        )
        return time.monotonic() - asked_at
    finally:
        app.request_stop("test finished")
        await asyncio.wait_for(task, timeout=15)
        await server.stop()


async def test_the_shift_is_judged_as_soon_as_its_config_is_read() -> None:
    """The read's return wakes the evaluator: judged well before the next scrape (2 s)."""
    took = await _ask_to_judgment(stall=False)
    assert took < SCRAPE_S / 2, f"judged {took:.2f} s after the ask"


async def test_a_stalled_repository_api_holds_the_judgment_at_most_config_wait_s() -> None:
    """The read never comes back; the shift is judged at the first evaluation past the wait.

    That is the next scrape's (2 s): no later, whatever the API does.
    """
    took = await _ask_to_judgment(stall=True)
    assert CONFIG_WAIT_S <= took < SCRAPE_S + 1.0, f"judged {took:.2f} s after the ask"


async def test_every_scrape_wakes_the_evaluator() -> None:
    """Scrapes read straight into the store still wake it: the fast path needs every scrape.

    They hand on no samples, and the evaluator used to wake only every
    ``evaluation_interval_s`` (30 s here, 5 s by default: at a 2 s scrape one scrape in two
    or three was judged).
    """
    model = BatchingTriton()
    server = await MetricsServer(render=model.render).start()
    settings = Settings(
        targets=[TargetSettings(name="t0", metrics_url=server.url)],
        scrape_interval_s=0.5,
        scrape_timeout_s=0.5,
        scrape_jitter_s=0.0,
        evaluation_interval_s=30.0,
        evaluation_min_gap_s=0.1,
        listen="127.0.0.1:0",
        shutdown_grace_s=5.0,
    )
    app = DaemonApp(settings)
    task = asyncio.create_task(app.run(install_signals=False))
    try:
        await waiting.wait_for(lambda: app.engine.evaluations >= 1, 10, what="an evaluation")
        first = app.engine.evaluations
        await asyncio.sleep(3.0)
        # Six scrapes in 3 s; a loaded machine may merge two into one evaluation.
        assert app.engine.evaluations - first >= 4
    finally:
        app.request_stop("test finished")
        await asyncio.wait_for(task, timeout=15)
        await server.stop()
