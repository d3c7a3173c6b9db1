"""A deploy through a real Triton's repository API is read when latency shifts, not minutes later.

The daemon reads every config every ``model_config_refresh_s`` (five minutes here, as
shipped). A real Triton under real load gets a new config through its repository API (the
batcher's delay 500 us -> 150 ms): its counters keep running, so nothing in the metrics
asks for a read. The latency the new delay adds does: the engine lists the subject
(``Engine.configs_wanted``) and the daemon's config loop reads it from the same Triton.
No incident may open (the bar is above any confidence), so neither the reads at an
incident's opening nor the refresh that follows one can be what read it.

A second target's repository API stalls (behind a proxy that holds each config request past
the client's timeout, ten models of it), and a refresh of every model is under way when the
deploy lands: on a fleet a refresh takes minutes, and the shift's read must not wait for it.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from pathlib import Path

import pytest

from tests import waiting
from tests.fault_servers import FaultProxy, ForwardLate
from tests.fixtures_prometheus import MetricsServer

# The rollout test's model (6 ms + 0.4 ms an item behind a 0.5 ms batcher delay), its input
# and the delay its deploy raises.
from tests.integration.test_rollout_end_to_end import MODEL, RAISED_US, SHAPE, SPEC
from tritonguard.clients.triton_api import TritonClient
from tritonguard.core.engine import Engine, EngineConfig
from tritonguard.core.findings import IncidentEvent
from tritonguard.core.thresholds import Thresholds
from tritonguard.lab.loadgen import LoadGenerator, LoadSpec, Segment
from tritonguard.lab.repository import write_model
from tritonguard.lab.triton_server import TritonServer
from tritonguard.runtime.daemon_app import DaemonApp
from tritonguard.settings import Settings, TargetSettings

pytestmark = pytest.mark.live

KEY = ("ml", "ranker-0", MODEL)
FAST = Thresholds(
    # 10/s in a 4 s window: forty requests a reading, none of them a batch that fills.
    rate_window_s=4.0,
    stale_after_min_s=2.0,
    hold_s=0.5,
    baseline_min_span_s=4.0,
    # Above any confidence (they stop at 0.97): nothing opens, so no opening's read runs.
    open_confidence=0.98,
)


def _stalled_exposition() -> str:
    """Ten models of a second Triton, idle: each needs a config read at every refresh."""
    lines = ["# TYPE nv_inference_request_success counter"]
    lines += [
        f'nv_inference_request_success{{model="embedder-{i}",version="1"}} 0' for i in range(10)
    ]
    return "\n".join(lines) + "\n"


async def test_a_deploy_between_periodic_reads_is_read_when_latency_shifts(tmp_path: Path) -> None:
    """The raised delay is known within seconds of the shift, with the refresh five minutes off.

    And while a refresh of every model is stuck on a stalled Triton (5 s a model, ten models).
    """
    write_model(tmp_path / "repo", SPEC)
    settings = Settings(
        scrape_interval_s=0.5,
        scrape_timeout_s=0.5,
        scrape_jitter_s=0.0,
        evaluation_interval_s=0.5,
        listen="127.0.0.1:0",
        shutdown_grace_s=5.0,
        thresholds=FAST,
        model_config_refresh_s=300.0,
    )
    opened: list[IncidentEvent] = []

    async def on_events(events: list[IncidentEvent]) -> None:
        opened.extend(e for e in events if e.event == "opened")

    stalled_metrics = await MetricsServer(render=_stalled_exposition).start()
    async with TritonServer(tmp_path / "repo") as triton, FaultProxy(triton.http_url) as stalled:
        stalled.add("GET", r"/v2/models/embedder-\d+/config", ForwardLate(8.0), times=1000)
        targets = [
            TargetSettings(
                name="t0",
                metrics_url=triton.metrics_url,
                triton_url=triton.http_url,
                namespace="ml",
                pod="ranker-0",
            ),
            TargetSettings(
                name="stalled",
                metrics_url=stalled_metrics.url,
                triton_url=stalled.url,
                namespace="ml",
                pod="embedder-0",
            ),
        ]
        engine = Engine(EngineConfig(thresholds=FAST))
        app = DaemonApp(
            settings.model_copy(update={"targets": targets}), engine=engine, on_events=on_events
        )
        reads: list[tuple[float, object]] = []
        fetch = app._config_fetcher

        async def counted(t: TargetSettings, model: str) -> object:
            config = await fetch(t, model)
            if t.name == "t0":
                reads.append((time.monotonic(), config))
            return config

        app._config_fetcher = counted  # type: ignore[assignment]  # the daemon's own, counted
        spec = LoadSpec(
            model=MODEL, shape=SHAPE, schedule=(Segment(0, 10.0),), duration_s=90.0, seed=5
        )
        load = asyncio.create_task(LoadGenerator(triton.http_url).run(spec))
        task = asyncio.create_task(app.run(install_signals=False))
        try:
            await waiting.wait_for(
                lambda: engine.model_config(KEY) is not None, 20, what="the first config read"
            )
            await waiting.wait_for(
                lambda: (
                    (seen := engine.last_diagnoses.get(KEY)) is not None
                    and seen.baseline is not None
                ),
                30,
                what="a healthy baseline",
            )
            # A refresh of every model now: it stalls on the second Triton's ten models.
            app.refresh_model_configs()
            await waiting.wait_for(
                lambda: len(stalled.faulted()) > 0, 10, what="the refresh reaching the stall"
            )
            first_reads = len(reads)
            async with TritonClient(triton.http_url) as client:
                config = await client.model_config(MODEL)
                config["dynamic_batching"]["max_queue_delay_microseconds"] = str(RAISED_US)
                await client.load(MODEL, config)
            deployed = time.monotonic()

            def raised() -> bool:
                known = engine.model_config(KEY)
                return known is not None and known.max_queue_delay_us == RAISED_US

            await waiting.wait_for(raised, 30, what="the raised delay read on the shift")
            read_after_s = time.monotonic() - deployed
            print(f"the new config was read {read_after_s:.1f} s after the deploy")
            assert read_after_s < 20
            assert opened == []
            # One read of the new config: the shift's, not a refresh of every model (stalled
            # throughout). A noisy scrape before the deploy may have asked too, as a symptom
            # that begins before a deploy does, and read the old delay.
            delays = [
                int(c["dynamic_batching"]["max_queue_delay_microseconds"])
                for _, c in reads[first_reads:]
                if isinstance(c, dict)
            ]
            assert delays.count(RAISED_US) == 1, delays
        finally:
            load.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await load
            app.request_stop("test finished")
            await asyncio.wait_for(task, timeout=15)
            await stalled_metrics.stop()
