"""Print the exposition parser's speedup over prometheus_client, timed in one process.

Run as ``python -m benchmarks.run``. Both parsers are timed alternately for several rounds and
the medians compared, so the ratio holds on a busy machine where absolute times do not.
"""

from __future__ import annotations

import argparse
import statistics
import timeit

from benchmarks.bench_parser import CAPTURE, parse_ours, parse_prometheus_client


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


if __name__ == "__main__":
    main()
