"""A real tritonserver process (from the nvidia-pytriton wheel) started on loopback for the lab."""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import ctypes
import ctypes.util
import os
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import tempfile
import time
import urllib.error
import urllib.request
import weakref
from collections.abc import Callable
from pathlib import Path
from types import TracebackType

_LIVE: weakref.WeakSet[TritonServer] = weakref.WeakSet()


class TritonServerError(RuntimeError):
    """The server could not be found, started or made ready."""


def pytriton_root() -> Path:
    """Return the ``tritonserver`` directory of the installed nvidia-pytriton wheel."""
    try:
        # Optional (the 'lab' extra): imported here so a missing wheel is a clear error.
        import pytriton  # noqa: PLC0415 - optional: the error below says what to install
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise TritonServerError(
            "nvidia-pytriton is not installed; install the 'lab' extra to run a real Triton"
        ) from exc
    root = Path(pytriton.__file__).parent / "tritonserver"
    if not (root / "bin" / "tritonserver").exists():
        raise TritonServerError(f"{root}/bin/tritonserver is missing; reinstall nvidia-pytriton")
    return root


def _prepare_parent_death_signal() -> Callable[[], None] | None:
    """Return a pre-exec hook that makes the child get SIGKILL when its parent dies (Linux).

    atexit and finalizers do not run when the parent is SIGKILLed (a test runner's timeout);
    the kernel's parent-death signal still stops the server then. The signal fires when the
    *thread* that started the child exits, so start servers from long-lived threads (the
    main thread or an executor's).
    """
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        prctl = libc.prctl
    except (OSError, AttributeError):
        return None
    pr_set_pdeathsig = 1

    def hook() -> None:
        prctl(pr_set_pdeathsig, signal.SIGKILL, 0, 0, 0)

    return hook


PARENT_DEATH_HOOK = _prepare_parent_death_signal()


def free_port() -> int:
    """Return a TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _kill_group(proc: subprocess.Popen[bytes], grace_s: float) -> None:
    """SIGTERM the process group, then SIGKILL whatever is left after ``grace_s``."""
    if proc.poll() is not None:
        # The leader is gone but python stubs in its group may survive it.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=grace_s)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=5)


class TritonServer:
    """Start and stop one real tritonserver; usable as a sync or async context manager.

    ``repository`` is an existing model repository (see ``tritonguard.lab.repository``).
    ``control_mode`` is ``"explicit"`` (all models loaded at start, repository API allowed) or
    ``"poll"`` (``poll_secs`` between scans). ``access_token`` restricts the model-repository
    API behind a ``triton-access-token`` header.
    """

    def __init__(
        self,
        repository: Path,
        *,
        control_mode: str = "explicit",
        poll_secs: int = 1,
        access_token: str | None = None,
        summary_latencies: bool = True,
        log_path: Path | None = None,
        ready_timeout_s: float = 60.0,
        extra_args: tuple[str, ...] = (),
    ) -> None:
        if control_mode not in ("explicit", "poll", "none"):
            raise TritonServerError(
                f"control_mode must be explicit, poll or none, not {control_mode!r}"
            )
        self.repository = Path(repository)
        self.control_mode = control_mode
        self.poll_secs = poll_secs
        self.access_token = access_token
        self.summary_latencies = summary_latencies
        self.ready_timeout_s = ready_timeout_s
        self.extra_args = extra_args
        self._workdir = Path(tempfile.mkdtemp(prefix="tritonguard-lab-"))
        # The work dir only holds backend links, and the log unless the caller placed it.
        self._keep_workdir = log_path is None
        self.log_path = log_path or self._workdir / "tritonserver.log"
        self.http_port = 0
        self.metrics_port = 0
        self._proc: subprocess.Popen[bytes] | None = None
        self._finalizer: weakref.finalize[[subprocess.Popen[bytes], float], TritonServer] | None = (
            None
        )

    @property
    def http_url(self) -> str:
        """Base URL of the HTTP/REST endpoint, e.g. ``http://127.0.0.1:40123``."""
        return f"http://127.0.0.1:{self.http_port}"

    @property
    def metrics_url(self) -> str:
        """URL of the Prometheus exposition, ``.../metrics``."""
        return f"http://127.0.0.1:{self.metrics_port}/metrics"

    @property
    def pid(self) -> int | None:
        """Process id of the running tritonserver (leader of its own process group)."""
        return self._proc.pid if self._proc is not None and self._proc.poll() is None else None

    def _backend_dir(self) -> Path:
        root = pytriton_root()
        version = f"{sys.version_info.major}.{sys.version_info.minor}"
        stub = root / "python_backend_stubs" / version / "triton_python_backend_stub"
        if not stub.exists():
            raise TritonServerError(f"no python backend stub for Python {version} in {stub.parent}")
        backend = self._workdir / "backends" / "python"
        backend.mkdir(parents=True, exist_ok=True)
        for src in (
            root / "backends" / "python" / "libtriton_python.so",
            root / "backends" / "python" / "triton_python_backend_utils.py",
            stub,
        ):
            dst = backend / src.name
            if not dst.exists():
                dst.symlink_to(src)
        return backend.parent

    def _command(self) -> list[str]:
        root = pytriton_root()
        args = [
            str(root / "bin" / "tritonserver"),
            f"--model-repository={self.repository}",
            f"--backend-directory={self._backend_dir()}",
            f"--model-control-mode={self.control_mode}",
            "--http-address=127.0.0.1",
            f"--http-port={self.http_port}",
            "--allow-grpc=false",
            "--allow-metrics=true",
            "--allow-gpu-metrics=false",
            "--allow-cpu-metrics=true",
            f"--metrics-port={self.metrics_port}",
            "--metrics-address=127.0.0.1",
            "--metrics-interval-ms=1000",
            "--exit-timeout-secs=3",
            "--strict-readiness=true",
        ]
        if self.summary_latencies:
            args.append("--metrics-config=summary_latencies=true")
        if self.control_mode == "explicit":
            args.append("--load-model=*")
        if self.control_mode == "poll":
            args.append(f"--repository-poll-secs={self.poll_secs}")
        if self.access_token:
            args.append(
                f"--http-restricted-api=model-repository:triton-access-token={self.access_token}"
            )
        args.extend(self.extra_args)
        return args

    def _env(self) -> dict[str, str]:
        root = pytriton_root()
        libs = root.parent.parent / "nvidia_pytriton.libs"
        libdir = str(sysconfig.get_config_var("LIBDIR") or "")
        # The stub must load this interpreter's libpython, not the system one (see DESIGN.md).
        paths = [p for p in (libdir, str(libs), os.environ.get("LD_LIBRARY_PATH", "")) if p]
        env = dict(os.environ)
        env["LD_LIBRARY_PATH"] = ":".join(paths)
        return env

    def start(self) -> TritonServer:
        """Start the server and block until ``/v2/health/ready`` answers 200."""
        if self._proc is not None:
            raise TritonServerError("server already started")
        self.http_port = free_port()
        self.metrics_port = free_port()
        while self.metrics_port == self.http_port:
            self.metrics_port = free_port()
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = self.log_path.open("ab")
        try:
            self._proc = subprocess.Popen(
                self._command(),
                stdout=log,
                stderr=subprocess.STDOUT,
                env=self._env(),
                start_new_session=True,
                preexec_fn=PARENT_DEATH_HOOK,  # noqa: PLW1509 - only a prctl call, prepared before fork
            )
        finally:
            log.close()
        self._finalizer = weakref.finalize(self, _kill_group, self._proc, 5.0)
        _LIVE.add(self)
        deadline = time.monotonic() + self.ready_timeout_s
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                tail = self.log_tail()
                self.stop()
                raise TritonServerError(f"tritonserver exited during start; log tail:\n{tail}")
            if self.is_ready():
                return self
            time.sleep(0.2)
        tail = self.log_tail()
        self.stop()
        raise TritonServerError(
            f"tritonserver not ready after {self.ready_timeout_s}s; log tail:\n{tail}"
        )

    def is_ready(self) -> bool:
        """Return True when ``/v2/health/ready`` answers 200 and the metrics endpoint answers.

        Triton opens its metrics port after the HTTP endpoint: on a busy machine a scrape
        right after "ready" can find nothing listening yet.
        """
        try:
            with urllib.request.urlopen(f"{self.http_url}/v2/health/ready", timeout=1) as resp:
                if resp.status != 200:
                    return False
            with urllib.request.urlopen(self.metrics_url, timeout=2) as resp:
                return bool(resp.status == 200)
        except (urllib.error.URLError, OSError):
            return False

    def log_tail(self, lines: int = 30) -> str:
        """Return the last ``lines`` lines of the server log."""
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def stop(self, grace_s: float = 8.0) -> None:
        """Stop the server: SIGTERM to its process group, SIGKILL after ``grace_s``."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        _kill_group(proc, grace_s)
        if self._finalizer is not None:
            self._finalizer.detach()
        _LIVE.discard(self)
        if not self._keep_workdir:
            shutil.rmtree(self._workdir, ignore_errors=True)

    def __enter__(self) -> TritonServer:
        return self.start()

    def __exit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    async def __aenter__(self) -> TritonServer:
        return await asyncio.to_thread(self.start)

    async def __aexit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        await asyncio.to_thread(self.stop)


@atexit.register
def _stop_all() -> None:
    for server in list(_LIVE):
        server.stop(grace_s=3.0)
