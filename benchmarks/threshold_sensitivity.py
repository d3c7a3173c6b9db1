"""Replay the labelled traces with each threshold 10 % lower and higher; report what flips.

``python -m benchmarks.threshold_sensitivity [DIR ...] [--all-variants] [--only NAME,...]``

A threshold whose ±10 % changes a verdict (right to wrong, silent or late, or a healthy trace
raising a false alarm) is tuned to the traces rather than to its mechanism; one that flips
nothing at ±10 % has margin. Every numeric field of ``Thresholds`` is scaled by 0.9 and 1.1
with all others at their defaults; integer counts (a ±10 % step leaves them unchanged) move by
one instead. Each run is judged by ``detection_eval.score``, as the evaluation table is, and
compared trace by trace with the run at the defaults. By default the native and 10 s variants
run (``--all-variants``: every variant of ``detection_eval``), over two processes.
"""

from __future__ import annotations

import argparse
import functools
import multiprocessing
import statistics
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from benchmarks import detection_eval
from benchmarks.detection_eval import FIXTURES, VARIANTS, Score, score, traces
from tritonguard.core.engine import EngineConfig
from tritonguard.core.samples import Sample
from tritonguard.core.thresholds import Thresholds
from tritonguard.sources.replay import load_trace

DEFAULT_DIRS = (FIXTURES, FIXTURES.parent / "traces_v2" / "tuning")
DEFAULT_VARIANTS = ("native", "10s")
STEP = 0.1

Overrides = dict[str, float]


@dataclass(frozen=True, slots=True)
class Perturbation:
    """One threshold and the values tried below and above its default (None: none valid)."""

    name: str
    default: float
    low: float | None
    high: float | None
    integer: bool


def _valid(name: str, value: float) -> bool:
    try:
        Thresholds.model_validate({name: value})
    except ValidationError:
        return False
    return True


def perturbations(base: Thresholds | None = None, step: float = STEP) -> list[Perturbation]:
    """Return every numeric threshold with its lower and higher value, in declaration order."""
    base = base or Thresholds()
    out = []
    for name in Thresholds.model_fields:
        value = getattr(base, name)
        if isinstance(value, bool) or not isinstance(value, int | float):
            continue  # the optional SLOs are unset by default: nothing to scale
        integer = isinstance(value, int)
        low, high = (value - 1, value + 1) if integer else (value * (1 - step), value * (1 + step))
        out.append(
            Perturbation(
                name,
                value,
                low if low != value and _valid(name, low) else None,
                high if high != value and _valid(name, high) else None,
                integer,
            )
        )
    return out


@dataclass(frozen=True, slots=True)
class Change:
    """One trace under one variant whose verdict differs from the run at the defaults."""

    trace: str
    variant: str
    before: str
    after: str
    got: str | None


def changes(default: Iterable[Score], perturbed: Iterable[Score]) -> list[Change]:
    """Return the (trace, variant) pairs whose verdict or named cause differs from the default.

    A right verdict always names the expected cause, so a change of cause alone can only be
    between two wrong answers (or two false alarms); it is reported too.
    """
    base = {(s.trace, s.variant): s for s in default}
    out = []
    for s in perturbed:
        b = base.get((s.trace, s.variant))
        if b is not None and (b.verdict, b.got) != (s.verdict, s.got):
            out.append(Change(s.trace, s.variant, b.verdict, s.verdict, s.got))
    return out


def worse(c: Change) -> bool:
    """Whether a change loses a right answer or names a wrong cause where there was none."""
    wrong = ("wrong", "false-alarm")
    return (c.before == "right" and c.after != "right") or (
        c.after in wrong and c.before not in wrong
    )


def _median_delays(scores: Iterable[Score]) -> dict[str, float]:
    delays: dict[str, list[float]] = {}
    for s in scores:
        if s.verdict == "right" and s.delay_s is not None:
            delays.setdefault(s.variant, []).append(s.delay_s)
    return {v: statistics.median(d) for v, d in delays.items()}


def describe(
    found: Sequence[Change],
    variants: Sequence[str],
    default: Iterable[Score] = (),
    perturbed: Iterable[Score] = (),
) -> str:
    """Return a table cell: the flips, grouped by trace and outcome, or "stable".

    A flip seen under every variant run is named once; otherwise its variants follow it. A
    median time to the right diagnosis that moved by a second or more is appended.
    """
    groups: dict[tuple[str, str, str, str | None], list[str]] = {}
    for c in found:
        groups.setdefault((c.trace, c.before, c.after, c.got), []).append(c.variant)
    parts = []
    for (trace, before, after, got), vs in groups.items():
        what = after.replace("-", " ") + (
            f" ({got})" if got and after in ("wrong", "false-alarm") else ""
        )
        where = "" if set(vs) >= set(variants) else f" [{', '.join(vs)}]"
        parts.append(f"{trace} {before.replace('-', ' ')} → {what}{where}")
    cell = "; ".join(parts) if parts else "stable"
    was, now = _median_delays(default), _median_delays(perturbed)
    moved = [
        f"{v} {was[v]:.0f}→{now[v]:.0f} s"
        for v in variants
        if v in was and v in now and abs(now[v] - was[v]) >= 1.0
    ]
    if moved:
        cell += f" (median {', '.join(moved)})"
    return cell


@functools.cache
def _cached_trace(path: Path) -> list[Sample]:
    return load_trace(path)


def _cached_load(path: str | Path) -> list[Sample]:
    return _cached_trace(Path(path))


def _worker_init() -> None:
    # Every run replays the same traces: parsing them is about half of a run's time, so each
    # worker parses a trace once. score() copies the list before a variant filters it.
    # (setattr: the module imports load_trace without re-exporting it.)
    setattr(detection_eval, "load_trace", _cached_load)  # noqa: B010


Job = tuple[str, Overrides, tuple[tuple[str, Path], ...], tuple[str, ...], float]


def run(job: Job) -> tuple[str, list[Score]]:
    """Score every trace under every variant with the job's thresholds; return its key too."""
    key, overrides, listed, variants, eval_interval = job
    config = EngineConfig(thresholds=Thresholds.model_validate(overrides))
    return key, [
        score(name, directory, variant, config, eval_interval)
        for name, directory in listed
        for variant in variants
    ]


def _fmt(value: float) -> str:
    return f"{value:g}"


def table(
    found: Sequence[Perturbation],
    results: dict[str, list[Score]],
    variants: Sequence[str],
) -> str:
    """Return the markdown table: threshold, default, effect of the lower and higher value."""
    default = results["default"]
    lines = [
        "| threshold | default | −10 % | +10 % |",
        "|---|---|---|---|",
    ]
    for p in found:
        cells = []
        for side, value in (("low", p.low), ("high", p.high)):
            if value is None:
                cells.append("n/a (no valid value)" if p.default else "n/a (0)")
                continue
            scores = results[f"{p.name}:{side}"]
            step = f"{_fmt(value)}: " if p.integer else ""
            cells.append(step + describe(changes(default, scores), variants, default, scores))
        dflt = f"{_fmt(p.default)} (±1)" if p.integer else _fmt(p.default)
        lines.append(f"| `{p.name}` | {dflt} | {cells[0]} | {cells[1]} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Run the default and every perturbed configuration; print the table."""
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.threshold_sensitivity", description=__doc__
    )
    p.add_argument("dirs", nargs="*", type=Path, default=list(DEFAULT_DIRS))
    p.add_argument("--all-variants", action="store_true", help="every detection_eval variant")
    p.add_argument("--variants", help="comma-separated variants (overrides --all-variants)")
    p.add_argument("--only", help="comma-separated threshold names (default: all)")
    p.add_argument("--step", type=float, default=STEP, help="relative step (default 0.1)")
    p.add_argument("--processes", type=int, default=2)
    p.add_argument("--eval-interval", type=float, default=1.0)
    args = p.parse_args(argv)
    if args.variants:
        variants = tuple(args.variants.split(","))
    else:
        variants = tuple(VARIANTS) if args.all_variants else DEFAULT_VARIANTS
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown:
        p.error(f"unknown variants {unknown}; known: {', '.join(VARIANTS)}")
    found = perturbations(step=args.step)
    if args.only:
        wanted = set(args.only.split(","))
        if wanted - {x.name for x in found}:
            p.error(f"not numeric thresholds: {sorted(wanted - {x.name for x in found})}")
        found = [x for x in found if x.name in wanted]
    empty = [str(d) for d in args.dirs if not any(d.glob("*.labels.json"))]
    if empty:
        p.error(f"no labelled traces (NAME.labels.json) in {', '.join(empty)}")
    listed = tuple(traces(args.dirs))
    jobs: list[Job] = [("default", {}, listed, variants, args.eval_interval)]
    for x in found:
        for side, value in (("low", x.low), ("high", x.high)):
            if value is not None:
                jobs.append(
                    (f"{x.name}:{side}", {x.name: value}, listed, variants, args.eval_interval)
                )
    results: dict[str, list[Score]] = {}
    with multiprocessing.Pool(max(1, args.processes), initializer=_worker_init) as pool:
        for i, (key, scores) in enumerate(pool.imap_unordered(run, jobs), 1):
            results[key] = scores
            print(f"[{i}/{len(jobs)}] {key}", file=sys.stderr, flush=True)
    print(
        f"{len(listed)} traces ({', '.join(str(d) for d in args.dirs)}), "
        f"variants {', '.join(variants)}; integer counts move by one.\n"
    )
    print(table(found, results, variants))
    tried = [k for k in results if k != "default"]
    flips = [k for k in tried if any(worse(c) for c in changes(results["default"], results[k]))]
    print(f"\n{len(flips)} of {len(tried)} steps make a verdict worse than at the defaults.")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
