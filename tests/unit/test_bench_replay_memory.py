"""The replay-streams benchmark's fleet trace: what its figures in docs/benchmarks.md rest on."""

from __future__ import annotations

import gzip
from pathlib import Path

from benchmarks.bench_replay_memory import write_fleet_trace
from benchmarks.fleet_gen import START, Fleet, FleetSpec
from tritonguard.core.trace_writer import family_of
from tritonguard.sources.replay import load_trace

SPEC = FleetSpec(pods=2, models=2)
SCRAPES = 3


def test_fleet_trace_is_what_render_trace_writes_whatever_the_budgets(tmp_path: Path) -> None:
    """The bounded-memory writer gives ``Fleet.trace``'s text byte for byte.

    With budgets of one value, every scrape is a chunk of its own and every label group a
    block of its own: the spill-and-transpose path must not change a byte of the layout
    (family by family, series by series, summaries by MetricPoint) that render_trace gives.
    """
    expected = Fleet(SPEC).trace(SCRAPES)
    for budget in (1, 10**6):
        path = tmp_path / f"fleet-{budget}.om.gz"
        written = write_fleet_trace(
            path, scrapes=SCRAPES, spec=SPEC, chunk_values=budget, block_values=budget
        )
        assert gzip.decompress(path.read_bytes()).decode("utf-8") == expected
        assert written.samples == written.series * SCRAPES


def test_fleet_trace_reads_back_whole_and_family_by_family(tmp_path: Path) -> None:
    """load_trace reads every sample back, each family in one stretch and in name order.

    Each series holds one sample a scrape at the scrape's time, in time order; the count
    of samples and of families is what the writer reported, so the benchmark's table can
    quote them.
    """
    path = tmp_path / "fleet.om.gz"
    written = write_fleet_trace(path, scrapes=SCRAPES, spec=SPEC)
    text = gzip.decompress(path.read_bytes()).decode("utf-8")
    declared = [line.split(" ")[2:4] for line in text.splitlines() if line.startswith("# TYPE ")]
    types = {family: kind for family, kind in declared}
    names = [family for family, _ in declared]
    assert names == sorted(names) and len(set(names)) == len(names) == written.families

    samples = load_trace(path)
    assert len(samples) == written.samples == written.series * SCRAPES
    stretches: list[str] = []
    for sample in samples:
        family = family_of(sample.name, types)[0]
        if not stretches or stretches[-1] != family:
            stretches.append(family)
    assert stretches == names

    times: dict[tuple[str, tuple[tuple[str, str], ...]], list[float | None]] = {}
    for sample in samples:
        times.setdefault((sample.name, sample.labels), []).append(sample.timestamp)
    scrape_times = [START + k * SPEC.interval_s for k in range(SCRAPES)]
    assert len(times) == written.series
    assert all(stamps == scrape_times for stamps in times.values())
