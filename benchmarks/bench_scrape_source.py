"""The daemon's scrape path, poll after poll: into the store directly against through samples.

Each poll scrapes ``targets`` pods that each serve the real 50-model Triton capture, its
counters advanced every scrape (``bench_ingest.advanced_captures``). The HTTP fetch is the
same for both paths, so it is left out: the scraper hands the source the bodies a real one
would have read. Two sources then read the same bodies, alternating poll by poll on the
same machine so that load hits both alike:

- **samples** (before): ``ScrapeSource`` without a store (parse, relabel every sample,
  ``Sample`` objects), then ``Engine.ingest`` of the poll's samples, as the daemon did;
- **store** (after): ``ScrapeSource`` given the engine's store, one ``TargetIngest`` per
  target, as the daemon now does.

CPU time (``time.process_time``) per poll is reported, with the ratio of the two medians.
Run: ``python -m benchmarks.bench_scrape_source --targets 8 --polls 30``.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections.abc import Sequence

from benchmarks.bench_ingest import advanced_captures, split_loop
from tritonguard.clients.metrics_scraper import MetricsScraper, ScrapeResult, ScrapeTarget
from tritonguard.core.engine import Engine
from tritonguard.core.metric_names import is_consumed
from tritonguard.settings import Settings, TargetSettings
from tritonguard.sources.scrape import ScrapeSource

INTERVAL = 10.0


class CannedScraper(MetricsScraper):
    """Hands each target the body of the current scrape, as a real fetch would have read it."""

    def __init__(self) -> None:
        super().__init__(timeout_s=1.0)
        self.body = ""
        self.at = 0.0

    async def scrape_all(self, targets: Sequence[ScrapeTarget]) -> list[ScrapeResult]:
        """Return this scrape's body for every target, at this scrape's time."""
        return [ScrapeResult(t, self.at, 0.01, text=self.body) for t in targets]


def _targets(count: int) -> list[TargetSettings]:
    return [
        TargetSettings(
            name=f"triton-{i}",
            metrics_url=f"http://127.0.0.1:{9000 + i}/metrics",  # never fetched
            namespace="ml",
            pod=f"triton-{i}",
        )
        for i in range(count)
    ]


def measure(targets: int = 8, polls: int = 30) -> list[str]:
    """Poll both paths ``polls`` times over ``targets`` pods; return the report lines."""
    texts = advanced_captures(polls + 1)
    settings = Settings(targets=_targets(targets), listen="127.0.0.1:0")
    before_engine = Engine(settings.engine_config())
    after_engine = Engine(settings.engine_config())
    before_scraper, after_scraper = CannedScraper(), CannedScraper()
    before = ScrapeSource(settings.targets, before_scraper, keep=is_consumed)
    after = ScrapeSource(
        settings.targets, after_scraper, keep=is_consumed, store=after_engine.store
    )
    loop = asyncio.new_event_loop()
    spent_before: list[float] = []
    spent_after: list[float] = []
    try:
        for k, text in enumerate(texts):
            t = 1_700_000_000.0 + INTERVAL * k
            for scraper in (before_scraper, after_scraper):
                scraper.body, scraper.at = text, t
            started = time.process_time()
            result = loop.run_until_complete(before.poll())
            before_engine.ingest(result.samples, t)
            middle = time.process_time()
            loop.run_until_complete(after.poll())
            ended = time.process_time()
            if k == 0:
                continue  # every series is new at the first poll; steady polls are measured
            spent_before.append(middle - started)
            spent_after.append(ended - middle)
    finally:
        loop.close()
    if len(before_engine.store) != len(after_engine.store):
        raise AssertionError("the two paths stored different series")
    samples = targets * split_loop(texts[0])
    b, a = statistics.median(spent_before), statistics.median(spent_after)
    return [
        f"daemon scrape path, {targets} targets x 50 models ({samples} samples a poll), "
        f"median of {polls} polls:",
        f"  samples (parse + relabel + Sample + Engine.ingest): {b * 1e3:.1f} ms CPU a poll, "
        f"{samples / b / 1e6:.2f} M samples/CPU-s",
        f"  store (TargetIngest per target): {a * 1e3:.1f} ms CPU a poll, "
        f"{samples / a / 1e6:.2f} M samples/CPU-s",
        f"  store path vs samples path: {b / a:.1f}x faster (time ratio {a / b:.3f})",
    ]


def main() -> None:
    """Print the comparison."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--targets", type=int, default=8)
    parser.add_argument("--polls", type=int, default=30)
    args = parser.parse_args()
    for line in measure(args.targets, args.polls):
        print(line)


if __name__ == "__main__":
    main()
