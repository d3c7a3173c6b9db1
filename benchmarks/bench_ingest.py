"""Ingest (parse + store) in samples per CPU-second, against a bare split loop over the same text.

The machine these run on is shared, so each measurement alternates the subject with its
baseline on the same input and reports the ratio next to the absolute numbers. CPU time
(``time.process_time``) is what counts: wall time on a busy machine says little.

- ``capture``: the real 50-model Triton exposition, its counters advanced every scrape, read
  by ``TargetIngest`` (the fused path) and by parse_exposition + relabel + add_many (what
  the scrape source does today), against the split loop and prometheus_client's parser.
- ``fleet``: generated fleets (``benchmarks.fleet_gen``), every target of every scrape read
  into one store; the first scrape (every series new) is reported on its own.
"""

from __future__ import annotations

import gc
import itertools
import resource
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from benchmarks.bench_parser import CAPTURE
from benchmarks.fleet_gen import Fleet, FleetSpec
from tritonguard.core.exposition import SeriesCache, parse_exposition
from tritonguard.core.metric_names import is_consumed, is_counter
from tritonguard.core.samples import Labels, Sample
from tritonguard.core.scrape_ingest import TargetIngest, relabelled
from tritonguard.core.series_store import SeriesStore

TARGET: Labels = (("instance", "10.0.0.1:8002"), ("namespace", "ml"), ("pod", "triton-0"))
INTERVAL = 10.0


def split_loop(text: str) -> int:
    """Baseline: split the text into lines and convert each sample line's last token."""
    n = 0
    for line in text.split("\n"):
        if line and line[0] != "#":
            float(line.rpartition(" ")[2])
            n += 1
    return n


def prometheus_client_read(text: str) -> int:
    """Baseline: prometheus_client's text parser, consuming every sample."""
    return sum(len(family.samples) for family in text_string_to_metric_families(text))


def advanced_captures(scrapes: int) -> list[str]:
    """Return the 50-model capture at ``scrapes`` successive scrapes: counters grow, gauges stay."""
    base = CAPTURE.read_text().split("\n")
    texts = []
    for k in range(scrapes):
        lines = []
        for line in base:
            if not line or line[0] == "#":
                lines.append(line)
                continue
            head, _, raw = line.rpartition(" ")
            if is_counter(head.partition("{")[0]):
                raw = str(int(float(raw)) + 7 * k)
            lines.append(f"{head} {raw}")
        texts.append("\n".join(lines))
    return texts


def reference_ingest(store: SeriesStore, text: str, t: float, labels: Labels = TARGET) -> None:
    """Ingest as the scrape source does today: parse, relabel every sample, keep, add."""
    samples = [
        Sample(s.name, relabelled(s.labels, labels, honor_labels=False), s.value, s.timestamp)
        for s in parse_exposition(text, default_timestamp=t).samples
        if is_consumed(s.name)
    ]
    store.add_many(samples, t)


def cpu(fn: Callable[[], object]) -> float:
    """CPU seconds one call of ``fn`` takes."""
    started = time.process_time()
    fn()
    return time.process_time() - started


@dataclass
class Measured:
    """Median CPU seconds per exposition for a subject and its baseline, and the sample count."""

    subject_s: float
    baseline_s: float
    samples: int

    @property
    def rate(self) -> float:
        """Samples per CPU-second of the subject."""
        return self.samples / self.subject_s

    @property
    def baseline_rate(self) -> float:
        """Samples per CPU-second of the baseline."""
        return self.samples / self.baseline_s

    @property
    def ratio(self) -> float:
        """Subject time over baseline time (1.0: as fast as the split loop)."""
        return self.subject_s / self.baseline_s


def measure_capture(scrapes: int = 40, *, fused: bool = True) -> Measured:
    """Ingest the advancing 50-model capture ``scrapes`` times, alternating with the baseline."""
    texts = advanced_captures(scrapes + 1)
    store = SeriesStore()
    ingest = TargetIngest(store, extra_labels=TARGET, cache=SeriesCache())
    subject: list[float] = []
    baseline: list[float] = []
    samples = split_loop(texts[0])
    for k, text in enumerate(texts):
        t = 1_700_000_000.0 + INTERVAL * k
        read = (
            (lambda: ingest.ingest(text, t))  # noqa: B023  # called at once
            if fused
            else (lambda: reference_ingest(store, text, t))  # noqa: B023
        )
        spent = cpu(read)
        if k == 0:
            continue  # the first scrape meets every series new; steady state is measured
        subject.append(spent)
        baseline.append(cpu(lambda: split_loop(text)))  # noqa: B023
    return Measured(statistics.median(subject), statistics.median(baseline), samples)


def measure_prometheus_client(rounds: int = 3) -> Measured:
    """prometheus_client's parser on the capture, against the split loop."""
    text = CAPTURE.read_text()
    subject = [cpu(lambda: prometheus_client_read(text)) for _ in range(rounds)]
    baseline = [cpu(lambda: split_loop(text)) for _ in range(rounds)]
    return Measured(statistics.median(subject), statistics.median(baseline), split_loop(text))


@dataclass
class FleetMeasured:
    """One fleet: steady-state scrapes, the first scrape, and the memory held."""

    pods: int
    targets: int
    steady: Measured
    first_scrape_s: float
    first_samples: int
    series: int
    rss_mb: float


# Steady scrapes measured per fleet. A target's reader settles over its first scrapes: it
# learns the layout (scrape 1), compares the next exposition whole (2) and, where most
# lines change every scrape, reads line by line for STEADY_WAIT scrapes before trying
# again; the median of 12 falls among the settled ones, as a long-running daemon's do.
FLEET_SCRAPES = 12


def measure_fleet(
    pods: int, scrapes: int = FLEET_SCRAPES, *, exporters: bool = True
) -> FleetMeasured:
    """Ingest ``scrapes`` steady scrapes of a generated fleet (after a first, cold one)."""
    fleet = Fleet(FleetSpec(pods=pods, exporters=exporters))
    store = SeriesStore()
    cache = SeriesCache()
    ingesters = {
        target.name: TargetIngest(
            store,
            extra_labels=target.labels,
            honor_labels=target.honor_labels,
            source=target.name,
            cache=cache,
        )
        for target in fleet.targets
    }
    first_s = 0.0
    first_samples = 0
    subject: list[float] = []
    baseline: list[float] = []
    samples = 0
    for k, (t, texts) in enumerate(fleet.scrape_many(scrapes + 1)):
        gc.collect()
        spent = cpu(lambda: _ingest_all(ingesters, texts, t))  # noqa: B023  # called at once
        count = sum(split_loop(text) for text in texts.values())
        if k == 0:
            first_s, first_samples = spent, count
            continue
        subject.append(spent)
        baseline.append(cpu(lambda: [split_loop(text) for text in texts.values()]))  # noqa: B023
        samples = count
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return FleetMeasured(
        pods=pods,
        targets=len(ingesters),
        steady=Measured(statistics.median(subject), statistics.median(baseline), samples),
        first_scrape_s=first_s,
        first_samples=first_samples,
        series=len(store),
        rss_mb=rss,
    )


def _ingest_all(ingesters: dict[str, TargetIngest], texts: dict[str, str], t: float) -> None:
    for name, text in texts.items():
        ingesters[name].ingest(text, t)


def format_measured(label: str, m: Measured, baseline: str = "split loop") -> str:
    """One line: absolute rate, the baseline's, and the ratio."""
    return (
        f"{label}: {m.rate / 1e6:.2f} M samples/CPU-s ({m.subject_s / m.samples * 1e9:.0f} ns "
        f"a sample); {baseline} {m.baseline_rate / 1e6:.2f} M/CPU-s; "
        f"time {m.ratio:.2f}x the {baseline}'s"
    )


def report(fleets: Sequence[int], *, capture_scrapes: int = 40) -> list[str]:
    """Measure everything and return the report lines."""
    lines = [f"input: {CAPTURE.name} ({split_loop(CAPTURE.read_text())} samples a scrape)"]
    fused = measure_capture(capture_scrapes)
    lines.append(format_measured("fused ingest (TargetIngest)", fused))
    reference = measure_capture(max(5, capture_scrapes // 4), fused=False)
    lines.append(format_measured("parse_exposition + relabel + add_many", reference))
    client = measure_prometheus_client()
    lines.append(format_measured("prometheus_client parser alone", client))
    lines.append(
        f"fused ingest vs today's path: {reference.subject_s / fused.subject_s:.1f}x faster"
    )
    measured = []
    for pods in fleets:
        m = measure_fleet(pods)
        measured.append(m)
        lines.append(
            format_measured(
                f"fleet {pods} pods x 20 models ({m.targets} targets, {m.steady.samples} samples "
                "a scrape), steady",
                m.steady,
            )
        )
        lines.append(
            f"  first scrape (all {m.series} series new): {m.first_scrape_s:.2f} CPU-s, "
            f"{m.first_samples / m.first_scrape_s / 1e3:.0f} k samples/CPU-s; peak RSS "
            f"{m.rss_mb:.0f} MB"
        )
    if len(measured) >= 2:
        small, large = measured[0], measured[-1]
        per_small = small.steady.subject_s / small.steady.samples
        per_large = large.steady.subject_s / large.steady.samples
        base_small = small.steady.baseline_s / small.steady.samples
        base_large = large.steady.baseline_s / large.steady.samples
        lines.append(
            f"linearity: cost a sample at {large.pods} pods / at {small.pods} pods = "
            f"{per_large / per_small:.2f} (split loop: {base_large / base_small:.2f})"
        )
    return lines


def test_bench_fused_ingest(benchmark: Any) -> None:
    """Time the fused ingest of one steady 50-model scrape."""
    texts = advanced_captures(2)
    store = SeriesStore()
    ingest = TargetIngest(store, extra_labels=TARGET, cache=SeriesCache())
    ingest.ingest(texts[0], 0.0)
    clock = itertools.count(1)
    benchmark(lambda: ingest.ingest(texts[1], 10.0 * next(clock)))
    assert len(store) > 2000


def test_bench_split_loop_baseline(benchmark: Any) -> None:
    """Time the split-loop baseline on the same capture."""
    text = CAPTURE.read_text()
    assert benchmark(split_loop, text) > 2000
