"""Score the engine on labelled traces: right, wrong or silent, and time to diagnosis, per variant.

``python -m benchmarks.detection_eval [DIR ...] [--variants native,10s,30s,triton-only]``

Each trace ``NAME.om.gz`` needs ``NAME.labels.json`` (as the fault lab records them: ``cause``
or null for a healthy control, ``model``, ``onset``). A fault trace is *right* when the first
incident on its model is its cause, opened at or after the onset; *wrong* when the first is
another cause or opens before the onset; *silent* when nothing opens. A healthy trace is right
when nothing opens on its model. Variants resample or strip the trace the way other servers
would show the same run: a coarser scrape interval, Triton's own series only, no summaries.

The lab's config reads (``configs`` in the labels) reach the engine as the daemon's reads of
the repository API would (``recorded_configs.py``), in every variant: the configs come from
Triton's API, not from any exporter.
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tritonguard.core.engine import Engine, EngineConfig
from tritonguard.core.findings import IncidentEvent, Subject
from tritonguard.core.recorded_configs import ConfigRead, RecordedConfigs
from tritonguard.core.replay import drive
from tritonguard.core.samples import Sample
from tritonguard.sources.replay import load_trace

FIXTURES = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "traces"

Variant = Callable[[list[Sample]], list[Sample]]


def resampled(interval: float) -> Variant:
    """Keep the scrapes a Prometheus scraping every ``interval`` seconds would have kept."""

    def apply(samples: list[Sample]) -> list[Sample]:
        ordered = sorted(samples, key=lambda s: s.timestamp or 0.0)
        keep: set[int] = set()
        nxt: float | None = None
        for t in sorted({round(s.timestamp or 0.0) for s in ordered}):
            if nxt is None or t >= nxt:
                keep.add(t)
                nxt = t + interval
        return [s for s in ordered if round(s.timestamp or 0.0) in keep]

    return apply


def triton_only(samples: list[Sample]) -> list[Sample]:
    """Drop every exporter but Triton's own (no DCGM, cAdvisor, node, kube-state, ingress)."""
    return [s for s in samples if s.name.startswith("nv_")]


def no_summaries(samples: list[Sample]) -> list[Sample]:
    """Drop Triton's summary latencies (its default: summaries are opt-in)."""
    return [s for s in samples if "_summary_us" not in s.name]


VARIANTS: dict[str, Variant] = {
    "native": lambda s: s,
    "10s": resampled(10.0),
    "15s": resampled(15.0),
    "30s": resampled(30.0),
    "triton-only": triton_only,
    "no-summaries": no_summaries,
}


@dataclass(frozen=True, slots=True)
class Score:
    """How the engine did on one trace under one variant."""

    trace: str
    variant: str
    expected: str | None
    verdict: str  # right | wrong | silent | false-alarm
    got: str | None
    delay_s: float | None
    # The recording's own scrape interval, whatever the variant resampled it to.
    interval_s: float = 0.0

    def line(self) -> str:
        """Return the table row."""
        delay = "" if self.delay_s is None else f"{self.delay_s:+.0f}s"
        return (
            f"| {self.trace} | {self.variant} | {self.expected or 'healthy'} | {self.verdict} | "
            f"{self.got or '-'} | {delay} |"
        )


DEADLINE_S = 60.0


def score(
    name: str,
    directory: Path,
    variant: str,
    config: EngineConfig | None = None,
    eval_interval_s: float = 1.0,
) -> Score:
    """Replay one trace under one variant and judge the first incident on its model."""
    label = json.loads((directory / f"{name}.labels.json").read_text())
    samples = VARIANTS[variant](list(load_trace(directory / f"{name}.om.gz")))
    engine = Engine(config or EngineConfig())
    events: list[IncidentEvent] = []
    reads = label_configs(label)
    for _, evs in drive(engine, samples, eval_interval_s=eval_interval_s, configs=reads):
        events.extend(evs)
    model, cause = label["model"], label.get("cause")
    onset = float(label.get("onset") or 0.0)
    interval = float(label.get("scrape_interval_s") or 0.0)
    opened = [e for e in events if e.event == "opened" and e.subject.model == model]
    if cause is None:
        verdict = "false-alarm" if opened else "right"
        first = opened[0] if opened else None
        return Score(name, variant, None, verdict, first.cause if first else None, None, interval)
    if not opened:
        return Score(name, variant, cause, "silent", None, None, interval)
    first = opened[0]
    if first.cause != cause or first.at < onset:
        return Score(name, variant, cause, "wrong", first.cause, first.at - onset, interval)
    stretched = {"10s": 10.0, "15s": 15.0, "30s": 30.0}.get(variant, interval)
    late = first.at - onset > DEADLINE_S + max(interval, stretched)
    verdict = "late" if late else "right"
    return Score(name, variant, cause, verdict, first.cause, first.at - onset, interval)


def label_configs(label: dict[str, Any]) -> RecordedConfigs:
    """Return the config reads a trace's labels hold (none for a recording without them)."""
    return RecordedConfigs(
        ConfigRead(
            float(read["at"]),
            Subject(str(read["namespace"]), str(read["model"]), str(read["pod"])),
            read["config"],
        )
        for read in label.get("configs") or ()
    )


def traces(directories: Iterable[Path]) -> list[tuple[str, Path]]:
    """Return (name, directory) of every labelled trace in ``directories``."""
    out = []
    for directory in directories:
        for path in sorted(directory.glob("*.labels.json")):
            out.append((path.name.removesuffix(".labels.json"), directory))
    return out


VERDICTS = ("right", "late", "wrong", "silent", "false-alarm")


def _counts(scores: list[Score]) -> dict[str, int]:
    """Return how many scores have each verdict."""
    return {v: sum(1 for s in scores if s.verdict == v) for v in VERDICTS}


def p90(ordered: list[float]) -> float:
    """Return the nearest-rank 90th percentile of sorted values: the ceil(0.9 n)-th of n.

    The smallest value that at least 90 % of the values do not exceed. In integers, since
    0.9 n in floating point may land a hair above a whole rank (ten values: the ninth).
    """
    return ordered[(9 * len(ordered) + 9) // 10 - 1]


def _delays(scores: list[Score]) -> tuple[float | None, float | None]:
    """Return the median and the nearest-rank p90 of the right diagnoses' delays."""
    delays = sorted(s.delay_s for s in scores if s.verdict == "right" and s.delay_s is not None)
    if not delays:
        return None, None
    return statistics.median(delays), p90(delays)


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f}s"


def summary(scores: list[Score]) -> str:
    """Return counts and delay percentiles of the right diagnoses, per variant."""
    lines = []
    for variant in sorted({s.variant for s in scores}):
        mine = [s for s in scores if s.variant == variant]
        counts = _counts(mine)
        alarms = counts["false-alarm"]
        med, p90 = _delays(mine)
        lines.append(
            f"{variant}: {counts['right']}/{len(mine)} right, {counts['late']} late, "
            f"{counts['wrong']} wrong, "
            f"{counts['silent']} silent, {alarms} false alarms; delay median "
            f"{_seconds(med)}, p90 {_seconds(p90)}"
        )
    return "\n".join(lines)


def by_interval(scores: list[Score]) -> str:
    """Return the native variant's verdicts and delays per recorded scrape interval.

    The goal is set per scrape interval (at 2 s: median 10 s and p90 20 s after onset), and
    the native variant mixes every interval the traces were recorded at; this splits it.
    "right" counts healthy traces that stayed quiet, as in the summary.
    """
    native = [s for s in scores if s.variant == "native"]
    lines = [
        "| native scrape | traces (faults) | right | late | wrong | silent | false alarms "
        "| median delay | p90 delay |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for interval in sorted({s.interval_s for s in native}):
        mine = [s for s in native if s.interval_s == interval]
        count = _counts(mine)
        faults = sum(1 for s in mine if s.expected is not None)
        med, p90 = _delays(mine)
        lines.append(
            f"| {interval:g} s | {len(mine)} ({faults}) | "
            + " | ".join(str(count[v]) for v in VERDICTS)
            + f" | {_seconds(med)} | {_seconds(p90)} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Print the table and the summary."""
    p = argparse.ArgumentParser(prog="python -m benchmarks.detection_eval", description=__doc__)
    p.add_argument("dirs", nargs="*", type=Path, default=[FIXTURES])
    p.add_argument("--variants", default="native,10s,30s,triton-only,no-summaries")
    p.add_argument(
        "--eval-interval",
        type=float,
        default=1.0,
        help="evaluate at each scrape, at most every S seconds of trace time (as replay does)",
    )
    args = p.parse_args(argv)
    config = EngineConfig()
    scores = [
        score(name, directory, variant, config, args.eval_interval)
        for name, directory in traces(args.dirs)
        for variant in args.variants.split(",")
    ]
    print("| trace | variant | cause | verdict | first incident | onset → opened |")
    print("|---|---|---|---|---|---|")
    for s in scores:
        print(s.line())
    print()
    print(summary(scores))
    if any(s.variant == "native" for s in scores):
        print()
        print(by_interval(scores))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
