"""The daemon's source loop exports how long each tick took, overruns, and how late ticks start."""

from __future__ import annotations

import asyncio

from prometheus_client import CollectorRegistry

from tritonguard.runtime.daemon_app import DaemonApp
from tritonguard.settings import Settings
from tritonguard.sources.source_status import PollResult


class _Source:
    """A source whose poll takes ``delay_s``, against an interval of ``interval_s``."""

    name = "scrape"

    def __init__(self, *, interval_s: float, delay_s: float, ticks: int) -> None:
        self.interval_s = interval_s
        self.delay_s = delay_s
        self.polls = 0
        self.ticks = ticks
        self.done = asyncio.Event()

    async def poll(self) -> PollResult:
        self.polls += 1
        if self.polls > self.ticks:
            self.done.set()
        await asyncio.sleep(self.delay_s)
        return PollResult()

    async def close(self) -> None:
        return None


async def _ticks(source: _Source) -> CollectorRegistry:
    """Run the daemon's loop for ``source`` for its ticks; return the metrics."""
    registry = CollectorRegistry()
    app = DaemonApp(Settings(targets=[], listen="127.0.0.1:0"), sources=[source], registry=registry)
    loop = asyncio.create_task(app._source_loop(source))
    try:
        await asyncio.wait_for(source.done.wait(), timeout=10.0)
    finally:
        app.supervisor.stopping.set()
        await loop
    return registry


def _value(registry: CollectorRegistry, name: str) -> float:
    value = registry.get_sample_value(name, {"source": "scrape"})
    assert value is not None, name
    return value


async def test_ticks_longer_than_the_interval_are_overruns_and_make_the_next_start_late() -> None:
    """A poll three times its interval counts an overrun each tick and shows as lag."""
    registry = await _ticks(_Source(interval_s=0.05, delay_s=0.15, ticks=3))
    assert _value(registry, "tritonguard_source_tick_overruns_total") >= 3
    assert _value(registry, "tritonguard_source_tick_duration_seconds_count") >= 3
    assert _value(registry, "tritonguard_source_tick_lag_seconds") >= 0.05


async def test_ticks_within_the_interval_are_on_time() -> None:
    """A quick poll is no overrun, and the lag stays near zero."""
    registry = await _ticks(_Source(interval_s=0.2, delay_s=0.0, ticks=2))
    assert _value(registry, "tritonguard_source_tick_overruns_total") == 0
    assert _value(registry, "tritonguard_source_tick_lag_seconds") < 0.15
