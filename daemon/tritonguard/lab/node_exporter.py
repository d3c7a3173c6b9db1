"""The real prometheus-node-exporter on a free loopback port, with the CPU and load collectors."""

from __future__ import annotations

import atexit
import contextlib
import shutil
import subprocess
import time
import urllib.error
import urllib.request
import weakref

from tritonguard.lab.triton_server import PARENT_DEATH_HOOK, free_port

_LIVE: weakref.WeakSet[NodeExporter] = weakref.WeakSet()


class NodeExporter:
    """Run ``prometheus-node-exporter`` (Debian package): cpu, loadavg and meminfo collectors."""

    def __init__(self, binary: str = "prometheus-node-exporter") -> None:
        self.binary = binary
        self.port = 0
        self._proc: subprocess.Popen[bytes] | None = None

    @staticmethod
    def available(binary: str = "prometheus-node-exporter") -> bool:
        """Return True when the binary is installed."""
        return shutil.which(binary) is not None

    @property
    def metrics_url(self) -> str:
        """URL of the exposition."""
        return f"http://127.0.0.1:{self.port}/metrics"

    def start(self, timeout_s: float = 10.0) -> NodeExporter:
        """Start the exporter and wait until it answers."""
        self.port = free_port()
        self._proc = subprocess.Popen(
            [
                self.binary,
                f"--web.listen-address=127.0.0.1:{self.port}",
                "--collector.disable-defaults",
                "--collector.cpu",
                "--collector.loadavg",
                "--collector.meminfo",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            preexec_fn=PARENT_DEATH_HOOK,  # noqa: PLW1509 - only a prctl call, prepared before fork
        )
        _LIVE.add(self)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(self.metrics_url, timeout=1):
                    return self
            except (urllib.error.URLError, OSError):
                if self._proc.poll() is not None:
                    break
                time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"{self.binary} did not answer on {self.metrics_url}")

    def stop(self) -> None:
        """Stop the exporter."""
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(timeout=5)
        _LIVE.discard(self)

    def __enter__(self) -> NodeExporter:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


@atexit.register
def _stop_all() -> None:
    for exporter in list(_LIVE):
        exporter.stop()
