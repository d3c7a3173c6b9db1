"""Print benchmark ratios measured in one process: parser speedup and replay throughput.

Run as ``python -m benchmarks.run``. Each subject and its baseline are timed alternately for
several rounds and the medians compared, so the ratio holds on a busy machine where absolute
times do not.
"""

from __future__ import annotations

import argparse
import statistics
import time
import timeit

from benchmarks.bench_parser import CAPTURE, parse_ours, parse_prometheus_client
from benchmarks.bench_replay import build_trace, read_with_prometheus_client, replay_text


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


def main() -> None:
    """Time both parsers and print the ratio."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=9, help="alternating rounds (median taken)")
    parser.add_argument("--number", type=int, default=10, help="parses per round")
    args = parser.parse_args()
    ours, theirs = measure(args.rounds, args.number)
    print(f"input: {CAPTURE.name}")
    print(f"ours: {ours * 1e3:.2f} ms/parse, prometheus_client: {theirs * 1e3:.2f} ms/parse")
    print(f"parser speedup vs prometheus_client: {theirs / ours:.1f}x")
    replay, read, span = measure_replay(max(3, args.rounds // 3))
    print(
        f"replay of {span:.0f} s of a 50-model trace (2 s scrapes): {replay:.2f} s, "
        f"{span / replay:.0f} trace-seconds per wall-second"
    )
    print(f"replay time / prometheus_client merely reading the trace: {replay / read:.2f}x")


if __name__ == "__main__":
    main()
