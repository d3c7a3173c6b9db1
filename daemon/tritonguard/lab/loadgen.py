"""Lab load generator: Poisson or closed-loop clients, timeouts, retries, ingress counts."""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import tritonclient.http as httpclient
import tritonclient.http.aio as aioclient
from aiohttp import web

from tritonguard.lab.metrics_endpoint import serve_metrics


@dataclass(frozen=True)
class Segment:
    """Part of a rate schedule: from ``start_s``, ``rate`` (linearly to ``rate_end``)."""

    start_s: float
    rate: float
    rate_end: float | None = None


def rate_at(schedule: Sequence[Segment], t: float, end_s: float) -> float:
    """Return the scheduled rate (requests/s) at ``t`` seconds into a run lasting ``end_s``."""
    current: Segment | None = None
    following = end_s
    for i, seg in enumerate(schedule):
        if seg.start_s <= t:
            current = seg
            following = schedule[i + 1].start_s if i + 1 < len(schedule) else end_s
    if current is None:
        return 0.0
    if current.rate_end is None or following <= current.start_s:
        return current.rate
    frac = min(1.0, max(0.0, (t - current.start_s) / (following - current.start_s)))
    return current.rate + (current.rate_end - current.rate) * frac


@dataclass(frozen=True)
class LoadSpec:
    """One client population against one model.

    Open loop (``concurrency == 0``): Poisson arrivals following ``schedule``; ``burstiness`` > 0
    groups arrivals in bursts of up to that many (erratic traffic). Closed loop: ``concurrency``
    clients send back to back. ``timeout_s``: a client gives up (the ingress logs 499) and, with
    ``retries`` > 0, sends again at once. ``ingress_timeout_s``: the ingress gives up first (504).
    ``shape``: the full input shape, batch dimension included when the model batches.
    """

    model: str
    shape: tuple[int, ...] = (1, 16)
    schedule: tuple[Segment, ...] = (Segment(0.0, 10.0),)
    duration_s: float = 60.0
    concurrency: int = 0
    burstiness: int = 0
    timeout_s: float | None = None
    retries: int = 0
    ingress_timeout_s: float | None = None
    max_requests: int = 200_000
    max_outstanding: int = 1500
    seed: int = 1


# Bounds on what a run remembers of client-side failures: a few kinds, each briefly.
MAX_ERROR_KINDS = 8
ERROR_TEXT_CHARS = 200
OTHER_ERRORS = "(other kinds)"


@dataclass
class LoadStats:
    """Outcome counts of one run (attempts, as the ingress sees them, and user-level requests)."""

    attempts: Counter[str] = field(default_factory=Counter)
    requests: int = 0
    succeeded: int = 0
    gave_up: int = 0
    dropped: int = 0
    # Failures with no status from a server (refused, reset, or raised before sending), by
    # what was raised: the ingress counts them as 502s, which alone hid a client that failed
    # every request unsent. At most MAX_ERROR_KINDS kinds are kept, each with its count.
    client_errors: Counter[str] = field(default_factory=Counter)

    def client_error(self, exc: BaseException) -> None:
        """Count a failure no server answered, under its exception's type and message."""
        kind = f"{type(exc).__name__}: {exc}"[:ERROR_TEXT_CHARS]
        if kind in self.client_errors or len(self.client_errors) < MAX_ERROR_KINDS:
            self.client_errors[kind] += 1
        else:
            self.client_errors[OTHER_ERRORS] += 1

    @property
    def amplification(self) -> float:
        """Attempts per user request (1.0 without retries)."""
        return sum(self.attempts.values()) / self.requests if self.requests else 0.0


class LoadGenerator:
    """Send inference traffic to one Triton and expose ingress-style counters on ``/metrics``."""

    def __init__(
        self,
        triton_http_url: str,
        *,
        namespace: str = "lab",
        ingress: str = "triton",
        service: str = "triton",
    ) -> None:
        self.url = triton_http_url.removeprefix("http://")
        self.namespace = namespace
        self.ingress = ingress
        self.service = service
        self.counts: Counter[str] = Counter()
        self.port = 0
        self._runner: web.AppRunner | None = None

    @property
    def metrics_url(self) -> str:
        """URL of the ingress-style exposition."""
        return f"http://127.0.0.1:{self.port}/metrics"

    def exposition(self) -> str:
        """Render the counters in the Prometheus text format, named as ingress-nginx names them."""
        lines = [
            "# HELP nginx_ingress_controller_requests The total number of client requests",
            "# TYPE nginx_ingress_controller_requests counter",
        ]
        for status in sorted(self.counts):
            lines.append(
                "nginx_ingress_controller_requests{"
                f'controller_class="k8s.io/ingress-nginx",ingress="{self.ingress}",method="POST",'
                f'namespace="{self.namespace}",path="/v2/models",service="{self.service}",'
                f'status="{status}"}} {self.counts[status]}'
            )
        return "\n".join(lines) + "\n"

    async def start(self) -> LoadGenerator:
        """Serve ``/metrics`` on a free loopback port."""
        self._runner, self.port = await serve_metrics(self.exposition)
        return self

    async def stop(self) -> None:
        """Stop the metrics endpoint."""
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> LoadGenerator:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    def retarget(self, triton_http_url: str) -> None:
        """Point future runs at another server (a restarted one listens on new ports)."""
        self.url = triton_http_url.removeprefix("http://")

    async def run(self, spec: LoadSpec) -> LoadStats:
        """Run ``spec`` to its end (duration or request budget) and return what happened."""
        stats = LoadStats()
        rng = random.Random(spec.seed)
        data = np.random.default_rng(spec.seed).random(spec.shape, dtype=np.float32)
        client = aioclient.InferenceServerClient(self.url, conn_limit=spec.max_outstanding)

        def make_inputs() -> list[object]:
            tensor = httpclient.InferInput("INPUT0", list(spec.shape), "FP32")
            tensor.set_data_from_numpy(data, binary_data=True)
            return [tensor]

        inputs = make_inputs()
        limit = min(filter(None, (spec.timeout_s, spec.ingress_timeout_s)), default=None)
        tasks: set[asyncio.Task[None]] = set()

        async def attempt() -> bool:
            try:
                await asyncio.wait_for(client.infer(spec.model, inputs), timeout=limit)
            except TimeoutError:
                ingress_first = spec.ingress_timeout_s is not None and (
                    spec.timeout_s is None or spec.ingress_timeout_s <= spec.timeout_s
                )
                self._count(stats, "504" if ingress_first else "499")
                return False
            except Exception as exc:  # the server's answer decides the status the ingress logs
                status = getattr(exc, "status", lambda: None)()
                if status and str(status).isdigit():
                    self._count(stats, str(status))
                else:
                    stats.client_error(exc)
                    self._count(stats, "502")
                return False
            self._count(stats, "200")
            return True

        async def user_request() -> None:
            stats.requests += 1
            for _ in range(spec.retries + 1):
                if await attempt():
                    stats.succeeded += 1
                    return
            stats.gave_up += 1

        def launch() -> None:
            if len(tasks) >= spec.max_outstanding:
                stats.dropped += 1
                self._count(stats, "503")
                return
            task = asyncio.create_task(user_request())
            tasks.add(task)
            task.add_done_callback(tasks.discard)

        start = time.monotonic()
        end = start + spec.duration_s
        try:
            if spec.concurrency > 0:

                async def worker() -> None:
                    while time.monotonic() < end and stats.requests < spec.max_requests:
                        await user_request()

                workers = [asyncio.create_task(worker()) for _ in range(spec.concurrency)]
                await asyncio.wait(workers, timeout=spec.duration_s + 1)
                for w in workers:
                    w.cancel()
            else:
                while stats.requests + len(tasks) < spec.max_requests:
                    now = time.monotonic()
                    if now >= end:
                        break
                    rate = rate_at(spec.schedule, now - start, spec.duration_s)
                    if rate <= 0:
                        await asyncio.sleep(0.1)
                        continue
                    burst = rng.randint(1, spec.burstiness) if spec.burstiness > 1 else 1
                    await asyncio.sleep(rng.expovariate(rate / burst))
                    if time.monotonic() >= end:
                        break
                    for _ in range(burst):
                        launch()
            # Let in-flight requests finish briefly; the run is bounded, so cancel the rest.
            if tasks:
                await asyncio.wait(
                    set(tasks), timeout=min(5.0, (limit or 5.0) * (spec.retries + 1))
                )
        finally:
            for task in list(tasks):
                task.cancel()
            if tasks:
                await asyncio.wait(set(tasks), timeout=2)
            with contextlib.suppress(Exception):
                await client.close()
        return stats

    def _count(self, stats: LoadStats, status: str) -> None:
        self.counts[status] += 1
        stats.attempts[status] += 1
