"""Print benchmark ratios measured in one process: parser, ingest, evaluation, replay, fan-out.

Run as ``python -m benchmarks.run`` (everything, minutes) or ``--quick`` (CI, under a minute).
Each subject and its baseline are timed alternately and the medians compared, so the ratio
holds on a busy machine where absolute times do not; absolute numbers are printed too.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import statistics
import time
import timeit

from benchmarks.bench_evaluate import report as evaluate_report
from benchmarks.bench_ingest import report as ingest_report
from benchmarks.bench_parser import CAPTURE, parse_ours, parse_prometheus_client
from benchmarks.bench_replay import build_trace, read_with_prometheus_client, replay_text
from benchmarks.bench_scrape_fanout import run_fanout
from benchmarks.bench_staggered import measure as staggered


def measure(rounds: int, number: int) -> tuple[float, float]:
    """Return the median seconds per parse for (ours, prometheus_client)."""
    text = CAPTURE.read_text()
    if parse_ours(text) != parse_prometheus_client(text):
        raise SystemExit("the parsers disagree on the sample count; fix that before timing")
    ours: list[float] = []
    theirs: list[float] = []
    for _ in range(rounds):
        ours.append(timeit.timeit(lambda: parse_ours(text), number=number) / number)
        theirs.append(timeit.timeit(lambda: parse_prometheus_client(text), number=number) / number)
    return statistics.median(ours), statistics.median(theirs)


def measure_replay(rounds: int) -> tuple[float, float, float]:
    """Median seconds for (full replay, prometheus_client read) of one trace, and its span."""
    text, span = build_trace()
    ours: list[float] = []
    base: list[float] = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        replay_text(text)
        t1 = time.perf_counter()
        read_with_prometheus_client(text)
        t2 = time.perf_counter()
        ours.append(t1 - t0)
        base.append(t2 - t1)
    return statistics.median(ours), statistics.median(base), span


def machine() -> str:
    """One line about where the numbers were taken."""
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return (
        f"machine: {platform.machine()} {os.cpu_count()} cores, Python "
        f"{platform.python_version()}, load average {load:.1f} at start"
    )


def main() -> None:
    """Run the benchmarks and print what they measured."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a CI-sized run (under a minute)")
    parser.add_argument("--rounds", type=int, default=9, help="alternating rounds (median taken)")
    parser.add_argument("--number", type=int, default=10, help="parses per round")
    parser.add_argument(
        "--fleets", default="100,500,2000", help="fleet sizes in pods, comma-separated"
    )
    parser.add_argument(
        "--subjects",
        default="100,500,2000",
        help="fleet sizes in subjects for the evaluation tick, comma-separated",
    )
    parser.add_argument("--no-replay", action="store_true", help="skip the replay benchmark")
    parser.add_argument("--no-fanout", action="store_true", help="skip the scrape fan-out")
    args = parser.parse_args()
    if args.quick:
        args.rounds, args.number, args.fleets, args.subjects = 3, 3, "100", "100,500"
    print(machine())
    ours, theirs = measure(args.rounds, args.number)
    print(f"input: {CAPTURE.name}")
    print(f"ours: {ours * 1e3:.2f} ms/parse, prometheus_client: {theirs * 1e3:.2f} ms/parse")
    print(f"parser speedup vs prometheus_client: {theirs / ours:.1f}x")
    fleets = [int(p) for p in args.fleets.split(",") if p]
    for line in ingest_report(fleets, capture_scrapes=12 if args.quick else 40):
        print(line)
    subjects = [int(n) for n in args.subjects.split(",") if n]
    for line in evaluate_report(subjects, ticks=3 if args.quick else 5):
        print(line)
    print(staggered(subjects[-1], 2 if args.quick else 5).line())
    if not (args.quick or args.no_replay):
        replay, read, span = measure_replay(max(3, args.rounds // 3))
        print(
            f"replay of {span:.0f} s of a 50-model trace (2 s scrapes): {replay:.2f} s, "
            f"{span / replay:.0f} trace-seconds per wall-second"
        )
        print(f"replay time / prometheus_client merely reading the trace: {replay / read:.2f}x")
    if not args.no_fanout:
        if args.quick:
            fanout = run_fanout(
                targets=400, ticks=1, interval_s=6.0, timeout_s=2.0, concurrencies=(32,)
            )
        else:
            fanout = run_fanout(targets=2000, ticks=3, interval_s=10.0, timeout_s=5.0)
        for line in asyncio.run(fanout):
            print(line)


if __name__ == "__main__":
    main()
