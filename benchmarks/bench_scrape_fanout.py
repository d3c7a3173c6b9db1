"""Scrape fan-out: thousands of loopback targets polled by the real scraper within one interval.

One aiohttp server in a child process answers ``/t/<i>/metrics`` for every target with a
real-shaped 20-model Triton exposition (``benchmarks.fleet_gen``); 5 % of the targets are
slow (they answer after a minute) and 5 % dead (their port refuses connections). The
scraper side runs the daemon's scrape source (``sources.scrape.ScrapeSource`` over
``clients.metrics_scraper.MetricsScraper``) tick after tick the way the daemon's source loop
does, and reports per tick: wall time, CPU time, targets up, overrun (the tick took longer
than the interval) and lag (how late the tick started against one interval after the one
before). Two ingest paths are compared on the same scrapes: the scrape source's own
(parse_exposition, relabel, ``SeriesStore.add_many``) and ``TargetIngest`` (fused).

Run: ``python -m benchmarks.bench_scrape_fanout --targets 2000 --ticks 3``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib
import multiprocessing
import socket
import statistics
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from aiohttp import web

from benchmarks.fleet_gen import Fleet, FleetSpec
from tritonguard.clients.metrics_scraper import MetricsScraper, ScrapeTarget
from tritonguard.core.metric_names import is_consumed
from tritonguard.core.scrape_ingest import TargetIngest
from tritonguard.core.series_store import SeriesStore
from tritonguard.settings import TargetSettings
from tritonguard.sources.scrape import ScrapeSource, target_labels

# One target in this many is slow, and one dead: 5 % each.
EVERY = 20
BODIES = 8  # distinct pods' expositions served round-robin


def _serve(port_out: multiprocessing.connection.Connection, bodies: int, slow: set[int]) -> None:
    """Child process: serve every target's exposition on one loopback port until killed."""
    fleet = Fleet(FleetSpec(pods=bodies, exporters=False))
    texts = list(fleet.scrape().values())
    payloads = [text.encode() for text in texts]

    async def metrics(request: web.Request) -> web.Response:
        i = int(request.match_info["i"])
        if i in slow:
            await asyncio.sleep(60.0)
        return web.Response(
            body=payloads[i % len(payloads)],
            headers={"Content-Type": "text/plain; version=0.0.4; charset=utf-8"},
        )

    async def main() -> None:
        await start_targets(metrics, port_out)
        await asyncio.Event().wait()

    asyncio.run(main())


async def start_targets(
    metrics: Callable[[web.Request], Awaitable[web.Response]],
    port_out: multiprocessing.connection.Connection,
) -> web.AppRunner:
    """Serve ``/t/<i>/metrics`` for every target on one loopback port; send the port out."""
    app = web.Application()
    app.router.add_get("/t/{i}/metrics", metrics)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, backlog=4096)
    await site.start()
    port_out.send(runner.addresses[0][1])
    return runner


def _closed_port() -> int:
    """Return a loopback port nothing listens on: connections to it are refused."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Tick:
    """One tick of the source loop."""

    wall_s: float
    cpu_s: float
    fetch_s: float  # wall time until the last response (the fused path only)
    lag_s: float
    # CPU time until the last response (the fused path only): the HTTP side alone, which
    # the event loop's implementation moves, apart from the ingest that follows it.
    fetch_cpu_s: float
    up: int
    samples: int


def _targets(count: int, port: int, dead_port: int) -> tuple[list[TargetSettings], set[int]]:
    slow = {i for i in range(count) if i % EVERY == 7}
    dead = {i for i in range(count) if i % EVERY == 13}
    targets = [
        TargetSettings(
            name=f"t{i}",
            metrics_url=f"http://127.0.0.1:{dead_port if i in dead else port}/t/{i}/metrics",
            namespace=f"ns-{i % 10}",
            pod=f"triton-{i}",
        )
        for i in range(count)
    ]
    return targets, slow


async def _ticks(
    targets: Sequence[TargetSettings],
    *,
    ticks: int,
    interval_s: float,
    timeout_s: float,
    concurrency: int,
    fused: bool,
) -> list[Tick]:
    """Poll every target ``ticks`` times as the daemon's source loop does; time each tick."""
    scraper = MetricsScraper(timeout_s=timeout_s, jitter_s=1.0, max_concurrency=concurrency)
    source = ScrapeSource(targets, scraper, interval_s=interval_s, keep=is_consumed)
    store = SeriesStore()
    ingesters = {
        t.name: TargetIngest(store, extra_labels=target_labels(t), source=t.metrics_url)
        for t in targets
    }
    scrape_targets = [ScrapeTarget(name=t.name, url=t.metrics_url) for t in targets]
    out: list[Tick] = []
    previous: float | None = None
    try:
        # The first tick meets every series new (a daemon's start); it is measured apart.
        for _ in range(ticks + 1):
            started = time.monotonic()
            lag = 0.0 if previous is None else max(0.0, started - previous - interval_s)
            cpu0 = time.process_time()
            fetch = fetch_cpu = float("nan")
            if fused:
                results = await scraper.scrape_all(scrape_targets)
                fetch = time.monotonic() - started
                fetch_cpu = time.process_time() - cpu0
                samples = up = 0
                for result in results:
                    if result.ok and result.text is not None:
                        got = ingesters[result.target.name].ingest(result.text, result.timestamp)
                        samples += got.samples
                        up += 1
            else:
                polled = await source.poll()
                store.add_many(polled.samples, time.time())
                samples = len(polled.samples)
                up = sum(1 for status in polled.statuses if status.ok)
            wall = time.monotonic() - started
            out.append(Tick(wall, time.process_time() - cpu0, fetch, lag, fetch_cpu, up, samples))
            # Lag counts from the first steady tick on: the cold one is reported apart.
            previous = started if out[1:] else None
            await asyncio.sleep(max(0.0, interval_s - wall))
    finally:
        await source.close()
    return out


async def run_fanout(
    *,
    targets: int = 2000,
    ticks: int = 3,
    interval_s: float = 10.0,
    timeout_s: float = 5.0,
    concurrencies: Sequence[int] = (32, 256),
    paths: Sequence[bool] = (False, True),
) -> list[str]:
    """Run the fan-out at each concurrency, both ingest paths; return the report lines."""
    receive, send = multiprocessing.Pipe(duplex=False)
    settings, slow = _targets(targets, 0, 0)
    server = multiprocessing.get_context("fork").Process(
        target=_serve, args=(send, BODIES, slow), daemon=True
    )
    server.start()
    lines = []
    try:
        port = receive.recv()
        dead_port = _closed_port()
        settings, slow = _targets(targets, port, dead_port)
        lines.append(
            f"scrape fan-out: {targets} loopback targets ({len(slow)} slow, "
            f"{targets // EVERY} dead), {interval_s:g} s interval, scrape timeout {timeout_s:g} s"
        )
        for concurrency in concurrencies:
            for fused in paths:
                done = await _ticks(
                    settings,
                    ticks=ticks,
                    interval_s=interval_s,
                    timeout_s=timeout_s,
                    concurrency=concurrency,
                    fused=fused,
                )
                path = "TargetIngest" if fused else "ScrapeSource.poll + add_many"
                first, steady = done[0], done[1:]
                walls = [t.wall_s for t in steady]
                fetched = (
                    f", fetch {statistics.median(t.fetch_s for t in steady):.2f} s wall "
                    f"{statistics.median(t.fetch_cpu_s for t in steady):.2f} s CPU"
                    if fused
                    else ""
                )
                lines.append(
                    f"  max_concurrent_scrapes={concurrency}, {path}: steady tick wall "
                    f"{statistics.median(walls):.2f} s (max {max(walls):.2f}){fetched}, CPU "
                    f"{statistics.median(t.cpu_s for t in steady):.2f} s, up "
                    f"{steady[-1].up}/{targets}, {steady[-1].samples} samples, overruns "
                    f"{sum(1 for w in walls if w > interval_s)}/{len(steady)}, max lag "
                    f"{max(t.lag_s for t in steady):.2f} s; first tick {first.wall_s:.2f} s "
                    f"wall, {first.cpu_s:.2f} s CPU"
                )
    finally:
        server.kill()
        with contextlib.suppress(Exception):
            server.join(5)
    return lines


def main() -> None:
    """Run the fan-out benchmark and print its report."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--targets", type=int, default=2000)
    parser.add_argument("--ticks", type=int, default=3)
    parser.add_argument("--interval", type=float, default=10.0)
    parser.add_argument("--timeout", type=float, default=5.0)
    parser.add_argument("--concurrency", default="32,256", help="comma-separated")
    parser.add_argument(
        "--loop",
        choices=("asyncio", "uvloop"),
        default="asyncio",
        help="the scraper's event loop (uvloop must be installed)",
    )
    parser.add_argument(
        "--paths", choices=("both", "fused"), default="both", help="which ingest paths to run"
    )
    args = parser.parse_args()
    if args.loop == "uvloop":
        # Not a dependency: installed by hand for this comparison only (docs/benchmarks.md).
        uvloop = importlib.import_module("uvloop")
        asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    lines = asyncio.run(
        run_fanout(
            targets=args.targets,
            ticks=args.ticks,
            interval_s=args.interval,
            timeout_s=args.timeout,
            concurrencies=[int(c) for c in args.concurrency.split(",")],
            paths=(True,) if args.paths == "fused" else (False, True),
        )
    )
    lines[0] += f", {args.loop} event loop"
    for line in lines:
        print(line)


if __name__ == "__main__":
    main()
