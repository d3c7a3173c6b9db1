"""Exposition parser: literals, real Triton output, and every kind of bad input."""

from __future__ import annotations

import gzip
import math
from collections.abc import Iterator
from pathlib import Path

import pytest

from tritonguard.core import exposition
from tritonguard.core.exposition import (
    ExpositionError,
    decode_payload,
    iter_exposition,
    iter_payload_lines,
    parse_exposition,
)
from tritonguard.core.samples import Sample

FIXTURES = Path(__file__).parent.parent / "fixtures" / "expositions"
CAPTURE_50 = Path(__file__).parent.parent.parent / "benchmarks" / "data" / "triton_50_models.prom"


def test_plain_text_sample_types_and_help() -> None:
    """A 0.0.4 exposition yields samples with sorted labels and the declared types and help."""
    text = (
        "# HELP nv_inference_count Number of inferences\n"
        "# TYPE nv_inference_count counter\n"
        'nv_inference_count{version="1",model="m"} 7\n'
        "nv_cpu_utilization 0.25\n"
    )
    exp = parse_exposition(text)
    assert exp.samples == [
        Sample("nv_inference_count", (("model", "m"), ("version", "1")), 7.0, None),
        Sample("nv_cpu_utilization", (), 0.25, None),
    ]
    assert exp.types == {"nv_inference_count": "counter"}
    assert exp.help == {"nv_inference_count": "Number of inferences"}
    assert exp.openmetrics is False


def test_text_timestamps_are_milliseconds_converted_to_seconds() -> None:
    """0.0.4 timestamps are integer ms; samples carry seconds, others get default_timestamp."""
    exp = parse_exposition("a 1 1700000000123\nb 2\n", default_timestamp=5.0)
    assert exp.samples[0].timestamp == 1700000000.123
    assert exp.samples[1].timestamp == 5.0


def test_openmetrics_timestamps_are_float_seconds() -> None:
    """OpenMetrics (detected by # EOF) keeps timestamps as float seconds."""
    exp = parse_exposition("# TYPE a gauge\na 1 1700000000.5\n# EOF\n")
    assert exp.openmetrics is True
    assert exp.samples == [Sample("a", (), 1.0, 1700000000.5)]


def test_special_values_and_exponents() -> None:
    """NaN, +Inf, -Inf and exponents parse as floats."""
    exp = parse_exposition("a NaN\nb +Inf\nc -Inf\nd 1.5e3\ne -2E-2\nf .5\n")
    values = [s.value for s in exp.samples]
    assert math.isnan(values[0])
    assert values[1:] == [math.inf, -math.inf, 1500.0, -0.02, 0.5]


def test_escaped_label_values_and_separators_inside_quotes() -> None:
    r"""Escapes \\, \" and \n decode; ',', '}' and '=' inside quotes are part of the value."""
    text = 'm{a="x\\\\y",b="say \\"hi\\"",c="l1\\nl2",d="p,q}r=s"} 1\n'
    exp = parse_exposition(text)
    assert exp.samples[0].labels == (
        ("a", "x\\y"),
        ("b", 'say "hi"'),
        ("c", "l1\nl2"),
        ("d", "p,q}r=s"),
    )


def test_empty_label_set_blank_lines_crlf_and_trailing_space() -> None:
    """{} is no labels; blank lines, CRLF ends and trailing whitespace are accepted."""
    exp = parse_exposition('a{} 1\r\n\r\n  \nb{x="1"} 2   \r\n# comment\r\nc 3 \t\n')
    assert [(s.name, s.labels, s.value) for s in exp.samples] == [
        ("a", (), 1.0),
        ("b", (("x", "1"),), 2.0),
        ("c", (), 3.0),
    ]


def test_summary_histogram_and_created_lines_are_kept() -> None:
    """Summary quantiles/_sum/_count, histogram buckets and _created samples are all samples."""
    text = (
        "# TYPE s summary\n"
        's{quantile="0.5"} 1\ns{quantile="0.99"} 2\ns_sum 3\ns_count 4\ns_created 1700000000\n'
        "# TYPE h histogram\n"
        'h_bucket{le="0.1"} 1\nh_bucket{le="+Inf"} 2\nh_sum 0.3\nh_count 2\n'
        "# EOF\n"
    )
    exp = parse_exposition(text)
    assert [s.name for s in exp.samples] == [
        "s", "s", "s_sum", "s_count", "s_created", "h_bucket", "h_bucket", "h_sum", "h_count",
    ]  # fmt: skip
    assert exp.types == {"s": "summary", "h": "histogram"}
    assert exp.samples[6].labels == (("le", "+Inf"),)


def test_openmetrics_exemplars_are_ignored_and_units_recorded() -> None:
    """An exemplar after an OpenMetrics sample is skipped; # UNIT lines are recorded."""
    text = (
        "# TYPE r counter\n# UNIT r seconds\n"
        'r_total{a="1"} 5 1700000000 # {trace_id="abc"} 0.5 1700000000\n'
        'r_total{a="2"} 6 # {trace_id="x\\"y"} 1\n'
        "# EOF\n"
    )
    exp = parse_exposition(text)
    assert [(s.labels, s.value, s.timestamp) for s in exp.samples] == [
        ((("a", "1"),), 5.0, 1700000000.0),
        ((("a", "2"),), 6.0, None),
    ]
    assert exp.units == {"r": "seconds"}


def test_openmetrics_families_repeated_across_a_trace() -> None:
    """A trace with families interleaved and repeated (many scrapes) keeps every sample."""
    text = (
        "# TYPE a gauge\na 1 10\n# TYPE b gauge\nb 1 10\n"
        "# TYPE a gauge\na 2 25\n# TYPE b gauge\nb 2 25\n# EOF\n"
    )
    exp = parse_exposition(text)
    assert [(s.name, s.value, s.timestamp) for s in exp.samples] == [
        ("a", 1.0, 10.0), ("b", 1.0, 10.0), ("a", 2.0, 25.0), ("b", 2.0, 25.0),
    ]  # fmt: skip


def test_names_and_label_sets_are_shared_between_samples() -> None:
    """Repeated names and label sets are the same objects (interned), which keeps traces small."""
    exp = parse_exposition('a{m="x"} 1\nb{m="x"} 2\na{m="x"} 3\n')
    first, second, third = exp.samples
    assert first.name is third.name
    assert first.labels is second.labels


def test_explicit_format_overrides_detection() -> None:
    """openmetrics=False reads a # EOF as a comment; openmetrics=True reads float timestamps."""
    assert parse_exposition("a 1 1000\n# EOF\n", openmetrics=False).samples[0].timestamp == 1.0
    exp = parse_exposition("a 1 1000\n# EOF\n", openmetrics=True)
    assert exp.samples[0].timestamp == 1000.0


def test_iter_exposition_streams_file_lines_across_chunks(tmp_path: Path) -> None:
    """The line iterator reads an open file in small chunks, giving the same samples and types."""
    text = (FIXTURES / "triton_2_models.prom").read_text()
    path = tmp_path / "scrape.prom"
    path.write_text(text)
    types: dict[str, str] = {}
    with path.open() as handle:
        streamed = list(iter_exposition(handle, openmetrics=False, types=types, chunk_lines=7))
    whole = parse_exposition(text)
    assert streamed == whole.samples
    assert types == whole.types


def test_a_timed_trace_is_read_by_the_fast_scan_in_every_chunk(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A trace's chunks after the first start timed, as it ended: none falls back line by line.

    Each chunk ended as a timed run, and the scan then took the next chunk for untimed,
    stopped at its first sample and read the whole chunk again the careful way: 1,117 of
    1,118 chunks of a 50-pod replay, half its time. The samples are the careful path's.
    """
    lines = ["# TYPE nv_inference_count counter"]
    for m in range(100):  # series by series, as promtool's backfill files are laid out
        lines += [
            f'nv_inference_count_total{{model="m{m}",version="1"}} {k * m} {1_700_000_000 + 10 * k}'
            for k in range(40)
        ]
    lines.append("# EOF")
    careful: list[int] = []
    real = exposition._ChunkParser._careful

    def counted(self: exposition._ChunkParser, text: str, first_line: int) -> list[Sample]:
        careful.append(first_line)
        return real(self, text, first_line)

    monkeypatch.setattr(exposition._ChunkParser, "_careful", counted)
    read = list(iter_exposition(lines, openmetrics=True, require_timestamps=True, chunk_lines=512))
    assert careful == [], "every chunk of the trace was read by the fast scan"
    assert len(read) == 4000
    monkeypatch.undo()
    assert read == parse_exposition("\n".join(lines) + "\n", openmetrics=True).samples


def test_iter_exposition_errors_carry_the_line_of_the_whole_input() -> None:
    """Line numbers stay right across chunk boundaries."""
    lines = ["a 1"] * 10 + ["a one"]
    with pytest.raises(ExpositionError) as info:
        list(iter_exposition(lines, openmetrics=False, chunk_lines=3))
    assert info.value.line == 11


def test_real_triton_capture_matches_its_text() -> None:
    """The real 2-model Triton capture gives one sample per sample line and Triton's types."""
    text = (FIXTURES / "triton_2_models.prom").read_text()
    exp = parse_exposition(text, source="triton_2_models.prom")
    sample_lines = [line for line in text.splitlines() if line and not line.startswith("#")]
    assert len(exp.samples) == len(sample_lines)
    assert exp.types["nv_inference_count"] == "counter"
    assert exp.types["nv_inference_pending_request_count"] == "gauge"
    assert exp.types["nv_inference_queue_summary_us"] == "summary"
    models = {dict(s.labels).get("model") for s in exp.samples} - {None}
    assert models == {"model_00", "model_01"}


def _canonical(name: str, family_type: str) -> str:
    # prometheus_client appends _total to counter samples; Triton's counters have no suffix.
    if family_type == "counter" and name.endswith("_total"):
        return name[: -len("_total")]
    return name


def test_same_samples_as_prometheus_client_on_real_50_model_capture() -> None:
    """Our (name, labels, value) set equals prometheus_client's on the real 50-model capture."""
    from prometheus_client.parser import text_string_to_metric_families

    text = CAPTURE_50.read_text()
    exp = parse_exposition(text)
    ours = {(_canonical(s.name, exp.types.get(s.name, "")), s.labels, s.value) for s in exp.samples}
    theirs = {
        (_canonical(s.name, family.type), tuple(sorted(s.labels.items())), float(s.value))
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }
    assert len(exp.samples) > 2000
    assert ours == theirs


def test_decode_payload_gunzips_and_decodes() -> None:
    """Gzip payloads are decompressed transparently; plain UTF-8 passes through."""
    assert decode_payload(gzip.compress(b"a 1\n"), source="x") == "a 1\n"
    assert decode_payload('b{l="é"} 2\n'.encode(), source="x") == 'b{l="é"} 2\n'


def test_decode_payload_reports_the_line_of_bad_utf8() -> None:
    """Undecodable bytes give an ExpositionError naming their line."""
    with pytest.raises(ExpositionError) as info:
        decode_payload(b"a 1\nb 2\n\xff\xfe\x00junk\n", source="scrape.bin")
    assert info.value.line == 3
    assert str(info.value).startswith("scrape.bin:3: not UTF-8 text")


def test_decode_payload_reports_corrupt_gzip() -> None:
    """A truncated gzip stream is an ExpositionError, not a traceback."""
    with pytest.raises(ExpositionError, match="corrupt gzip"):
        decode_payload(gzip.compress(b"a 1\n" * 100)[:20], source="t.om.gz")


def test_decode_payload_refuses_a_gzip_bomb_before_inflating_it() -> None:
    """A payload inflating far past what metrics text does stops at a few MB, naming its line."""
    member = gzip.compress(b"a 1 2\n" * 1_000_000, 9)
    with pytest.raises(ExpositionError, match="gzip bomb") as info:
        decode_payload(member * 200, source="bomb.om.gz")
    assert str(info.value).startswith("bomb.om.gz:") and info.value.line > 1


def test_decode_payload_caps_the_text_it_holds() -> None:
    """max_bytes bounds what is inflated into memory, even at an ordinary ratio."""
    data = gzip.compress(b"".join(b"a %d 2\n" % i for i in range(1000)))
    with pytest.raises(ExpositionError, match="past 100 bytes"):
        decode_payload(data, source="x", max_bytes=100)


TEXT = 'a{l="é"} 1 2\r\n\nb 2 3\n# EOF\n'


@pytest.mark.parametrize("step", [1, 2, 5, 1000])
@pytest.mark.parametrize("gz", [False, True], ids=["plain", "gzip"])
def test_payload_lines_are_the_text_lines_however_the_bytes_arrive(step: int, gz: bool) -> None:
    """Chunks split anywhere (inside a UTF-8 character too) give the same lines, CR kept."""
    data = gzip.compress(TEXT.encode()) if gz else TEXT.encode()
    chunks = [data[i : i + step] for i in range(0, len(data), step)]
    assert list(iter_payload_lines(chunks, source="t")) == TEXT.split("\n")[:-1]
    assert list(iter_payload_lines([b"a 1\nb 2"], source="t")) == ["a 1", "b 2"]


def test_a_line_without_end_is_refused_without_reading_it_whole() -> None:
    """An endless line stops once four times the limit is in hand, not at the end of input."""
    read = 0

    def endless() -> Iterator[bytes]:
        nonlocal read
        while True:
            read += 1
            yield b"x" * 1000

    with pytest.raises(ExpositionError, match="over 100 characters long") as info:
        list(iter_payload_lines(endless(), source="t", max_line_length=100))
    assert info.value.line == 1 and read == 1


def test_bad_utf8_in_a_later_chunk_names_its_line_and_offset() -> None:
    """Line and byte offset count from the start of the whole payload, not of the chunk."""
    chunks = [b"a 1\nb 2\n", b"c 3\nd \xff 4\n"]
    with pytest.raises(ExpositionError) as info:
        list(iter_payload_lines(chunks, source="t.om"))
    assert str(info.value).startswith("t.om:4: not UTF-8 text (byte 0xff at offset 14)")


def test_required_timestamps_are_checked_after_truncation() -> None:
    """Untimed samples are not yielded; the first is reported at the end, after a missing EOF."""
    lines = ["a 1 100", "a 2", "b 3", "# EOF"]
    samples: list[Sample] = []
    with pytest.raises(ExpositionError, match=r"^t:2: sample a has no timestamp"):
        samples += iter_exposition(lines, source="t", openmetrics=True, require_timestamps=True)
    assert samples == [Sample("a", (), 1.0, 100.0)]
    with pytest.raises(ExpositionError, match="missing the closing '# EOF'"):
        list(iter_exposition(lines[:3], source="t", openmetrics=True, require_timestamps=True))


@pytest.mark.parametrize(
    ("text", "line", "reason"),
    [
        ("a 1\nthis is not a metric line\n", 2, "garbled line"),
        ('a 1\nb{x="unterminated} 1\n', 2, "unterminated quoted value of label 'x'"),
        ("a one\n", 1, "bad value 'one'"),
        ("a 1 12.5\n", 1, "bad timestamp '12.5'"),
        ("# TYPE a gauge\na 1 soon\n# EOF\n", 2, "bad timestamp 'soon'"),
        ("# TYPE a gauge\na 1 NaN\n# EOF\n", 2, "bad timestamp 'NaN'"),
        ("a 1 2 3\n", 1, "unexpected '3' after the timestamp"),
        ("a\n", 1, "has no value"),
        ("a{b} 1\n", 1, "expected '=' after label name 'b'"),
        ("a{b=c} 1\n", 1, "must be in double quotes"),
        ('a{b="c" d="e"} 1\n', 1, "expected ',' or '}' after the value of label 'b'"),
        ('a{b="c"\n', 1, "not closed"),
        ('a{b="1",b="2"} 1\n', 1, "label 'b' appears twice"),
        ('a{b="\\t"} 1\n', 1, "invalid escape '\\t'"),
        ('a{9="x"} 1\n', 1, "expected a label name"),
        ('a 1 # {x="y"} 1\n', 1, "exemplars exist only in OpenMetrics"),
        ("# TYPE a gauge\na 1 # {x=y} 1\n# EOF\n", 2, "malformed exemplar"),
        ("# TYPE a\n", 1, "unknown metric type ''"),
        ("# TYPE a timer\n", 1, "unknown metric type 'timer'"),
        ("# TYPE 1a gauge\n", 1, "valid metric family name"),
        ("# TYPE a gauge\n# TYPE a counter\n", 2, "declared 'gauge' earlier and 'counter'"),
        ("# TYPE a gauge\na 1\n# EOF\nb 2\n", 4, "content after '# EOF'"),
        ("<!DOCTYPE html>\n<html><body>Not found</body></html>\n", 1, "HTML"),
        ('{"status":"success","data":{}}\n', 1, "JSON"),
        ("a 1\n\x00\x01\x02\x7fELF\n", 2, "binary data"),
    ],
)
def test_bad_input_gives_one_line_error_with_line_number(text: str, line: int, reason: str) -> None:
    """Every malformed input raises ExpositionError with its line and a one-line reason."""
    with pytest.raises(ExpositionError) as info:
        parse_exposition(text, source="scrape.prom")
    err = info.value
    assert err.line == line
    assert reason in err.reason
    assert str(err) == f"scrape.prom:{line}: {err.reason}"
    assert "\n" not in str(err)


def test_whitespace_after_eof_is_fine() -> None:
    """Only whitespace may follow # EOF, and it is accepted."""
    assert len(parse_exposition("a 1\n# EOF\n\n  \n").samples) == 1


def test_truncated_openmetrics_is_an_error_when_asked_for() -> None:
    """openmetrics=True without # EOF reports truncation at the last line."""
    with pytest.raises(ExpositionError, match="missing the closing '# EOF'") as info:
        parse_exposition("# TYPE a gauge\na 1 10\na 2 20", openmetrics=True)
    assert info.value.line == 3


def test_line_too_long() -> None:
    """A line over max_line_length is rejected with its number and length."""
    text = "a 1\n" + "b" * 50 + " 1\nc 1\n"
    with pytest.raises(ExpositionError, match="52 characters long, over the limit of 40") as info:
        parse_exposition(text, max_line_length=40)
    assert info.value.line == 2
    assert len(parse_exposition(text, max_line_length=52).samples) == 3


def test_too_many_samples() -> None:
    """More samples than max_samples is an error at the first sample over the limit."""
    with pytest.raises(ExpositionError, match="more than 2 samples") as info:
        parse_exposition("# x\na 1\nb 2\nc 3\n", max_samples=2)
    assert info.value.line == 4
    assert len(parse_exposition("a 1\nb 2\n", max_samples=2).samples) == 2


def test_error_is_a_value_error_with_fields() -> None:
    """ExpositionError is a ValueError exposing source, line and reason."""
    err = ExpositionError("f.prom", 3, "bad")
    assert isinstance(err, ValueError)
    assert (err.source, err.line, err.reason, str(err)) == ("f.prom", 3, "bad", "f.prom:3: bad")
