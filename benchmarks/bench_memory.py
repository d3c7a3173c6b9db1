"""Engine memory per fleet size: bytes a series, a point and a baseline snapshot, and the RSS.

A generated healthy fleet (``benchmarks.fleet_gen``, 20 models a pod, with its exporters) is
scraped and evaluated every 10 s, as ``bench_evaluate`` does. With ``--trace`` the run is
traced (tracemalloc) and at two scrapes the memory allocated by the series store (its module
and the family index) and by the baselines is read: between them the series are the same, so
the store's growth over the points added is the cost of a point, and what is left over the
points is the fixed cost of a series. Those are the figures ``SERIES_BYTES``, ``POINT_BYTES``
and ``SNAPSHOT_BYTES`` must cover. Without ``--trace`` it prints the peak RSS and the
engine's own estimate (``Engine.memory()``), untraced.

Run ``python -m benchmarks.bench_memory --subjects 4000 --scrapes 12 --trace`` (memory is
linear in the fleet: 4,000 subjects give the per-series figures of 40,000 in a tenth of the
time); ``--subjects 40000 --scrapes 12`` for the RSS at the issue's fleet size.
"""

from __future__ import annotations

import argparse
import gc
import resource
import tracemalloc
from dataclasses import dataclass

from benchmarks.fleet_gen import Fleet, FleetSpec, scraped_at
from benchmarks.healthy_fleet import fleet_ingesters
from tritonguard.core.engine import Engine, EngineConfig

MODELS = 20
# The store's own allocations: what its memory bound estimates.
_STORE_FILES = ("*/tritonguard/core/series_store.py", "*/tritonguard/core/series_index.py")
_BASELINE_FILES = ("*/tritonguard/core/baselines.py",)


@dataclass(frozen=True, slots=True)
class Traced:
    """Bytes the store and the baselines hold at one scrape, and what they hold it in."""

    store_bytes: int
    baseline_bytes: int
    series: int
    points: int
    snapshots: int


def _traced(engine: Engine) -> Traced:
    gc.collect()
    snap = tracemalloc.take_snapshot()

    def size(patterns: tuple[str, ...]) -> int:
        filters = [tracemalloc.Filter(True, p) for p in patterns]
        return sum(s.size for s in snap.filter_traces(filters).statistics("filename"))

    return Traced(
        size(_STORE_FILES),
        size(_BASELINE_FILES),
        len(engine.store),
        engine.store.points,
        engine.history.snapshots,
    )


def _rss_mb() -> float:
    """Return the process's resident set now (Linux), in MB."""
    with open("/proc/self/statm") as f:
        pages = int(f.read().split()[1])
    return pages * resource.getpagesize() / 2**20


def measure(
    subjects: int,
    scrapes: int,
    *,
    trace: bool,
    seed: int = 0,
    history_s: float = 0.0,
    exporter_every: int = 1,
) -> list[str]:
    """Warm a fleet of ``subjects`` up over ``scrapes`` scrapes; return lines for people.

    ``history_s`` is how far back other readers than the diagnosis read the store (a
    daemon drawing 10-minute charts: 600), as ``EngineConfig.history_s``. The exporters
    (DCGM, cAdvisor, node, kube-state-metrics) are scraped at every ``exporter_every``-th
    of Triton's scrapes: 3 is a 30 s exporter beside a 10 s Triton.
    """
    spec = FleetSpec(pods=max(1, subjects // MODELS), models=MODELS, interval_s=10.0, seed=seed)
    fleet = Fleet(spec)
    engine = Engine(EngineConfig(history_s=history_s))
    ingesters = fleet_ingesters(fleet, engine.store)
    if trace:
        tracemalloc.start(1)
    # The first traced reading once every subject has a snapshot or two, the second at the end.
    early_at = min(3, scrapes - 1)
    early: Traced | None = None
    for k, (t, texts) in enumerate(fleet.scrape_many(scrapes)):
        for name, text in texts.items():
            if scraped_at(name, k, exporter_every):
                ingesters[name].ingest(text, t)
        engine.evaluate(t)
        if trace and k == early_at - 1:
            early = _traced(engine)
    held = engine.memory()
    lines = [
        f"{spec.pods * spec.models} subjects, {scrapes} scrapes: {held['series']} series, "
        f"{engine.store.points} points ({engine.store.points / max(held['series'], 1):.1f} a "
        f"series), {engine.history.snapshots} baseline snapshots",
        f"engine estimate {(held['series_bytes'] + held['baseline_bytes']) / 2**20:.0f} MB "
        f"(series {held['series_bytes'] / 2**20:.0f}, baselines "
        f"{held['baseline_bytes'] / 2**20:.0f}); RSS now {_rss_mb():.0f} MB, peak "
        f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB"
        + (" (traced: tracemalloc's own bookkeeping included)" if trace else ""),
    ]
    if trace and early is not None:
        late = _traced(engine)
        per_point = (late.store_bytes - early.store_bytes) / max(late.points - early.points, 1)
        fixed = (late.store_bytes - per_point * late.points) / max(late.series, 1)
        per_snapshot = late.baseline_bytes / max(late.snapshots, 1)
        lines.append(
            f"store allocations {late.store_bytes / 2**20:.0f} MB: {fixed:.0f} B a series "
            f"fixed + {per_point:.1f} B a point (growth from scrape {early_at} to {scrapes}, "
            f"{late.series - early.series} series more); baselines "
            f"{late.baseline_bytes / 2**20:.0f} MB, {per_snapshot:.0f} B a snapshot"
        )
        gc.collect()
        stats = tracemalloc.take_snapshot().statistics("lineno")[:12]
        lines += [f"  {s.size / max(late.series, 1):7.1f} B a series  {s}" for s in stats]
    return lines


def main() -> None:
    """Measure the engine's memory for the fleet sizes asked for."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--subjects", default="4000", help="fleet sizes, comma-separated")
    parser.add_argument("--scrapes", type=int, default=12, help="scrapes evaluated")
    parser.add_argument("--trace", action="store_true", help="break the memory down")
    parser.add_argument(
        "--history",
        type=float,
        default=0.0,
        help="seconds of points kept for readers besides the diagnosis (600: 10-minute charts)",
    )
    parser.add_argument(
        "--exporter-every",
        type=int,
        default=1,
        help="scrape the exporters at every N-th of Triton's scrapes (3: every 30 s beside 10 s)",
    )
    args = parser.parse_args()
    for n in (int(x) for x in args.subjects.split(",") if x):
        lines = measure(
            n,
            args.scrapes,
            trace=args.trace,
            history_s=args.history,
            exporter_every=args.exporter_every,
        )
        for line in lines:
            print(line, flush=True)


if __name__ == "__main__":
    main()
