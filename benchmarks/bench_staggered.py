"""Evaluation CPU per scrape interval when a fleet's targets are scraped at different moments.

A daemon scraping many targets does not get them all at once: their scrapes spread over the
interval, and it evaluates as they arrive, at most every ``evaluation_min_gap_s`` (1 s by
default), so ten evaluations fall within each 10 s interval. Here a generated healthy fleet
(``benchmarks.fleet_gen``, 20 models a pod, with its exporters) has its targets split into
``--slots`` groups scraped evenly over the interval, and the engine evaluates after each
group arrives. What is timed is all of one interval's evaluations together; the baseline,
timed once an interval on the same store, reads the newest value of every stored series
(``bench_evaluate.newest_samples``). The machine is shared, so the ratio of the medians is
the figure to compare; CPU time (``time.process_time``) is printed beside it.

Run ``python -m benchmarks.bench_staggered --subjects 2000``.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time
from dataclasses import dataclass

from benchmarks.bench_evaluate import MODELS, WARMUP_SCRAPES, consumed_names, newest_samples
from benchmarks.fleet_gen import Fleet, FleetSpec
from benchmarks.healthy_fleet import fleet_ingesters
from tritonguard.core.engine import Engine


@dataclass(frozen=True, slots=True)
class StaggeredCost:
    """Median CPU seconds an interval of the evaluations and of the baseline, for one fleet."""

    subjects: int
    slots: int
    evaluate_s: float
    baseline_s: float
    intervals: int
    # Baseline snapshots the engine holds at the end: one a subject and scrape when each
    # subject is judged once per scrape, whatever the evaluations between.
    snapshots: int
    scrapes: int

    def line(self) -> str:
        """One line for people."""
        return (
            f"staggered fleet, {self.subjects} subjects, {self.slots} evaluations an interval: "
            f"{self.evaluate_s * 1e3:.0f} ms CPU an interval "
            f"({self.evaluate_s / self.subjects * 1e6:.0f} us a subject), "
            f"{self.evaluate_s / self.baseline_s:.0f}x the newest-sample read "
            f"({self.baseline_s * 1e3:.1f} ms), median of {self.intervals} intervals; "
            f"{self.snapshots / (self.subjects * self.scrapes):.2f} baseline snapshots a "
            "subject and scrape"
        )


def measure(
    subjects: int, intervals: int, *, slots: int = 10, warmup: int = WARMUP_SCRAPES, seed: int = 0
) -> StaggeredCost:
    """Warm a staggered fleet up, then time ``intervals`` intervals' evaluations."""
    spec = FleetSpec(pods=max(1, subjects // MODELS), models=MODELS, seed=seed)
    fleet = Fleet(spec)
    engine = Engine()
    ingesters = fleet_ingesters(fleet, engine.store)
    step = spec.interval_s / slots
    slot_of = {target.name: k % slots for k, target in enumerate(fleet.targets)}
    names: list[str] = []
    spent: list[float] = []
    baseline: list[float] = []
    for k, (t, texts) in enumerate(fleet.scrape_many(warmup + intervals)):
        if not names:
            names = consumed_names(texts)
        gc.collect()
        cpu = 0.0
        for slot in range(slots):
            at = t + slot * step
            for name, text in texts.items():
                if slot_of[name] == slot:
                    ingesters[name].ingest(text, at)
            began = time.process_time()
            engine.evaluate(at)
            cpu += time.process_time() - began
        if k < warmup:
            continue
        began = time.process_time()
        newest_samples(engine.store, names)
        baseline.append(time.process_time() - began)
        spent.append(cpu)
    return StaggeredCost(
        spec.pods * spec.models,
        slots,
        statistics.median(spent),
        max(statistics.median(baseline), 1e-6),
        intervals,
        engine.history.snapshots,
        warmup + intervals,
    )


def main() -> None:
    """Print one line per fleet size."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--subjects", default="2000", help="fleet sizes, comma-separated")
    parser.add_argument("--intervals", type=int, default=5, help="intervals measured")
    parser.add_argument("--slots", type=int, default=10, help="scrape groups an interval")
    parser.add_argument("--warmup", type=int, default=WARMUP_SCRAPES, help="intervals before")
    args = parser.parse_args()
    for n in (int(x) for x in args.subjects.split(",") if x):
        print(measure(n, args.intervals, slots=args.slots, warmup=args.warmup).line(), flush=True)


if __name__ == "__main__":
    main()
