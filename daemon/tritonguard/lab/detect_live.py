"""Measure live detection per cause: each scenario on a real Triton, watched directly and via Prometheus.

    python -m tritonguard.lab.detect_live [--only NAME...] [--baseline 60] [--fault 60]
        [--controls] [--json results.json]

Each scenario runs with its recorded rates and costs (onset after ``--baseline`` s, fault phase
at most ``--fault`` s, ended 5 s after both ways diagnosed it), one at a time so they do not
disturb each other. Prints a Markdown table: detected or not, and seconds from onset to the
incident, for the daemon scraping directly and for the daemon reading a real Prometheus.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from tritonguard.core.findings import CAUSES
from tritonguard.lab.live_lab import WAYS, Outcome, retimed, run_live, sigterm_as_interrupt
from tritonguard.lab.scenarios import SCENARIOS
from tritonguard.logs import configure_logging

CONTROLS: tuple[str, ...] = ("healthy_steady", "healthy_ramp", "healthy_warmup_deploy")


def cell(outcome: Outcome, way: str) -> str:
    """Return one table cell: ``yes, 18 s`` / ``no`` (with any wrong incident named)."""
    found = outcome.detections.get(way)
    others = outcome.other.get(way, [])
    onset = outcome.onset_at
    wrong = ", ".join(
        f"{e.cause} {e.at - onset:+.0f} s" if onset is not None else e.cause for e in others
    )
    if outcome.cause is None:
        return f"opened {wrong}" if others else "nothing opened"
    text = f"yes, {found.delay_s:.0f} s" if found else "no"
    return f"{text} (also: {wrong})" if wrong else text


def table(outcomes: Sequence[Outcome], scrape_intervals: dict[str, float]) -> str:
    """Return the Markdown results table."""
    lines = [
        "| scenario | cause | scrape interval | direct scrape | via Prometheus |",
        "|---|---|---|---|---|",
    ]
    for o in outcomes:
        lines.append(
            f"| `{o.name}` | {f'`{o.cause}`' if o.cause else 'healthy'} | "
            f"{scrape_intervals[o.name]:.0f} s | {cell(o, 'scrape')} | {cell(o, 'prometheus')} |"
        )
    return "\n".join(lines)


async def measure(
    names: Sequence[str], baseline_s: float, fault_s: float, json_path: Path | None
) -> list[Outcome]:
    """Run each scenario in turn; print and save each result as it comes."""
    outcomes: list[Outcome] = []
    for name in names:
        started = time.time()
        scenario = retimed(SCENARIOS[name], baseline_s, fault_s)
        (outcome,) = await run_live([scenario], ways=WAYS)
        outcomes.append(outcome)
        print(
            f"{name}: direct {cell(outcome, 'scrape')}; prometheus {cell(outcome, 'prometheus')}"
            f" ({time.time() - started:.0f} s)",
            flush=True,
        )
        if json_path is not None:
            text = json.dumps([o.as_dict() for o in outcomes], indent=2) + "\n"
            await asyncio.to_thread(json_path.write_text, text)
    return outcomes


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; exit 0 when every fault was detected both ways and no control opened."""
    p = argparse.ArgumentParser(prog="python -m tritonguard.lab.detect_live", description=__doc__)
    p.add_argument("--only", nargs="+", metavar="NAME", help="scenario names (default: the nine)")
    p.add_argument("--controls", action="store_true", help="also run the three healthy controls")
    p.add_argument("--baseline", type=float, default=60.0, help="seconds before onset")
    p.add_argument("--fault", type=float, default=60.0, help="longest fault phase, seconds")
    p.add_argument("--json", type=Path, help="write the results here as they come")
    args = p.parse_args(argv)
    names = list(args.only or CAUSES) + (list(CONTROLS) if args.controls else [])
    unknown = [n for n in names if n not in SCENARIOS]
    if unknown:
        print(f"detect_live: unknown scenario {unknown[0]!r}", file=sys.stderr)
        return 2
    configure_logging("console", "error")
    try:
        with sigterm_as_interrupt():
            outcomes = asyncio.run(measure(names, args.baseline, args.fault, args.json))
    except KeyboardInterrupt:
        print("detect_live: interrupted; every server it started is stopped", file=sys.stderr)
        return 130
    intervals = {n: SCENARIOS[n].scrape_interval_s for n in names}
    print(table(outcomes, intervals))
    ok = all(
        (o.cause is None and not any(o.other.values()))
        or (o.cause is not None and all(w in o.detections for w in WAYS))
        for o in outcomes
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
