"""Calibration of the engine's confidence on the labelled traces: how often each bin is right.

``python -m benchmarks.calibration [DIR ...] [--variants native,10s,...]``

Every trace is replayed under every variant of ``detection_eval``. Each evaluation's findings
on the labelled model are judged: before the onset any finding is wrong (nothing is faulty
yet); from the onset to the end of the fault phase a finding is right when it names the
labelled cause; on a healthy trace every finding is wrong. What follows the fault phase (the
recovery) is not judged. Opened incidents are judged the same way, which is how
``detection_eval`` judges the first one. Findings are binned by confidence, and each bin's
fraction right is set against its mean confidence (a reliability table, with the expected
calibration error). A playbook acting at ``min_confidence`` c sees the incidents opened at c
or above: the recommendation is the lowest bin edge from which at least 95 % of them are right.
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import multiprocessing
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.detection_eval import FIXTURES, VARIANTS, label_configs, traces
from tritonguard.core.engine import Engine, EngineConfig
from tritonguard.core.findings import CAUSES
from tritonguard.core.replay import drive
from tritonguard.core.samples import Sample
from tritonguard.sources.replay import load_trace

DEFAULT_DIRS = (FIXTURES, FIXTURES.parent / "traces_v2" / "tuning")
BINS = 10
TARGET = 0.95
# Confidences are sums of tenths and twentieths: 0.6 may arrive as 0.59999999, which belongs
# in the 0.6 bin and clears a 0.6 bar, as the playbook's comparison would see it at 3 digits.
EPS = 1e-9


@dataclass(frozen=True, slots=True)
class Label:
    """What a trace's labels.json says: the model, its cause (None: healthy) and the phase."""

    model: str
    cause: str | None
    onset: float
    end: float

    @classmethod
    def of(cls, raw: dict[str, Any]) -> Label:
        """Return the label NAME.labels.json holds, parsed."""
        return cls(
            str(raw["model"]),
            raw.get("cause"),
            float(raw.get("onset") or 0.0),
            float(raw.get("end") or math.inf),
        )

    def judge(self, cause: str, at: float) -> bool | None:
        """Whether naming ``cause`` at ``at`` is right; None after the fault phase (not judged)."""
        if at > self.end:
            return None
        return self.cause is not None and at >= self.onset and cause == self.cause


@dataclass(frozen=True, slots=True)
class Point:
    """One judged finding or opened incident."""

    trace: str
    variant: str
    expected: str | None  # the labelled cause; None on a healthy trace
    cause: str
    confidence: float
    at_s: float  # since the onset
    right: bool
    # The most confident finding of its evaluation on its subject (ties as the incident book
    # breaks them): the one an incident would open on, where the others ride as secondary.
    primary: bool = True


@dataclass(frozen=True, slots=True)
class Bin:
    """One confidence bin: ``lo`` <= confidence < ``hi`` (the last bin includes 1.0)."""

    lo: float
    hi: float
    count: int
    right: int
    mean_confidence: float

    @property
    def accuracy(self) -> float:
        """Fraction right."""
        return self.right / self.count if self.count else 0.0


def bin_index(confidence: float, bins: int = BINS) -> int:
    """Return the bin a confidence falls in: bin i spans [i/bins, (i+1)/bins)."""
    return max(0, min(bins - 1, math.floor(confidence * bins + EPS)))


def reliability(points: Iterable[Point], bins: int = BINS) -> list[Bin]:
    """Return the non-empty bins, lowest first."""
    confs: dict[int, list[float]] = {}
    rights: dict[int, int] = {}
    for p in points:
        i = bin_index(p.confidence, bins)
        confs.setdefault(i, []).append(p.confidence)
        rights[i] = rights.get(i, 0) + p.right
    return [
        Bin(i / bins, (i + 1) / bins, len(c), rights[i], sum(c) / len(c))
        for i, c in sorted(confs.items())
    ]


def expected_calibration_error(table: Sequence[Bin]) -> float:
    """Return the count-weighted mean gap between each bin's accuracy and its mean confidence."""
    total = sum(b.count for b in table)
    if not total:
        return 0.0
    return sum(b.count * abs(b.accuracy - b.mean_confidence) for b in table) / total


def wilson_lower(right: int, n: int, z: float = 1.96) -> float:
    """Return the lower end of the 95 % Wilson interval of ``right`` out of ``n``."""
    if n == 0:
        return 0.0
    p = right / n
    centre = p + z * z / (2 * n)
    spread = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return (centre - spread) / (1 + z * z / n)


def at_or_above(points: Sequence[Point], edge: float) -> tuple[int, int]:
    """Return (count, right) of the points with confidence at or above ``edge``."""
    mine = [p for p in points if p.confidence + EPS >= edge]
    return len(mine), sum(p.right for p in mine)


def recommend(points: Sequence[Point], target: float = TARGET, bins: int = BINS) -> float | None:
    """Return the lowest edge of a non-empty bin from which every higher bar keeps ``target``.

    A bar between two bins acts on the same points as the upper bin's edge, so only the edges
    of bins holding points are candidates. None when no edge does (even the top bin is wrong
    too often) or there are no points.
    """
    best: float | None = None
    for i in sorted({bin_index(p.confidence, bins) for p in points}, reverse=True):
        n, right = at_or_above(points, i / bins)
        if right / n < target:
            break
        best = i / bins
    return best


def confusions(points: Iterable[Point], bar: float) -> list[tuple[str, str, int, int]]:
    """Return (labelled, named, count, of them primary) of wrong points at or above ``bar``."""
    counts: dict[tuple[str, str], list[int]] = {}
    for p in points:
        if not p.right and p.confidence + EPS >= bar:
            c = counts.setdefault((p.expected or "healthy", p.cause), [0, 0])
            c[0] += 1
            c[1] += p.primary
    return sorted(((e, n, c, pr) for (e, n), (c, pr) in counts.items()), key=lambda r: -r[2])


@functools.cache
def _trace(path: Path) -> list[Sample]:
    return load_trace(path)


Job = tuple[str, Path, str, float]


def collect(job: Job) -> tuple[list[Point], list[Point]]:
    """Replay one trace under one variant; return its judged findings and opened incidents."""
    name, directory, variant, eval_interval = job
    raw = json.loads((directory / f"{name}.labels.json").read_text())
    label = Label.of(raw)
    engine = Engine(EngineConfig())
    samples = VARIANTS[variant](list(_trace(directory / f"{name}.om.gz")))
    findings: list[Point] = []
    incidents: list[Point] = []
    for t, events in drive(
        engine, samples, eval_interval_s=eval_interval, configs=label_configs(raw)
    ):
        for key, diagnosis in engine.last_diagnoses.items():
            if key[2] != label.model or not diagnosis.findings:
                continue
            top = max(diagnosis.findings, key=lambda f: (f.confidence, -CAUSES.index(f.cause)))
            for f in diagnosis.findings:
                right = label.judge(f.cause, t)
                if right is not None:
                    findings.append(
                        Point(
                            name,
                            variant,
                            label.cause,
                            f.cause,
                            f.confidence,
                            t - label.onset,
                            right,
                            f is top,
                        )
                    )
        for e in events:
            if e.event == "opened" and e.subject.model == label.model:
                right = label.judge(e.cause, e.at)
                if right is not None:
                    incidents.append(
                        Point(
                            name,
                            variant,
                            label.cause,
                            e.cause,
                            e.confidence,
                            e.at - label.onset,
                            right,
                        )
                    )
    return findings, incidents


def reliability_table(points: Sequence[Point]) -> str:
    """Return the markdown reliability table and its expected calibration error."""
    table = reliability(points)
    lines = [
        "| confidence | count | right | fraction right (95 % low) | mean confidence |",
        "|---|---|---|---|---|",
    ]
    for b in table:
        lines.append(
            f"| {b.lo:.1f}–{b.hi:.1f} | {b.count} | {b.right} | {b.accuracy:.2f} "
            f"({wilson_lower(b.right, b.count):.2f}) | {b.mean_confidence:.2f} |"
        )
    lines.append("")
    lines.append(f"Expected calibration error: {expected_calibration_error(table):.3f}")
    return "\n".join(lines)


def bar_table(points: Sequence[Point]) -> str:
    """Return what a playbook would act on at each bar: the lower edges of non-empty bins."""
    lines = [
        "| min_confidence | incidents at or above | right | fraction right (95 % low) |",
        "|---|---|---|---|",
    ]
    for i in sorted({bin_index(p.confidence) for p in points}):
        n, right = at_or_above(points, i / BINS)
        lines.append(
            f"| {i / BINS:.1f} | {n} | {right} | {right / n:.2f} ({wilson_lower(right, n):.2f}) |"
        )
    return "\n".join(lines)


def wrong_table(points: Sequence[Point]) -> str:
    """Return the wrong incidents, most confident first."""
    wrong = sorted((p for p in points if not p.right), key=lambda p: -p.confidence)
    if not wrong:
        return "None."
    lines = [
        "| trace | variant | cause named | confidence | onset → opened |",
        "|---|---|---|---|---|",
    ]
    for p in wrong:
        lines.append(
            f"| {p.trace} | {p.variant} | {p.cause} | {p.confidence:.2f} | {p.at_s:+.0f}s |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Replay, judge and print the tables and the recommended min_confidence."""
    p = argparse.ArgumentParser(prog="python -m benchmarks.calibration", description=__doc__)
    p.add_argument("dirs", nargs="*", type=Path, default=list(DEFAULT_DIRS))
    p.add_argument("--variants", default=",".join(VARIANTS))
    p.add_argument("--processes", type=int, default=2)
    p.add_argument("--eval-interval", type=float, default=1.0)
    args = p.parse_args(argv)
    variants = args.variants.split(",")
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown:
        p.error(f"unknown variants {unknown}; known: {', '.join(VARIANTS)}")
    empty = [str(d) for d in args.dirs if not any(d.glob("*.labels.json"))]
    if empty:
        p.error(f"no labelled traces (NAME.labels.json) in {', '.join(empty)}")
    listed = traces(args.dirs)
    jobs: list[Job] = [(n, d, v, args.eval_interval) for n, d in listed for v in variants]
    findings: list[Point] = []
    incidents: list[Point] = []
    with multiprocessing.Pool(max(1, args.processes)) as pool:
        for f, i in pool.imap(collect, jobs, chunksize=len(variants)):
            findings.extend(f)
            incidents.extend(i)
    print(
        f"{len(listed)} traces ({', '.join(str(d) for d in args.dirs)}) x "
        f"{len(variants)} variants ({', '.join(variants)}).\n"
    )
    print("Findings, one per evaluation and cause:\n")
    print(reliability_table(findings))
    print("\nThe most confident finding of each evaluation only:\n")
    print(reliability_table([f for f in findings if f.primary]))
    print("\nWrong findings at 0.6 or above (labelled cause, cause named):\n")
    print("| labelled | named | findings | of them the most confident |\n|---|---|---|---|")
    for expected, named, count, primary in confusions(findings, 0.6):
        print(f"| {expected} | {named} | {count} | {primary} |")
    print("\nOpened incidents:\n")
    print(reliability_table(incidents))
    print()
    print(bar_table(incidents))
    bar = recommend(incidents)
    n, right = at_or_above(incidents, 0.6)
    print(
        f"\nLowest min_confidence with ≥ {TARGET:.0%} of incidents right at every higher bar: "
        f"{'none' if bar is None else f'{bar:.1f}'}; at the shipped 0.6, {right} of {n} right."
    )
    print("\nWrong incidents:\n")
    print(wrong_table(incidents))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
