"""DCGM, cAdvisor and kube-state-metrics series this machine lacks, computed from real activity."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from aiohttp import web

from tritonguard.lab.metrics_endpoint import serve_metrics

_TICKS = os.sysconf("SC_CLK_TCK")
CFS_PERIOD_S = 0.1


def process_tree(root_pid: int) -> tuple[float, list[int]]:
    """Return user+system CPU seconds of ``root_pid`` and all its live descendants, and their pids.

    Reaped children (python stubs of unloaded model instances) are included through the
    parent's ``cutime``/``cstime``, so the total only grows while the root lives. No pids
    when ``root_pid`` is gone.
    """
    parents: dict[int, int] = {}
    cpu: dict[int, float] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as handle:
                raw = handle.read()
        except OSError:
            continue
        # The command name may contain spaces and parentheses; fields follow the last ')'.
        fields = raw[raw.rfind(")") + 2 :].split()
        pid = int(entry)
        parents[pid] = int(fields[1])
        utime, stime, cutime, cstime = (int(x) for x in fields[11:15])
        cpu[pid] = (utime + stime + (cutime + cstime if pid == root_pid else 0)) / _TICKS
    if root_pid not in cpu:
        return 0.0, []
    children: dict[int, list[int]] = {}
    for pid, ppid in parents.items():
        children.setdefault(ppid, []).append(pid)
    total, stack, tree = 0.0, [root_pid], []
    while stack:
        pid = stack.pop()
        tree.append(pid)
        total += cpu.get(pid, 0.0)
        stack.extend(children.get(pid, []))
    return total, tree


def run_queue_wait_s(pids: list[int]) -> float:
    """Return the seconds the live threads of ``pids`` have waited on a run queue so far.

    The second field of each thread's ``schedstat``: time runnable but not running. A thread
    that exited takes its share with it, so callers read the total's growth, not its value.
    """
    total = 0
    for pid in pids:
        try:
            threads = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in threads:
            try:
                with open(f"/proc/{pid}/task/{tid}/schedstat") as handle:
                    total += int(handle.read().split()[1])
            except (OSError, ValueError, IndexError):
                continue
    return total / 1e9


def signal_tree(pids: list[int], sig: signal.Signals) -> None:
    """Send ``sig`` to each of ``pids``, skipping those that have exited since they were listed."""
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)


@dataclass
class Ledger:
    """Sum of what the lab model's stub processes report in their ledger files."""

    device_s: float = 0.0
    in_bytes: int = 0
    out_bytes: int = 0


def read_ledger(ledger_dir: Path) -> Ledger:
    """Sum every stub's ledger file in ``ledger_dir`` (exited stubs' files still count)."""
    total = Ledger()
    for path in ledger_dir.glob("*.json"):
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        total.device_s += float(data.get("busy_s", 0.0))
        total.in_bytes += int(data.get("in_bytes", 0))
        total.out_bytes += int(data.get("out_bytes", 0))
    return total


class LabExporters:
    """Serve DCGM, cAdvisor and kube-state-metrics series for one lab pod on ``/metrics``.

    ``pid`` returns the tritonserver process id (None while it is down); ``cpu_quota_cores``
    is the container's CPU limit; ``accel_share`` is the fraction of the device one busy
    instance occupies (1.0: a busy instance saturates it).

    With ``enforce_cpu_quota`` the limit is applied as CFS bandwidth control applies it to a
    container: a tree that used more than its quota since the last sample is stopped
    (SIGSTOP, every process of it) until the quota has paid the excess back, then resumed.
    Its average use is then capped at the quota, requests queue behind the stopped
    instances as in a throttled pod, and the node keeps the rest of its cores. Without it
    the usage is only reported against the quota.
    """

    def __init__(
        self,
        *,
        pid: Callable[[], int | None],
        ledger_dir: Path,
        namespace: str = "lab",
        pod: str = "triton-0",
        node: str = "lab-node-0",
        container: str = "triton",
        cpu_quota_cores: float = 2.0,
        accel_share: float = 1.0,
        enforce_cpu_quota: bool = False,
    ) -> None:
        self.pid = pid
        self.ledger_dir = ledger_dir
        self.namespace = namespace
        self.pod = pod
        self.node = node
        self.container = container
        self.cpu_quota_cores = cpu_quota_cores
        self.accel_share = accel_share
        self.enforce_cpu_quota = enforce_cpu_quota
        self.stopped_s = 0.0
        # stop() wakes a pause early and waits for its resume, so no process of the tree
        # is left stopped after the exporters are.
        self._closing = threading.Event()
        self._pausing = threading.Lock()
        self.port = 0
        self.cpu_usage_s = 0.0
        # cgroup CPU pressure ("some"): wall time in which at least one of the server's
        # threads waited for a CPU. Emulated from the threads' run-queue waits in each
        # 0.1 s period, capped at the period: exact when their waits do not overlap, an
        # upper bound when they do, as several threads waiting at once count once.
        self.cpu_waiting_s = 0.0
        self.periods = 0
        self.throttled = 0
        self.gpu_util = 0.0
        self.pcie_rx = 0.0
        self.pcie_tx = 0.0
        # The last sample: pid, the tree's CPU seconds, wall time, its run-queue wait.
        self._last_cpu: tuple[int, float, float, float] | None = None
        self._last_ledger: tuple[float, Ledger] | None = None
        self._runner: web.AppRunner | None = None
        self._task: asyncio.Task[None] | None = None

    @property
    def metrics_url(self) -> str:
        """URL of the exposition."""
        return f"http://127.0.0.1:{self.port}/metrics"

    def sample_cpu(self) -> None:
        """Account one CFS period: real CPU used by the server's process tree against the quota.

        With the quota enforced, a tree over it is stopped here for as long as the quota
        needs to pay the excess back (at most a second, so a burst cannot freeze it for long).
        """
        pid = self.pid()
        if pid is None:
            self._last_cpu = None
            return
        now, tree = process_tree(pid)
        wall = time.monotonic()
        queued = run_queue_wait_s(tree)
        last = self._last_cpu
        self._last_cpu = (pid, now, wall, queued)
        if last is None or last[0] != pid:
            return
        self.cpu_waiting_s += min(wall - last[2], max(0.0, queued - last[3]))
        used = max(0.0, now - last[1])
        self.cpu_usage_s += used
        if used <= 0:
            return
        self.periods += 1
        allowed = self.cpu_quota_cores * max(CFS_PERIOD_S, wall - last[2])
        # Without enforcement the usage is not capped; a period in which the tree used more
        # than its quota is one the kernel would have throttled.
        if used <= allowed:
            return
        self.throttled += 1
        if not self.enforce_cpu_quota or not tree:
            return
        pause = min(1.0, (used - allowed) / self.cpu_quota_cores)
        with self._pausing:
            if self._closing.is_set():
                return
            started = time.monotonic()
            signal_tree(tree, signal.SIGSTOP)
            try:
                self._closing.wait(pause)
            finally:
                signal_tree(tree, signal.SIGCONT)
            pause = time.monotonic() - started
        self.stopped_s += pause
        # The kernel counts every period of the stop as a throttled one.
        waited = round(pause / CFS_PERIOD_S)
        self.periods += waited
        self.throttled += waited
        # The stop is not use: the next sample measures from the resume.
        self._last_cpu = (pid, now, time.monotonic(), queued)

    def sample_device(self) -> None:
        """Update GPU utilisation and PCIe rates from the stubs' ledgers since the last call."""
        now = time.monotonic()
        ledger = read_ledger(self.ledger_dir)
        if self._last_ledger is not None:
            then, old = self._last_ledger
            dt = max(1e-3, now - then)
            busy = max(0.0, ledger.device_s - old.device_s) * self.accel_share
            self.gpu_util = min(100.0, 100.0 * busy / dt)
            self.pcie_rx = max(0, ledger.in_bytes - old.in_bytes) / dt
            self.pcie_tx = max(0, ledger.out_bytes - old.out_bytes) / dt
        self._last_ledger = (now, ledger)

    async def _loop(self) -> None:
        tick = 0
        while True:
            await asyncio.to_thread(self.sample_cpu)
            if tick % 10 == 0:
                await asyncio.to_thread(self.sample_device)
            tick += 1
            await asyncio.sleep(CFS_PERIOD_S)

    def exposition(self) -> str:
        """Render the series under the real exporters' names and labels."""
        pod = f'namespace="{self.namespace}",pod="{self.pod}"'
        ctr = f'container="{self.container}",{pod}'
        gpu = (
            'gpu="0",UUID="GPU-lab-0",device="nvidia0",modelName="lab-accelerator",'
            f'Hostname="{self.node}",{ctr}'
        )
        quota_us = int(self.cpu_quota_cores * CFS_PERIOD_S * 1e6)
        return (
            "\n".join(
                [
                    "# TYPE DCGM_FI_DEV_GPU_UTIL gauge",
                    f"DCGM_FI_DEV_GPU_UTIL{{{gpu}}} {round(self.gpu_util, 1)}",
                    "# TYPE DCGM_FI_PROF_PCIE_RX_BYTES gauge",
                    f"DCGM_FI_PROF_PCIE_RX_BYTES{{{gpu}}} {round(self.pcie_rx)}",
                    "# TYPE DCGM_FI_PROF_PCIE_TX_BYTES gauge",
                    f"DCGM_FI_PROF_PCIE_TX_BYTES{{{gpu}}} {round(self.pcie_tx)}",
                    "# TYPE container_cpu_usage_seconds_total counter",
                    "container_cpu_usage_seconds_total"
                    f'{{cpu="total",{ctr}}} {self.cpu_usage_s:.3f}',
                    "# TYPE container_pressure_cpu_waiting_seconds_total counter",
                    "container_pressure_cpu_waiting_seconds_total"
                    f"{{{ctr}}} {self.cpu_waiting_s:.3f}",
                    "# TYPE container_cpu_cfs_periods_total counter",
                    f"container_cpu_cfs_periods_total{{{ctr}}} {self.periods}",
                    "# TYPE container_cpu_cfs_throttled_periods_total counter",
                    f"container_cpu_cfs_throttled_periods_total{{{ctr}}} {self.throttled}",
                    "# TYPE container_spec_cpu_quota gauge",
                    f"container_spec_cpu_quota{{{ctr}}} {quota_us}",
                    "# TYPE container_spec_cpu_period gauge",
                    f"container_spec_cpu_period{{{ctr}}} {int(CFS_PERIOD_S * 1e6)}",
                    "# TYPE kube_pod_info gauge",
                    f'kube_pod_info{{{pod},node="{self.node}",host_ip="127.0.0.1",'
                    'pod_ip="127.0.0.1",created_by_kind="StatefulSet",'
                    'created_by_name="triton"} 1',
                ]
            )
            + "\n"
        )

    async def start(self) -> LabExporters:
        """Start sampling and serve ``/metrics`` on a free loopback port."""
        self._closing.clear()
        self._runner, self.port = await serve_metrics(self.exposition)
        self._task = asyncio.create_task(self._loop())
        return self

    async def stop(self) -> None:
        """Stop sampling and serving; a server stopped for its quota is resumed first."""
        self._closing.set()
        with self._pausing:  # held only between a stop and its resume, now woken
            pass
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> LabExporters:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()
