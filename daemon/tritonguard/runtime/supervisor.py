"""Supervisor of the daemon's named root tasks: restart on crash with backoff, ordered shutdown."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import structlog

from tritonguard.logs import get_logger

TaskFactory = Callable[[], Awaitable[None]]
Cleanup = Callable[[], Awaitable[None]]


@dataclass(slots=True)
class TaskState:
    """What the supervisor knows about one root task (exported on /readyz and /metrics)."""

    name: str
    running: bool = False
    restarts: int = 0
    last_error: str | None = None
    last_started: float | None = None


@dataclass(slots=True)
class _Spec:
    name: str
    factory: TaskFactory
    stage: int
    grace_s: float
    state: TaskState
    task: asyncio.Task[None] | None = None


class Supervisor:
    """Run named root tasks until stopped; a crashing task is logged and restarted, never fatal.

    Each task body is a coroutine factory; it runs again after ``backoff`` (doubling up to
    ``max_backoff_s``, reset once a run lasted ``healthy_after_s``) whenever it raises or
    returns while the supervisor is not stopping. On stop, stages shut down in ascending
    order: a stage's tasks get ``grace_s`` to finish on their own (they see ``stopping``),
    then are cancelled; cleanups (closing clients) run last.
    """

    def __init__(
        self,
        *,
        backoff_s: float = 0.5,
        max_backoff_s: float = 30.0,
        healthy_after_s: float = 60.0,
        on_crash: Callable[[str, BaseException], None] | None = None,
    ) -> None:
        self.backoff_s = backoff_s
        self.max_backoff_s = max_backoff_s
        self.healthy_after_s = healthy_after_s
        self.stopping = asyncio.Event()
        self._specs: dict[str, _Spec] = {}
        self._cleanups: list[tuple[str, Cleanup]] = []
        self._on_crash = on_crash
        self._log: structlog.stdlib.BoundLogger = get_logger("tritonguard.supervisor")
        self._stop_reason = ""

    def add(self, name: str, factory: TaskFactory, *, stage: int = 0, grace_s: float = 0.0) -> None:
        """Register a root task; ``stage`` orders shutdown (lower stops first)."""
        if name in self._specs:
            raise ValueError(f"task {name!r} registered twice")
        self._specs[name] = _Spec(name, factory, stage, grace_s, TaskState(name))

    def add_cleanup(self, name: str, cleanup: Cleanup) -> None:
        """Register a coroutine run once after every task has stopped (e.g. closing a client)."""
        self._cleanups.append((name, cleanup))

    def states(self) -> dict[str, TaskState]:
        """Return each task's state."""
        return {name: spec.state for name, spec in self._specs.items()}

    def request_stop(self, reason: str = "requested") -> None:
        """Ask every task to stop; ``run`` then shuts down in stage order and returns."""
        if not self.stopping.is_set():
            self._stop_reason = reason
            self._log.info("shutdown requested", reason=reason)
            self.stopping.set()

    def install_signal_handlers(self) -> Callable[[], None]:
        """Stop gracefully on SIGTERM/SIGINT; return a function that removes the handlers."""
        loop = asyncio.get_running_loop()
        signals = (signal.SIGTERM, signal.SIGINT)
        for sig in signals:
            loop.add_signal_handler(sig, self.request_stop, sig.name)

        def remove() -> None:
            for sig in signals:
                loop.remove_signal_handler(sig)

        return remove

    async def _keep_running(self, spec: _Spec) -> None:
        delay = self.backoff_s
        while not self.stopping.is_set():
            spec.state.running = True
            spec.state.last_started = started = time.monotonic()
            try:
                await spec.factory()
            except asyncio.CancelledError:
                spec.state.running = False
                raise
            except Exception as exc:
                spec.state.running = False
                if self.stopping.is_set():
                    # A crash while shutting down (a client already closed) is not news.
                    return
                spec.state.restarts += 1
                spec.state.last_error = f"{type(exc).__name__}: {exc}".splitlines()[0]
                self._log.error(
                    "task crashed; restarting", task=spec.name, retry_in_s=delay, exc_info=exc
                )
                if self._on_crash is not None:
                    self._on_crash(spec.name, exc)
            else:
                spec.state.running = False
                if self.stopping.is_set():
                    return
                spec.state.restarts += 1
                self._log.warning("task returned; restarting", task=spec.name, retry_in_s=delay)
            if time.monotonic() - started >= self.healthy_after_s:
                delay = self.backoff_s
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(delay):
                    await self.stopping.wait()
            delay = min(delay * 2, self.max_backoff_s)

    async def run(self) -> None:
        """Run every task until ``request_stop``; then shut down in stage order and return."""
        for spec in self._specs.values():
            spec.task = asyncio.create_task(self._keep_running(spec), name=spec.name)
        self._log.info("daemon tasks started", tasks=sorted(self._specs))
        try:
            await self.stopping.wait()
        finally:
            await self._shutdown()

    async def _shutdown(self) -> None:
        started = time.monotonic()
        for stage in sorted({spec.stage for spec in self._specs.values()}):
            specs = [s for s in self._specs.values() if s.stage == stage and s.task is not None]
            await asyncio.gather(*(self._stop_task(spec) for spec in specs))
        for name, cleanup in reversed(self._cleanups):
            try:
                async with asyncio.timeout(5.0):
                    await cleanup()
            except Exception as exc:
                self._log.warning("cleanup failed", cleanup=name, error=str(exc))
        self._log.info(
            "daemon stopped",
            reason=self._stop_reason,
            shutdown_s=round(time.monotonic() - started, 3),
        )

    async def _stop_task(self, spec: _Spec) -> None:
        task = spec.task
        if task is None:
            return
        if spec.grace_s > 0 and not task.done():
            done, _ = await asyncio.wait({task}, timeout=spec.grace_s)
            if not done:
                self._log.warning(
                    "task did not finish in time; cancelling", task=spec.name, grace_s=spec.grace_s
                )
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        spec.state.running = False
