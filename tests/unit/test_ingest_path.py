"""Ingest path: the fast scan reads exactly what the careful path reads, and the store's guards."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from tritonguard.core.exposition import (
    ExpositionError,
    SeriesCache,
    _ChunkParser,
    iter_exposition,
    parse_exposition,
)
from tritonguard.core.samples import Sample
from tritonguard.core.series_store import SeriesStore

ROOT = Path(__file__).parent.parent.parent
CAPTURE_50 = ROOT / "benchmarks" / "data" / "triton_50_models.prom"
TRACES = sorted((ROOT / "tests" / "fixtures" / "traces").glob("*.om.gz"))


def _rows(samples: list[Sample]) -> list[tuple[object, ...]]:
    return [(s.name, s.labels, repr(s.value), s.timestamp) for s in samples]


def _careful(text: str, *, openmetrics: bool, default: float | None = None) -> list[Sample]:
    """Read a text through the careful path only, the parser's reference."""
    parser = _ChunkParser(
        source="ref",
        openmetrics=openmetrics,
        types={},
        help={},
        units={},
        default_timestamp=default,
        max_samples=None,
        max_line_length=65536,
        cache=SeriesCache(),
    )
    return parser._careful(text, 1)


def test_fast_scan_matches_the_careful_path_on_a_real_triton_scrape() -> None:
    """The 50-model Triton capture reads the same cold, warm and line by line."""
    text = CAPTURE_50.read_text()
    cache = SeriesCache()
    cold = parse_exposition(text, default_timestamp=5.0, cache=cache).samples
    warm = parse_exposition(text, default_timestamp=5.0, cache=cache).samples
    assert _rows(cold) == _rows(warm) == _rows(_careful(text, openmetrics=False, default=5.0))
    assert len(cold) > 2000


@pytest.mark.parametrize("trace", TRACES[:6], ids=lambda p: p.name)
def test_fast_scan_matches_the_careful_path_on_recorded_traces(trace: Path) -> None:
    """A recorded OpenMetrics trace reads the same through the fast scan and line by line."""
    text = gzip.decompress(trace.read_bytes()).decode()
    fast = list(
        iter_exposition(
            text.splitlines(), openmetrics=True, require_timestamps=True, cache=SeriesCache()
        )
    )
    assert _rows(fast) == _rows(_careful(text, openmetrics=True))


@pytest.mark.parametrize(
    ("text", "line"),
    [
        ("a 1\nb 2\nc x\nd 4\n", 3),
        ("a 1\nb 1_0\n", 2),
        ("a 1\nb{x=1} 2\nc 3 4 5\n", 2),
        ("a 1 100\nb 2 200\nc 3 2.5\n", 3),
    ],
)
def test_the_first_problem_is_named_even_when_the_series_are_cached(text: str, line: int) -> None:
    """A warm cache never hides an error nor moves it: the first bad line is reported."""
    cache = SeriesCache()
    parse_exposition("a 1\nb 2\nc 3\nd 4\n", cache=cache)
    with pytest.raises(ExpositionError) as info:
        parse_exposition(text, cache=cache)
    assert info.value.line == line


def test_a_known_series_with_a_bad_value_is_refused() -> None:
    """Values are checked on every scrape, not only the first: 0x10 and 1_000 are no floats."""
    cache = SeriesCache()
    parse_exposition('m{a="1"} 5\n', cache=cache)
    for bad in ("0x10", "1_000", "１"):
        with pytest.raises(ExpositionError, match="bad value"):
            parse_exposition(f'm{{a="1"}} {bad}\n', cache=cache)


def test_store_takes_no_negative_counter_point() -> None:
    """A negative counter value is no point: it would read as a reset and a false rate."""
    store = SeriesStore()
    labels = (("model", "m"), ("pod", "p"))
    for t, v in ((0.0, 10.0), (10.0, -5.0), (20.0, 30.0)):
        store.add(Sample("nv_inference_count", labels, v, t), t)
    (series,) = store.family("nv_inference_count")
    assert list(series.values) == [10.0, 30.0] and series.resets == []
    store.add(Sample("container_spec_cpu_quota", labels, -1.0, 30.0), 30.0)
    (gauge,) = store.family("container_spec_cpu_quota")
    assert list(gauge.values) == [-1.0]
