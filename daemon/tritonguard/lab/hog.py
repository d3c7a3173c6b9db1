"""CPU hog for node contention: fixed-work hashing in its own, heavier-weighted session."""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import subprocess
import sys
import weakref

from tritonguard.lab.triton_server import PARENT_DEATH_HOOK

# hashlib releases the GIL on large buffers, so each thread keeps one core busy.
_HOG_CODE = """
import hashlib, os, threading
buf = os.urandom(1 << 20)
def work():
    for _ in range({rounds}):
        hashlib.sha256(buf).digest()
threads = [threading.Thread(target=work) for _ in range({workers})]
for t in threads:
    t.start()
for t in threads:
    t.join()
"""

_LIVE: weakref.WeakSet[CpuHog] = weakref.WeakSet()


class CpuHog:
    """One process with ``workers`` threads that each hash ``rounds`` MiB, then exit.

    The work is fixed (a bounded number of rounds), so the hog slows what shares the CPU with
    it rather than spinning until a deadline. The kernel shares CPU between autogroups
    (sessions), so the hog runs in its own session and its autogroup gets ``autogroup_nice``
    (negative: more weight), as a neighbour pod with a larger CPU request would have.
    """

    def __init__(self, workers: int = 2, rounds: int = 400_000, autogroup_nice: int = -10) -> None:
        self.workers = workers
        self.rounds = rounds
        self.autogroup_nice = autogroup_nice
        self._proc: subprocess.Popen[bytes] | None = None
        self.autogroup_set = False

    def start(self) -> CpuHog:
        """Start the hog in a new session and raise its autogroup's weight."""
        _LIVE.add(self)
        self._proc = subprocess.Popen(
            [sys.executable, "-c", _HOG_CODE.format(rounds=self.rounds, workers=self.workers)],
            start_new_session=True,
            preexec_fn=PARENT_DEATH_HOOK,  # noqa: PLW1509 - only a prctl call, prepared before fork
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            with open(f"/proc/{self._proc.pid}/autogroup", "w") as handle:
                handle.write(str(self.autogroup_nice))
            self.autogroup_set = True
        except OSError:
            # Without the weight the hog still runs, only less effectively (see DESIGN.md).
            self.autogroup_set = False
        return self

    @property
    def pid(self) -> int | None:
        """Process id of the running hog."""
        return self._proc.pid if self._proc is not None and self._proc.poll() is None else None

    def stop(self) -> None:
        """Kill the hog and reap it."""
        proc, self._proc = self._proc, None
        if proc is not None:
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(proc.pid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=5)
        _LIVE.discard(self)

    def __enter__(self) -> CpuHog:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


@atexit.register
def _stop_all() -> None:
    for hog in list(_LIVE):
        hog.stop()
