"""The lab's cAdvisor emulation: CPU pressure from its process tree's run-queue waits."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from pathlib import Path

import pytest

from tritonguard.core.exposition import parse_exposition
from tritonguard.lab.exporters import LabExporters

WAITING = "container_pressure_cpu_waiting_seconds_total"


def _waiting(exporters: LabExporters) -> float:
    exp = parse_exposition(exporters.exposition(), source="lab")
    (value,) = [s.value for s in exp.samples if s.name == WAITING]
    return value


async def _share(tmp_path: Path, script: str, seconds: float = 1.5) -> float:
    """Return the waiting seconds a wall second of a tree running ``script`` on one CPU."""
    root = await asyncio.create_subprocess_exec(
        "taskset", "-c", "0", "sh", "-c", script, start_new_session=True
    )
    try:
        exporters = LabExporters(pid=lambda: root.pid, ledger_dir=tmp_path)
        async with exporters:
            await asyncio.sleep(0.3)  # the first samples set the references
            before, started = _waiting(exporters), time.monotonic()
            await asyncio.sleep(seconds)
            return (_waiting(exporters) - before) / (time.monotonic() - started)
    finally:
        os.killpg(root.pid, signal.SIGKILL)  # the spinners too, in the tree's own session
        await root.wait()


@pytest.mark.parametrize(
    ("script", "low", "high"),
    [
        # Two spinners on one CPU: one of them is always runnable but not running.
        # At most the wall time, give or take the one 0.1 s sample straddling each read.
        ("while :; do :; done & while :; do :; done & wait", 0.8, 1.1),
        # A tree that sleeps never waits for a CPU.
        ("sleep 30 & wait", 0.0, 0.05),
    ],
)
async def test_cpu_pressure_counts_time_a_thread_waited_for_a_cpu(
    tmp_path: Path, script: str, low: float, high: float
) -> None:
    """The waiting share is near the wall time when threads queue for one CPU, near 0 asleep.

    It is capped at the wall time, as PSI's "some" is: several threads waiting at once count
    once.
    """
    share = await _share(tmp_path, script)
    assert low <= share <= high
