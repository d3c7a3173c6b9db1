"""CPU hog for node contention: fixed-work processes in their own, heavier-weighted session."""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import subprocess
import sys
import weakref

_HOG_CODE = """
import hashlib, os
buf = os.urandom(1 << 20)
for _ in range({rounds}):
    hashlib.sha256(buf).digest()
"""

_LIVE: weakref.WeakSet[CpuHog] = weakref.WeakSet()


class CpuHog:
    """Start ``workers`` processes that each hash ``rounds`` MiB, then exit.

    The work is fixed (a bounded number of rounds), so the hog slows what shares the CPU with
    it rather than spinning until a deadline. The kernel shares CPU between autogroups
    (sessions), so the hog runs in its own session and its autogroup gets ``autogroup_nice``
    (negative: more weight), as a neighbour pod with a larger CPU request would have.
    """

    def __init__(self, workers: int = 2, rounds: int = 400_000, autogroup_nice: int = -10) -> None:
        self.workers = workers
        self.rounds = rounds
        self.autogroup_nice = autogroup_nice
        self._procs: list[subprocess.Popen[bytes]] = []
        self.autogroup_set = False

    def start(self) -> CpuHog:
        """Start the workers (one session for all of them)."""
        code = _HOG_CODE.format(rounds=self.rounds)
        leader = subprocess.Popen(
            [sys.executable, "-c", code],
            start_new_session=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        self._procs.append(leader)
        for _ in range(self.workers - 1):
            # Join the leader's session and process group so that one autogroup holds them all.
            self._procs.append(
                subprocess.Popen(
                    [sys.executable, "-c", code],
                    process_group=leader.pid,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
            )
        try:
            with open(f"/proc/{leader.pid}/autogroup", "w") as handle:
                handle.write(str(self.autogroup_nice))
            self.autogroup_set = True
        except OSError:
            self.autogroup_set = False
        _LIVE.add(self)
        return self

    @property
    def pids(self) -> list[int]:
        """Process ids of the workers still running."""
        return [p.pid for p in self._procs if p.poll() is None]

    def stop(self) -> None:
        """Kill every worker and reap it."""
        for proc in self._procs:
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(proc.pid, signal.SIGKILL)
        for proc in self._procs:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=5)
        self._procs.clear()
        _LIVE.discard(self)

    def __enter__(self) -> CpuHog:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


@atexit.register
def _stop_all() -> None:
    for hog in list(_LIVE):
        hog.stop()
