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
from tritonguard.core.series_store import SERIES_BYTES, SeriesStore

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


# ---- the fused scrape path against parse + relabel + add_many ------------------------------

TARGET = (("instance", "10.0.0.7:8002"), ("namespace", "ml"), ("pod", "triton-7"))


def _triton_text(scrape: int, models: list[str], *, reset_at: int = -1, odd: bool = False) -> str:
    """Return a Triton 0.0.4 exposition for scrape ``scrape``: counters grow, idle quantiles NaN."""
    out = ["# HELP nv_inference_count Number of inferences", "# TYPE nv_inference_count counter"]
    base = 0 if scrape >= reset_at >= 0 else 1000
    for k, model in enumerate(models):
        grown = base + scrape * (k + 1) * 7
        out.append(f'nv_inference_count{{model="{model}",version="1"}} {grown}')
    out.append("# TYPE nv_inference_request_duration_us counter")
    for model in models:
        out.append(f'nv_inference_request_duration_us{{model="{model}",version="1"}} {scrape * 9}')
    out.append("# TYPE nv_inference_pending_request_count gauge")
    for k, model in enumerate(models):
        out.append(f'nv_inference_pending_request_count{{model="{model}",version="1"}} {k % 3}')
    out.append("# TYPE nv_inference_queue_summary_us summary")
    for k, model in enumerate(models):
        value = "Nan" if (k + scrape) % 4 == 0 else f"{scrape * 1.5 + k}"
        out.append(f'nv_inference_queue_summary_us{{model="{model}",quantile="0.99"}} {value}')
    out.append("# TYPE nv_pinned_memory_pool_total_bytes gauge")
    out.append(f"nv_pinned_memory_pool_total_bytes {268435456 + scrape}")
    out.append('container_spec_cpu_quota{container="triton",pod="triton-7"} -1')
    if odd:
        # A duplicate line, a line of a family no feature reads, negative counter.
        out.append(f'nv_inference_count{{model="{models[0]}",version="1"}} {scrape}')
        out.append('unrelated_family{a="b"} 12')
        out.append(f'nv_inference_exec_count{{model="{models[-1]}",version="1"}} -4')
    return "\n".join(out) + "\n"


def _snapshot(store: SeriesStore) -> dict[str, object]:
    """Everything the engine can read from a store, and the scrape times births use."""
    series = {}
    for name in sorted({s.name for s in store._series.values()}):
        for s in store.family(name):
            series[(s.name, s.labels)] = (
                s.counter,
                [repr(x) for x in s.times],
                [repr(x) for x in s.values],
                list(s.resets),
                s.born,
                s.born_unconfirmed,
                s.last_raw,
                s.offset,
            )
    return {
        "series": series,
        "points": store.points,
        "ingested": store.samples_ingested,
        "shed": store.series_shed,
        "newest": store.newest,
        "started": store.started_at,
        "exporters": {k: list(v) for k, v in store._exporter_scrapes.items()},
        "targets": {k: list(v) for k, v in store._scrapes.items()},
        "all": list(store._all_scrapes),
    }


def _reference(store: SeriesStore, text: str, t: float) -> None:
    """Ingest the way a scrape source does today: parse, relabel, add."""
    from tritonguard.core.metric_names import is_consumed
    from tritonguard.core.scrape_ingest import relabelled

    samples = [
        Sample(s.name, relabelled(s.labels, TARGET, honor_labels=False), s.value, s.timestamp)
        for s in parse_exposition(text, default_timestamp=t, cache=SeriesCache()).samples
        if is_consumed(s.name)
    ]
    store.add_many(samples, t)


SCENARIOS = {
    "steady": lambda k: _triton_text(k, ["a", "b", "c"]),
    "reset": lambda k: _triton_text(k, ["a", "b", "c"], reset_at=4),
    "new model": lambda k: _triton_text(k, ["a", "b"] + (["c", "d"] if k >= 3 else [])),
    "model gone": lambda k: _triton_text(k, ["a", "b", "c"] if k < 3 or k > 6 else ["a"]),
    "reordered": lambda k: _triton_text(k, ["a", "b", "c"] if k % 2 else ["c", "a", "b"]),
    "odd lines": lambda k: _triton_text(k, ["a", "b"], odd=k % 3 == 0),
}


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
@pytest.mark.parametrize(
    ("retention", "budget", "grace"),
    [(900.0, None, 30.0), (35.0, None, 0.0), (900.0, 9 * SERIES_BYTES, 30.0)],
    ids=["plain", "expiring", "bounded"],
)
def test_fused_ingest_stores_what_parse_relabel_and_add_store(
    scenario: str, retention: float, budget: int | None, grace: float
) -> None:
    """Scrape by scrape, the fused path leaves the store exactly as the reference path does.

    Covered: counters growing and resetting, NaN quantiles, models appearing and vanishing,
    reordered lines, a duplicate line, an unread family, a negative counter, expiry, births
    after the grace period and the memory bound shedding new series.
    """
    from tritonguard.core.scrape_ingest import TargetIngest

    fused = SeriesStore(retention_s=retention, birth_grace_s=grace, max_bytes=budget)
    reference = SeriesStore(retention_s=retention, birth_grace_s=grace, max_bytes=budget)
    ingest = TargetIngest(fused, extra_labels=TARGET)
    drops = 0
    born = False
    for k in range(12):
        t = 1000.0 + 10.0 * k
        text = SCENARIOS[scenario](k)
        ingest.ingest(text, t)
        _reference(reference, text, t)
        assert _snapshot(fused) == _snapshot(reference), k
        born |= any(s.born is not None for s in fused.family("nv_inference_count"))
        dropped = fused.expire(t)
        assert reference.expire(t) == dropped
        drops += dropped
    # The fast path read every exposition, and each variant met what it is there for.
    assert ingest.slow_reads == 0
    assert fused.samples_ingested > 0
    if budget is not None:
        assert fused.series_shed > 0
    if retention < 100 and scenario == "model gone":
        assert drops > 0
    if scenario == "new model" and budget is None:
        assert born


def test_fused_ingest_matches_when_a_pod_appears_after_the_grace_period() -> None:
    """A pod first scraped late is born unconfirmed, then confirmed or not, the same both ways."""
    from tritonguard.core.scrape_ingest import TargetIngest, relabelled

    late = (("instance", "10.0.0.8:8002"), ("namespace", "ml"), ("pod", "triton-8"))
    fused = SeriesStore(birth_grace_s=20.0)
    reference = SeriesStore(birth_grace_s=20.0)
    first = TargetIngest(fused, extra_labels=TARGET)
    second = TargetIngest(fused, extra_labels=late)
    unconfirmed = confirmed = False
    for k in range(10):
        t = 1000.0 + 10.0 * k
        text = _triton_text(k, ["a", "b"])
        first.ingest(text, t)
        _reference(reference, text, t)
        if k >= 4:
            # Its counters start near zero (a real start) or high (a pod seen late).
            late_text = _triton_text(k - 4, ["a", "b"], reset_at=0 if k < 7 else -1)
            second.ingest(late_text, t + 1.0)
            samples = [
                Sample(s.name, relabelled(s.labels, late, honor_labels=False), s.value, t + 1.0)
                for s in parse_exposition(late_text, cache=SeriesCache()).samples
            ]
            reference.add_many(samples, t + 1.0)
        assert _snapshot(fused) == _snapshot(reference), k
        late_series = [
            s for s in fused.family("nv_inference_count") if ("pod", "triton-8") in s.labels
        ]
        unconfirmed |= any(s.born_unconfirmed for s in late_series)
        confirmed |= any(s.born is not None and not s.born_unconfirmed for s in late_series)
    assert unconfirmed and confirmed


def test_fused_ingest_matches_on_the_real_capture_and_skips_unread_families() -> None:
    """The 50-model capture, scraped repeatedly, stores the same; unread families cost no parse."""
    from tritonguard.core.scrape_ingest import TargetIngest

    text = CAPTURE_50.read_text()
    fused, reference = SeriesStore(), SeriesStore()
    ingest = TargetIngest(fused, extra_labels=TARGET)
    for k in range(3):
        result = ingest.ingest(text, 100.0 + 10 * k)
        _reference(reference, text, 100.0 + 10 * k)
    assert _snapshot(fused) == _snapshot(reference)
    assert result.samples == 2405 and result.stored == fused.samples_ingested // 3


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ('nv_inference_count{model="a"} 1\nnv_inference_count{model="b"} x\n', "bad value"),
        ('nv_inference_count{model="a" 1\n', "expected ','"),
        ("nv_inference_count 1 2 3\n", "unexpected '3'"),
        ("# TYPE nv_inference_count timer\n", "unknown metric type"),
        ("<html>oops</html>\n", "HTML"),
    ],
)
def test_fused_ingest_refuses_what_the_parser_refuses_and_stores_nothing(
    text: str, reason: str
) -> None:
    """A bad exposition is refused with the parser's reason, and the store stays as it was."""
    from tritonguard.core.scrape_ingest import TargetIngest

    store = SeriesStore()
    ingest = TargetIngest(store, extra_labels=TARGET)
    ingest.ingest('nv_inference_count{model="a"} 1\nnv_inference_count{model="b"} 2\n', 10.0)
    before = _snapshot(store)
    with pytest.raises(ExpositionError, match=reason):
        ingest.ingest(text, 20.0)
    assert _snapshot(store) == before


def test_fused_ingest_defers_openmetrics_and_timestamps_to_the_parser() -> None:
    """OpenMetrics payloads and samples with their own timestamps take the reference path."""
    from tritonguard.core.scrape_ingest import TargetIngest

    om = "# TYPE nv_inference_count counter\nnv_inference_count_total 5\n# EOF\n"
    timed = "nv_inference_count 5 1700000000000\n"
    for text in (om, timed):
        fused, reference = SeriesStore(), SeriesStore()
        TargetIngest(fused, extra_labels=TARGET).ingest(text, 50.0)
        _reference(reference, text, 50.0)
        assert _snapshot(fused) == _snapshot(reference)


def test_fused_ingest_lets_go_of_series_the_store_dropped() -> None:
    """A series expired while its values were NaN is stored anew, not fed to a lost object."""
    from tritonguard.core.scrape_ingest import TargetIngest

    store = SeriesStore(retention_s=30.0)
    ingest = TargetIngest(store, extra_labels=TARGET)
    line = 'nv_inference_queue_summary_us{model="a",quantile="0.99"} '
    ingest.ingest(line + "5\nnv_inference_count 1\n", 0.0)
    for k in range(1, 6):  # the quantile idles (NaN) past the retention and is dropped
        ingest.ingest(line + f"Nan\nnv_inference_count {k}\n", 10.0 * k)
        store.expire(10.0 * k)
    ingest.ingest(line + "7\nnv_inference_count 9\n", 60.0)
    (series,) = store.family("nv_inference_queue_summary_us")
    assert list(series.values) == [7.0]


@pytest.mark.parametrize(
    "tokens",
    [
        ["6", "5.5", "-2", "1e3", "1E-3", ".5", "5.", "+5", "01"],
        ["Nan", "NaN", "nan", "-nan", "+Inf", "-Inf", "inf", "Infinity", "-infinity"],
        ["-0", "-0.0", "0", "9223372036854775808", "1e400", "123456789012345678901234567"],
    ],
)
def test_bulk_value_conversion_equals_float(tokens: list[str]) -> None:
    """Converting tokens in bulk gives float()'s numbers (NaN's sign aside)."""
    import math

    from tritonguard.core.exposition import to_floats

    got = to_floats(tokens)
    want = [float(x) for x in tokens]
    assert [repr(abs(g)) if math.isnan(g) else repr(g) for g in got] == [
        repr(abs(w)) if math.isnan(w) else repr(w) for w in want
    ]


@pytest.mark.parametrize(
    "bad", ["1_0", "0x10", "true", "null", "1,5", "", "١", "1 ", "--1", "NaNa"]
)
def test_bulk_value_conversion_refuses_what_float_or_the_grammar_refuses(bad: str) -> None:
    """A token the grammar refuses is a ValueError, even where float() would read it."""
    from tritonguard.core.exposition import to_floats

    with pytest.raises(ValueError):
        to_floats(["1", bad, "2"])
