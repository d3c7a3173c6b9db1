"""An hour of fleet time with pods coming and going, to see whether the memory stays flat.

A generated healthy fleet (``benchmarks.fleet_gen``, 20 models a pod, with its exporters) is
scraped and evaluated every 10 s of fleet time for an hour, compressed: the engine's clock is
the scrape timestamps, as in ``bench_memory`` and a replay. Every ``--churn-every`` of fleet
time a share of the pods (``--churn``, 5 % by default) is replaced by pods of new names:
the old ones stop answering, their series age out of the store and their subjects out of
the baselines, and the new ones start from zero counters, as a rollout's pods do. Every
``--sample-every`` of fleet time the process's RSS is read (after a collection), with what the
engine holds: series, points, baseline snapshots and subjects, its own byte estimate, and the
parse cache's entries.

Memory is flat when, after the warm-up (the store's retention: every series then holds its
full window), the last reading is within a few per cent of the first and none rises far
above. The first-to-last and first-to-maximum ratios are printed; the absolute numbers are
for context.

Run ``python -m benchmarks.bench_churn_hour --subjects 2000`` (360 ticks).
"""

from __future__ import annotations

import argparse
import gc
import resource
import time
from collections.abc import Sequence
from dataclasses import dataclass

from benchmarks.fleet_gen import Fleet, FleetSpec, Target
from tritonguard.core.engine import Engine
from tritonguard.core.exposition import SeriesCache
from tritonguard.core.scrape_ingest import TargetIngest

MODELS = 20
INTERVAL_S = 10.0


@dataclass(frozen=True, slots=True)
class Reading:
    """What the process and the engine hold at one moment of fleet time."""

    minute: float
    rss_mb: float
    series: int
    points: int
    snapshots: int
    subjects: int
    engine_mb: float
    cache_entries: int
    pods_replaced: int

    def line(self) -> str:
        """One line for people."""
        return (
            f"  {self.minute:5.0f} min: RSS {self.rss_mb:6.0f} MB, engine estimate "
            f"{self.engine_mb:5.0f} MB, {self.series} series, {self.points} points, "
            f"{self.snapshots} snapshots, {self.subjects} subjects, parse cache "
            f"{self.cache_entries}, {self.pods_replaced} pods replaced so far"
        )


class ChurningFleet:
    """A generated fleet whose pods are replaced by newly named ones, a share at a time."""

    def __init__(self, spec: FleetSpec) -> None:
        self.fleet = Fleet(spec)
        self.generation = 0
        self.replaced = 0
        self._next = 0

    def replace(self, share: float) -> tuple[list[str], list[Target]]:
        """Give ``share`` of the pods new names and zero counters; return (gone, new) targets."""
        fleet = self.fleet
        count = max(1, round(share * fleet.spec.pods))
        self.generation += 1
        gone: list[str] = []
        new: list[Target] = []
        # Round-robin over the pods, so every one is replaced in turn as a rollout would.
        for _ in range(count):
            i = self._next
            self._next = (self._next + 1) % fleet.spec.pods
            ns, pod = fleet.pods[i]
            base = pod.rsplit("-", 1)[-1]
            deployment = fleet.deployments[i // fleet.spec.replicas]
            name = f"{deployment}-g{self.generation:03d}-{base}"
            fleet.pods[i] = (ns, name)
            old = fleet.triton_targets[i]
            labels = tuple((k, name if k == "pod" else v) for k, v in old.labels)
            fleet.triton_targets[i] = Target(f"triton/{name}", labels, old.honor_labels)
            for counter in (fleet.success, fleet.failure, fleet.count, fleet.execs):
                counter[i] = 0
            fleet.durations[:, i] = 0
            gone.append(old.name)
            new.append(fleet.triton_targets[i])
        self.replaced += count
        return gone, new


def _rss_mb() -> float:
    """Return the process's resident set now (Linux), in MB."""
    with open("/proc/self/statm") as f:
        pages = int(f.read().split()[1])
    return pages * resource.getpagesize() / 2**20


def _ingester(target: Target, engine: Engine, cache: SeriesCache) -> TargetIngest:
    return TargetIngest(
        engine.store,
        extra_labels=target.labels,
        honor_labels=target.honor_labels,
        source=target.name,
        cache=cache,
    )


@dataclass(frozen=True, slots=True)
class ChurnRun:
    """The readings of one run and what it took."""

    subjects: int
    ticks: int
    readings: list[Reading]
    warmup_min: float
    wall_s: float
    cpu_s: float
    churn_every: int

    def report(self) -> list[str]:
        """Return the readings, then the ratios after the warm-up."""
        lines = [
            f"churn hour: {self.subjects} subjects, {self.ticks} ticks of {INTERVAL_S:g} s "
            f"({self.ticks * INTERVAL_S / 60:.0f} min of fleet time) in {self.wall_s:.0f} s "
            f"wall, {self.cpu_s:.0f} s CPU"
        ]
        lines += [r.line() for r in self.readings]
        steady = [r for r in self.readings if r.minute >= self.warmup_min]
        if len(steady) < 2:
            lines.append("too short for a reading after the warm-up")
            return lines
        first = steady[0]
        # A reading just after a rollout holds the old pods and the new ones together: the
        # last reading compared is a whole number of rollouts after the first, so both stand
        # at the same point of the cycle.
        cycle_min = self.churn_every * INTERVAL_S / 60
        same = [r for r in steady if round(r.minute - first.minute, 6) % cycle_min == 0]
        steady = steady[: steady.index(same[-1]) + 1]
        last = steady[-1]

        def ratios(label: str, values: Sequence[float]) -> str:
            return (
                f"{label} last/first {values[-1] / values[0]:.3f}, "
                f"max/first {max(values) / values[0]:.3f}"
            )

        lines.append(
            f"after the warm-up ({first.minute:.0f} to {last.minute:.0f} min, the same point "
            "of the rollout cycle): "
            + "; ".join(
                (
                    ratios("RSS", [r.rss_mb for r in steady]),
                    ratios("engine estimate", [r.engine_mb for r in steady]),
                    ratios("series", [r.series for r in steady]),
                    ratios("points", [r.points for r in steady]),
                    ratios("snapshots", [r.snapshots for r in steady]),
                )
            )
        )
        lines.append(
            f"RSS {first.rss_mb:.0f} MB at {first.minute:.0f} min, {last.rss_mb:.0f} MB at "
            f"{last.minute:.0f} min, at most {max(r.rss_mb for r in self.readings):.0f} MB; peak "
            f"over the run {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB"
        )
        return lines


def run(
    subjects: int,
    ticks: int,
    *,
    churn: float = 0.05,
    churn_every: int = 60,
    sample_every: int = 30,
    seed: int = 0,
) -> ChurnRun:
    """Scrape and evaluate ``ticks`` times with pods replaced every ``churn_every`` ticks."""
    spec = FleetSpec(
        pods=max(1, subjects // MODELS), models=MODELS, interval_s=INTERVAL_S, seed=seed
    )
    churning = ChurningFleet(spec)
    fleet = churning.fleet
    engine = Engine()
    cache = SeriesCache()
    ingesters = {t.name: _ingester(t, engine, cache) for t in fleet.targets}
    # The store's retention: past it every series holds its full window, so growth that
    # remains is what churn leaves behind.
    warmup_min = engine.t.retention_s / 60
    readings: list[Reading] = []
    wall0, cpu0 = time.monotonic(), time.process_time()
    for k in range(ticks + 1):
        if k and k % churn_every == 0:
            gone, new = churning.replace(churn)
            for name in gone:
                del ingesters[name]
            for target in new:
                ingesters[target.name] = _ingester(target, engine, cache)
        t = fleet.timestamp(fleet.scrapes)
        for name, text in fleet.scrape().items():
            ingesters[name].ingest(text, t)
        engine.evaluate(t)
        if k % sample_every == 0:
            gc.collect()
            held = engine.memory()
            readings.append(
                Reading(
                    minute=k * INTERVAL_S / 60,
                    rss_mb=_rss_mb(),
                    series=held["series"],
                    points=engine.store.points,
                    snapshots=engine.history.snapshots,
                    subjects=len(engine.last_diagnoses),
                    engine_mb=(held["series_bytes"] + held["baseline_bytes"]) / 2**20,
                    cache_entries=len(cache),
                    pods_replaced=churning.replaced,
                )
            )
    return ChurnRun(
        spec.pods * spec.models,
        ticks,
        readings,
        warmup_min,
        time.monotonic() - wall0,
        time.process_time() - cpu0,
        churn_every,
    )


def main() -> None:
    """Run one compressed hour of churn and print the readings and ratios."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--subjects", type=int, default=2000)
    parser.add_argument("--ticks", type=int, default=360, help="10 s ticks (360: an hour)")
    parser.add_argument("--churn", type=float, default=0.05, help="share of pods replaced")
    parser.add_argument("--churn-every", type=int, default=60, help="ticks between rollouts")
    parser.add_argument("--sample-every", type=int, default=30, help="ticks between readings")
    args = parser.parse_args()
    result = run(
        args.subjects,
        args.ticks,
        churn=args.churn,
        churn_every=args.churn_every,
        sample_every=args.sample_every,
    )
    for line in result.report():
        print(line, flush=True)


if __name__ == "__main__":
    main()
