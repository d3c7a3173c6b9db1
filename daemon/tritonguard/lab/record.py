"""Record lab scenarios into trace fixtures: ``python -m tritonguard.lab.record --out DIR``.

``--set v1`` (default) is ``scenarios.SCENARIOS``; ``--set v2`` is one part of
``scenarios_v2``: ``--part tuning`` (default), or a held-out part (``held_out``,
``held_out_3`` to ``held_out_10``, ``pressure_held_out``), recorded only when asked for, after
the engine's thresholds are frozen.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
import time
from pathlib import Path

from tritonguard.lab.recorder import load_raw, write_trace
from tritonguard.lab.scenario_runner import Scenario, run_scenario, scaled
from tritonguard.lab.scenarios import SCENARIOS
from tritonguard.lab.scenarios_v2 import PARTS, TUNING


def _parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m tritonguard.lab.record", description=__doc__)
    parser.add_argument(
        "--out", type=Path, required=True, help="directory for .om.gz and .labels.json"
    )
    parser.add_argument("--only", nargs="*", default=None, help="scenario names (default: all)")
    parser.add_argument(
        "--set", dest="set_name", choices=("v1", "v2"), default="v1", help="scenario set"
    )
    parser.add_argument(
        "--part",
        choices=tuple(PARTS),
        default=TUNING,
        help="part of the v2 set (default: tuning)",
    )
    parser.add_argument(
        "--raw", type=Path, default=None, help="also keep raw scrapes and server logs here"
    )
    parser.add_argument(
        "--scale",
        type=float,
        default=1.0,
        help="multiply phase durations (e.g. 0.2 for a smoke run)",
    )
    parser.add_argument(
        "--convert",
        action="store_true",
        help="only convert raw scrapes in --raw into traces in --out",
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Run the selected scenarios one after another and write their fixtures."""
    args = _parse(argv)
    if args.convert:
        if args.raw is None:
            print("error: --convert needs --raw DIR holding *.scrapes.jsonl.gz", file=sys.stderr)
            return 2
        for raw in sorted(args.raw.glob("*.scrapes.jsonl.gz")):
            name = raw.name.removesuffix(".scrapes.jsonl.gz")
            count = write_trace(load_raw(raw), args.out / f"{name}.om.gz")
            print(f"{name}: {count} samples")
        return 0
    known: dict[str, Scenario] = SCENARIOS if args.set_name == "v1" else PARTS[args.part]
    names = args.only or list(known)
    unknown = [n for n in names if n not in known]
    if unknown:
        print(
            f"error: unknown scenario(s) {', '.join(unknown)}; known: {', '.join(known)}",
            file=sys.stderr,
        )
        return 2
    # SIGTERM unwinds like Ctrl-C, so servers, exporters and hogs are stopped on the way out.
    signal.signal(signal.SIGTERM, _interrupt)
    failed = []
    for name in names:
        scenario = known[name]
        if args.scale != 1.0:
            scenario = scaled(scenario, args.scale)
        began = time.monotonic()
        try:
            labels = asyncio.run(run_scenario(scenario, args.out, raw_dir=args.raw))
        except Exception as exc:  # one broken scenario must not cost the others their recording
            failed.append(name)
            print(f"{name}: FAILED ({type(exc).__name__}: {exc})", flush=True)
            continue
        took = time.monotonic() - began
        print(f"{name}: recorded in {took:.0f} s, load {labels['load']}", flush=True)
    return 1 if failed else 0


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


if __name__ == "__main__":
    sys.exit(main())
