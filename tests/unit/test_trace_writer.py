"""Trace writer: OpenMetrics traces that promtool backfills and our parser reads back unchanged."""

from __future__ import annotations

import gzip
import math
import shutil
import subprocess
from pathlib import Path

import pytest

from tritonguard.core.exposition import parse_exposition
from tritonguard.core.samples import Sample
from tritonguard.core.trace_writer import family_of, render_trace, render_trace_gz

FIXTURES = Path(__file__).parent.parent / "fixtures" / "expositions"
T0 = 1_700_000_000


def _triton_scrapes(count: int) -> tuple[list[Sample], dict[str, str], dict[str, str]]:
    """Parse the real 2-model capture ``count`` times, 15 s apart, counters growing each time."""
    text = (FIXTURES / "triton_2_models.prom").read_text()
    samples: list[Sample] = []
    for k in range(count):
        exp = parse_exposition(text, default_timestamp=T0 + 15 * k)
        for s in exp.samples:
            grow = k * 10 if exp.types.get(s.name) == "counter" else 0
            samples.append(Sample(s.name, s.labels, s.value + grow, s.timestamp))
    return samples, exp.types, exp.help


def test_literal_trace_layout() -> None:
    """Families are written whole in name order, series then time, HELP/TYPE first, # EOF last."""
    samples = [
        Sample("b", (("m", "y"),), 2.0, 20.0),
        Sample("a", (), 1.5, 10.0),
        Sample("b", (("m", "x"),), 1.0, 20.0),
        Sample("b", (("m", "x"),), 0.0, 10.0),
        Sample("a", (), math.nan, 20.0),
    ]
    text = render_trace(samples, {"a": "gauge", "b": "counter"}, help={"a": 'say "\\hi"'})
    assert text == (
        '# HELP a say \\"\\\\hi\\"\n'
        "# TYPE a gauge\n"
        "a 1.5 10\n"
        "a NaN 20\n"
        "# TYPE b unknown\n"
        'b{m="x"} 0 10\n'
        'b{m="x"} 1 20\n'
        'b{m="y"} 2 20\n'
        "# EOF\n"
    )


def test_counter_with_total_stays_counter_and_0_0_4_names_map() -> None:
    """Counters named with _total keep their type; the family is the name without _total."""
    assert family_of("x_total", {"x_total": "counter"}) == ("x", "counter")
    assert family_of("x_total", {"x": "counter"}) == ("x", "counter")
    assert family_of("s_sum", {"s": "summary"}) == ("s", "summary")
    assert family_of("h_bucket", {"h": "histogram"}) == ("h", "histogram")
    assert family_of("s_bucket", {"s": "summary"}) == ("s_bucket", "unknown")
    assert family_of("u", {"u": "untyped"}) == ("u", "unknown")
    text = render_trace([Sample("x_total", (), 3.0, 1.0)], {"x_total": "counter"})
    assert text == "# TYPE x counter\nx_total 3 1\n# EOF\n"


def test_summary_points_are_grouped_by_time() -> None:
    """A summary is written point by point: quantiles, _sum, _count of one time together."""
    samples = [
        Sample(name, labels, 1.0, ts)
        for ts in (20.0, 10.0)
        for name, labels in (
            ("s_count", ()),
            ("s_sum", ()),
            ("s", (("quantile", "0.99"),)),
            ("s", (("quantile", "0.5"),)),
        )
    ]  # fmt: skip
    lines = render_trace(samples, {"s": "summary"}).splitlines()
    assert lines == [
        "# TYPE s summary",
        's{quantile="0.5"} 1 10', 's{quantile="0.99"} 1 10', "s_sum 1 10", "s_count 1 10",
        's{quantile="0.5"} 1 20', 's{quantile="0.99"} 1 20', "s_sum 1 20", "s_count 1 20",
        "# EOF",
    ]  # fmt: skip


def test_duplicate_point_keeps_last_and_missing_timestamp_is_an_error() -> None:
    """A repeated (series, time) keeps the last value; a sample without time is refused."""
    text = render_trace([Sample("a", (), 1.0, 5.0), Sample("a", (), 2.0, 5.0)])
    assert text == "# TYPE a unknown\na 2 5\n# EOF\n"
    with pytest.raises(ValueError, match=r"a\{m=\"x\"\} has no timestamp"):
        render_trace([Sample("a", (("m", "x"),), 1.0, None)])


def test_round_trip_through_parser() -> None:
    """Parsing a rendered real Triton trace gives back exactly the samples that went in."""
    samples, types, help_ = _triton_scrapes(3)
    text = render_trace(samples, types, help=help_)
    back = parse_exposition(text, source="trace.om")
    assert back.openmetrics is True
    assert sorted(back.samples, key=repr) == sorted(samples, key=repr)
    assert back.types["nv_inference_count"] == "unknown"  # no _total, so not a counter
    assert back.types["nv_inference_queue_summary_us"] == "summary"
    assert back.types["nv_inference_pending_request_count"] == "gauge"


def test_gzip_trace_is_deterministic_and_decodes() -> None:
    """render_trace_gz gives the same bytes for the same input and gunzips to render_trace."""
    samples, types, _ = _triton_scrapes(2)
    first = render_trace_gz(samples, types)
    assert first == render_trace_gz(samples, types)
    assert gzip.decompress(first).decode() == render_trace(samples, types)


def test_strict_openmetrics_reader_accepts_the_trace() -> None:
    """prometheus_client's strict OpenMetrics parser (ordering, _total rules) reads the trace."""
    from prometheus_client.openmetrics.parser import text_string_to_metric_families

    samples, types, help_ = _triton_scrapes(3)
    text = render_trace(samples, types, help=help_)
    # prometheus_client's OpenMetrics parser carries no type hints.
    families = list(text_string_to_metric_families(text))  # type: ignore[no-untyped-call]
    assert {f.name for f in families} >= {"nv_inference_count", "nv_inference_request_summary_us"}


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool is not installed")
def test_promtool_backfills_the_trace(tmp_path: Path) -> None:
    """Promtool's create-blocks-from openmetrics ingests a rendered trace: every sample lands."""
    samples, types, help_ = _triton_scrapes(4)
    trace = tmp_path / "trace.om"
    trace.write_text(render_trace(samples, types, help=help_))
    blocks = tmp_path / "blocks"
    done = subprocess.run(
        ["promtool", "tsdb", "create-blocks-from", "openmetrics", str(trace), str(blocks)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    series = {(s.name, s.labels) for s in samples}
    # promtool prints one row per block: ULID, min, max, duration, samples, chunks, series, size.
    row = done.stdout.strip().splitlines()[-1].split()
    assert int(row[4]) == len(samples)
    assert int(row[6]) == len(series)
    assert int(row[1]) == T0 * 1000
