"""Evaluation tick CPU per fleet size, against a bare read of every series' newest sample.

A generated healthy fleet (``benchmarks.fleet_gen``, 20 models a pod, with its exporters) is
scraped and evaluated every 10 s until each subject has a baseline; then, at each measured
tick, the engine's ``evaluate`` and the baseline loop are timed one after the other on the
same store. The baseline reads the newest sample of every stored series, which is what any
evaluation must at least touch. The machine is shared, so the ratio of the medians is the
figure to compare; CPU time (``time.process_time``) per tick is printed beside it.

Run ``python -m benchmarks.bench_evaluate --subjects 400,2000``; ``--warmup 95`` measures
the steady state instead, where every subject holds its full baseline lookback and every
series its full retention (at 10 s scrapes, 60 and 90 scrapes).
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import pstats
import resource
import statistics
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from benchmarks.fleet_gen import Fleet, FleetSpec
from benchmarks.healthy_fleet import fleet_ingesters
from tritonguard.core.engine import Engine
from tritonguard.core.exposition import parse_exposition
from tritonguard.core.metric_names import is_consumed
from tritonguard.core.series_store import SeriesStore

MODELS = 20
# Scrapes before measuring: the baseline needs a rate window of healthy history beyond the
# window it excludes, and the per-scrape checks a few scrapes of their own.
WARMUP_SCRAPES = 12


@dataclass(frozen=True, slots=True)
class TickCost:
    """Median CPU seconds per tick of the evaluation and of the baseline, for one fleet."""

    subjects: int
    evaluate_s: float
    baseline_s: float
    ticks: int
    # The process's peak RSS when the measurement ended (every fleet measured so far).
    peak_rss_mb: float = 0.0
    # What the engine says it holds (series store and baselines, its own estimate), and how
    # many series: the part of the RSS a daemon's memory budget bounds.
    engine_mb: float = 0.0
    series: int = 0

    def line(self) -> str:
        """One line for people."""
        return (
            f"evaluation tick, {self.subjects} subjects: {self.evaluate_s * 1e3:.0f} ms CPU "
            f"({self.evaluate_s / self.subjects * 1e6:.0f} us/subject), "
            f"{self.evaluate_s / self.baseline_s:.0f}x the newest-sample read "
            f"({self.baseline_s * 1e3:.1f} ms), median of {self.ticks} ticks, "
            f"peak RSS {self.peak_rss_mb:.0f} MB, engine holds {self.engine_mb:.0f} MB "
            f"in {self.series} series"
        )


def consumed_names(texts: Mapping[str, str]) -> list[str]:
    """Return the families of a scrape's expositions that the engine stores, sorted."""
    found = {s.name for text in texts.values() for s in parse_exposition(text).samples}
    return sorted(n for n in found if is_consumed(n))


def newest_samples(store: SeriesStore, names: Sequence[str]) -> float:
    """Baseline: read the newest value of every stored series of the consumed families."""
    total = 0.0
    for name in names:
        for series in store.family(name):
            total += series.values[-1]
    return total


def measure(
    subjects: int,
    ticks: int,
    *,
    seed: int = 0,
    warmup: int = WARMUP_SCRAPES,
    interval_s: float = 10.0,
    profile: cProfile.Profile | None = None,
) -> TickCost:
    """Warm a fleet of ``subjects`` up, then time ``ticks`` evaluations and baselines.

    With ``profile``, the measured evaluations (only those) run under it.
    """
    spec = FleetSpec(
        pods=max(1, subjects // MODELS), models=MODELS, interval_s=interval_s, seed=seed
    )
    fleet = Fleet(spec)
    engine = Engine()
    ingesters = fleet_ingesters(fleet, engine.store)
    names: list[str] = []
    evaluate: list[float] = []
    baseline: list[float] = []
    for k, (t, texts) in enumerate(fleet.scrape_many(warmup + ticks)):
        for name, text in texts.items():
            ingesters[name].ingest(text, t)
        if not names:
            names = consumed_names(texts)
        if k < warmup:
            engine.evaluate(t)
            continue
        gc.collect()
        began = time.process_time()
        newest_samples(engine.store, names)
        mid = time.process_time()
        if profile is not None:
            profile.enable()
        engine.evaluate(t)
        if profile is not None:
            profile.disable()
        done = time.process_time()
        baseline.append(mid - began)
        evaluate.append(done - mid)
    held = engine.memory()
    return TickCost(
        spec.pods * spec.models,
        statistics.median(evaluate),
        max(statistics.median(baseline), 1e-6),
        ticks,
        resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        (held["series_bytes"] + held["baseline_bytes"]) / 2**20,
        held["series"],
    )


def report(
    subject_counts: Sequence[int],
    ticks: int,
    warmup: int = WARMUP_SCRAPES,
    interval_s: float = 10.0,
) -> list[str]:
    """Return one line per fleet size, and how the cost of a subject grows with the fleet."""
    costs = [measure(n, ticks, warmup=warmup, interval_s=interval_s) for n in subject_counts]
    lines = [c.line() for c in costs]
    if len(costs) > 1:
        small, large = costs[0], costs[-1]
        lines.append(
            f"linearity: evaluation cost a subject at {large.subjects} subjects / at "
            f"{small.subjects} = {large.evaluate_s / large.subjects / (small.evaluate_s / small.subjects):.2f}"
            f" (newest-sample read: "
            f"{large.baseline_s / large.subjects / (small.baseline_s / small.subjects):.2f})"
        )
    return lines


def main() -> None:
    """Measure the evaluation tick for the fleet sizes asked for."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--subjects", default="100,500,2000", help="fleet sizes, comma-separated")
    parser.add_argument("--ticks", type=int, default=5, help="measured ticks per fleet (median)")
    parser.add_argument(
        "--warmup", type=int, default=WARMUP_SCRAPES, help="scrapes evaluated before measuring"
    )
    parser.add_argument(
        "--profile",
        type=int,
        default=0,
        metavar="N",
        help="profile the measured evaluations of the last fleet size; print the N largest "
        "cumulative shares (profiling slows the calls it counts, so shares, not times)",
    )
    parser.add_argument(
        "--interval",
        type=float,
        default=10.0,
        help="scrape interval in seconds (the fast path runs only below a quarter of the window)",
    )
    args = parser.parse_args()
    sizes = [int(n) for n in args.subjects.split(",") if n]
    if args.profile:
        profile = cProfile.Profile()
        cost = measure(
            sizes[-1], args.ticks, warmup=args.warmup, interval_s=args.interval, profile=profile
        )
        print(cost.line(), "(profiled)", flush=True)
        for line in profile_shares(pstats.Stats(profile), args.profile):
            print(line)
        return
    for line in report(sizes, args.ticks, args.warmup, args.interval):
        print(line, flush=True)


# A profile's row per function: (file, line, name) -> (primitive calls, calls, own
# seconds, cumulative seconds, callers).
ProfileRow = tuple[int, int, float, float, object]


def product_rows(stats: pstats.Stats) -> dict[tuple[str, int, str], ProfileRow]:
    """Return the profile's rows of the product's own functions."""
    # pstats keeps its table as an undeclared attribute.
    table: dict[tuple[str, int, str], ProfileRow] = stats.stats  # type: ignore[attr-defined]  # undeclared in typeshed, public in pstats
    return {key: row for key, row in table.items() if "tritonguard" in key[0]}


def profile_shares(stats: pstats.Stats, top: int) -> list[str]:
    """Return the ``top`` product functions by cumulative time, as shares of the evaluation."""
    rows = list(product_rows(stats).items())
    total = max((row[3] for key, row in rows if key[2] == "evaluate"), default=0.0)
    if total <= 0:
        return []
    rows.sort(key=lambda kv: kv[1][3], reverse=True)
    return [
        f"{row[3] / total:6.1%}  {row[1]:>8} calls  {key[0].rsplit('/', 1)[-1]}:{key[2]}"
        for key, row in rows[:top]
    ]


if __name__ == "__main__":
    main()
