"""Every subject's diagnosis at every tick of generated fleets, written out to compare trees.

A speed-up of the evaluation must not change what it says. This runs a few generated fleets
(``benchmarks.fleet_gen``): healthy, with each injected fault, at 10 s, 5 s and 2 s scrapes,
with pods joining late and pods leaving for longer than the retention; and writes, at every
tick, each subject's diagnosis (features, baseline, findings, symptom reasons, recovered),
every incident transition and the engine's memory figures, one line each. Run it on the tree
before a change and on the tree after, with ``PYTHONHASHSEED=0`` (the fleet baseline's
feature order follows a set), and compare the two files byte for byte::

    PYTHONHASHSEED=0 python -m benchmarks.fleet_equivalence --out before.txt
"""

from __future__ import annotations

import argparse
import hashlib
from collections.abc import Iterator
from dataclasses import dataclass

from benchmarks.fleet_gen import Fleet, FleetSpec
from benchmarks.healthy_fleet import fleet_ingesters
from tritonguard.core.engine import Engine


@dataclass(frozen=True, slots=True)
class Case:
    """One generated fleet and which of its pods come late or leave."""

    name: str
    spec: FleetSpec
    scrapes: int
    # Pod targets absent until this scrape (joining late), and absent from this scrape on.
    join_at: int = 0
    leave_at: int | None = None


CASES = (
    Case("healthy-10s", FleetSpec(pods=8, models=5, seed=1), 80),
    Case("retry-storm", FleetSpec(pods=8, models=5, seed=2, fault="retry_storm", fault_at=30), 60),
    Case(
        "too-few-5s",
        FleetSpec(pods=8, models=5, seed=3, interval_s=5.0, fault="too_few_instances", fault_at=50),
        90,
    ),
    Case(
        "restart-2s",
        FleetSpec(pods=8, models=4, seed=4, interval_s=2.0, fault="restart", fault_at=100),
        160,
    ),
    Case("join-leave", FleetSpec(pods=8, models=5, seed=5), 200, join_at=40, leave_at=70),
)


def _moving(fleet: Fleet) -> set[str]:
    """Return the targets of the fleet's last two pods: the ones that join late or leave."""
    return {t.name for t in fleet.triton_targets[-2:]}


def lines(case: Case) -> Iterator[str]:
    """Yield one line per subject diagnosis, transition and memory figure at every tick."""
    fleet = Fleet(case.spec)
    engine = Engine()
    ingesters = fleet_ingesters(fleet, engine.store)
    moving = _moving(fleet)
    for k, (t, texts) in enumerate(fleet.scrape_many(case.scrapes)):
        away = k < case.join_at or (case.leave_at is not None and k >= case.leave_at)
        for name, text in texts.items():
            if name in moving and away:
                continue
            ingesters[name].ingest(text, t)
        events = engine.evaluate(t)
        for event in events:
            yield f"{case.name} {k} event {event!r}"
        for key in sorted(engine.last_diagnoses):
            yield f"{case.name} {k} {key} {engine.last_diagnoses[key]!r}"
        yield f"{case.name} {k} memory {engine.memory()!r}"
    yield f"{case.name} baselines {engine.export_baselines(t)!r}"


def main() -> None:
    """Write every case's lines to ``--out`` and print their digest."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    digest = hashlib.sha256()
    with open(args.out, "w", encoding="utf-8") as out:
        for case in CASES:
            count = 0
            for line in lines(case):
                out.write(line + "\n")
                digest.update(line.encode())
                count += 1
            print(f"{case.name}: {count} lines", flush=True)
    print(f"sha256 {digest.hexdigest()}")


if __name__ == "__main__":
    main()
