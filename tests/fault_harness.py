"""What the fault tests share: fast thresholds, a dry-run playbook, waiting, reading the daemon."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import aiohttp

from tritonguard.core.thresholds import Thresholds
from tritonguard.runtime.daemon_app import DaemonApp

# Short windows so an incident opens within seconds and data is stale 2 s after it stops.
FAST = Thresholds(
    rate_window_s=1.5,
    stale_after_min_s=2.0,
    hold_s=0.5,
    resolve_after_s=1.0,
    resolve_after_scrapes=2.0,
)
# held_for gives a failing source time to go stale after the incident opened, so the guard
# that stops the playbook is seen doing it.
TELL = """
name: tell-on-call
when: {causes: [batching_delay], held_for: 5s}
guards: {cooldown: 1h}
steps:
  - action: slack.post
    params: {text: "{{ pod }} waits in the batcher"}
"""
STALE_REASON = "no fresh data for the subject; never act on stale data"


async def until(
    predicate: Callable[[], bool], timeout_s: float, state: Callable[[], object] = lambda: ""
) -> None:
    """Poll ``predicate`` until it holds (generous bounds: the machine may be busy).

    On a timeout the error shows ``state()``, what the test was waiting on.
    """
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"condition not met within {timeout_s}s: {state()}")


@asynccontextmanager
async def running(app: DaemonApp) -> AsyncIterator[str]:
    """Run the daemon in a task; yield its base URL; stop it and require a clean exit."""
    task = asyncio.create_task(app.run(install_signals=False))
    try:
        await until(lambda: app.http is not None and app.http.port != 0, 10.0)
        assert app.http is not None
        yield f"http://127.0.0.1:{app.http.port}"
    finally:
        if not task.done():
            app.request_stop("test finished")
        await asyncio.wait_for(task, timeout=15)


async def readiness(base: str) -> tuple[int, dict[str, Any]]:
    """Return /readyz's status and body."""
    async with aiohttp.ClientSession() as http, http.get(f"{base}/readyz") as resp:
        return resp.status, await resp.json()


async def metrics(base: str) -> str:
    """Return the daemon's own /metrics text."""
    async with aiohttp.ClientSession() as http, http.get(f"{base}/metrics") as resp:
        return await resp.text()


def sample_value(text: str, series: str) -> float:
    """Return one sample's value from an exposition (0 when absent)."""
    for line in text.splitlines():
        if line.startswith(series + " "):
            return float(line.rsplit(" ", 1)[1])
    return 0.0
