"""False alarms on a healthy synthetic fleet: every subject evaluated at every scrape, none open.

A fleet of P pods x M models (``benchmarks.fleet_gen``) serves Poisson traffic with its own
rate, latency and queue share per model, and per-scrape latency noise; nothing is wrong.
Every incident the engine opens on it is a false alarm. Run
``python -m benchmarks.healthy_fleet --pods 100 --models 20 --scrapes 90`` (2,000 subjects,
15 minutes of 10 s scrapes); the evaluation CPU per tick is reported beside the ingest's.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass, field

from benchmarks.fleet_gen import Fleet, FleetSpec
from tritonguard.core.engine import Engine
from tritonguard.core.exposition import SeriesCache
from tritonguard.core.findings import IncidentEvent
from tritonguard.core.scrape_ingest import TargetIngest
from tritonguard.core.series_store import SeriesStore


@dataclass
class FleetRun:
    """What the engine made of a healthy fleet."""

    subjects: int
    scrapes: int
    opened: list[IncidentEvent] = field(default_factory=list)
    ingest_cpu_s: float = 0.0
    evaluate_cpu_s: float = 0.0

    def summary(self) -> str:
        """One line per figure, for people."""
        per_tick = self.evaluate_cpu_s / max(self.scrapes, 1)
        causes = sorted({f"{e.cause} on {e.subject.pod}/{e.subject.model}" for e in self.opened})
        return (
            f"{self.subjects} subjects, {self.scrapes} scrapes: {len(self.opened)} incidents "
            f"opened{': ' + ', '.join(causes[:10]) if causes else ''}\n"
            f"evaluation {per_tick * 1000:.0f} ms CPU per tick, ingest "
            f"{self.ingest_cpu_s / max(self.scrapes, 1) * 1000:.0f} ms CPU per scrape"
        )


def fleet_ingesters(fleet: Fleet, store: SeriesStore) -> dict[str, TargetIngest]:
    """One ingester per target of ``fleet`` into ``store``, as the scrape source keeps them."""
    cache = SeriesCache()
    return {
        target.name: TargetIngest(
            store,
            extra_labels=target.labels,
            honor_labels=target.honor_labels,
            source=target.name,
            cache=cache,
        )
        for target in fleet.targets
    }


def run_healthy_fleet(spec: FleetSpec, scrapes: int) -> FleetRun:
    """Scrape and evaluate ``spec`` for ``scrapes`` intervals; return what opened."""
    fleet = Fleet(spec)
    engine = Engine()
    ingesters = fleet_ingesters(fleet, engine.store)
    run = FleetRun(subjects=spec.pods * spec.models, scrapes=scrapes)
    for t, texts in fleet.scrape_many(scrapes):
        began = time.process_time()
        for name, text in texts.items():
            ingesters[name].ingest(text, t)
        mid = time.process_time()
        events = engine.evaluate(t)
        run.ingest_cpu_s += mid - began
        run.evaluate_cpu_s += time.process_time() - mid
        run.opened += [e for e in events if e.event == "opened"]
    return run


def main() -> None:
    """Run one healthy fleet and print what opened."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pods", type=int, default=100)
    parser.add_argument("--models", type=int, default=20)
    parser.add_argument("--scrapes", type=int, default=90)
    parser.add_argument("--interval", type=float, default=10.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-exporters", action="store_true")
    args = parser.parse_args()
    spec = FleetSpec(
        pods=args.pods,
        models=args.models,
        interval_s=args.interval,
        seed=args.seed,
        exporters=not args.no_exporters,
    )
    print(run_healthy_fleet(spec, args.scrapes).summary())


if __name__ == "__main__":
    main()
