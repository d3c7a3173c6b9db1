"""Fuzz the parsers with real inputs mutated and with generated text: one documented error, or none.

Each parser meets input from outside (a scrape, a recorded trace, a user's YAML, a test file,
an Alertmanager POST). Whatever it gets, it either parses it or raises its own error type
with a one-line message; never another exception, and never slowly. The inputs are the
fixtures and shipped files, cut to a window and mutated (bytes inserted, dropped, repeated,
lines shuffled), and text generated from each format's grammar.
"""

from __future__ import annotations

import gzip
import json
import re
import time
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import jinja2
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from yaml.reader import Reader

from tritonguard.actions.registry import catalog
from tritonguard.core.exposition import ExpositionError, parse_exposition
from tritonguard.core.playbook_model import PlaybookError, load_playbooks_text
from tritonguard.core.playbook_tests import parse_test_file
from tritonguard.core.series_notation import (
    SeriesNotationError,
    count_points,
    expand,
    parse_series_selector,
)
from tritonguard.runtime.alertmanager_webhook import WebhookError, parse_webhook, parse_webhook_body
from tritonguard.sources.replay import TraceError, load_trace

ROOT = Path(__file__).resolve().parents[2]
# CPU seconds of the parsing thread, so that a machine busy with other work does not count:
# the inputs are at most a few hundred lines, which every parser here reads in milliseconds.
# A parser that backtracks or loops shows as seconds.
LIMIT_S = 2.0
CATALOG = catalog()
# A fuzzer wants more examples than a property test: at least this many, more in long runs.
FUZZ = settings(max_examples=max(settings().max_examples, 500))


def _texts(pattern: str) -> list[str]:
    return [p.read_text() for p in sorted(ROOT.glob(pattern))]


EXPOSITIONS = [
    *_texts("tests/fixtures/expositions/*.prom"),
    *_texts("benchmarks/data/triton_50_models.prom"),
]
TRACES = [
    gzip.decompress(p.read_bytes()).decode()
    for p in sorted((ROOT / "tests/fixtures/traces").glob("*_holdout.om.gz"))[:3]
]
PLAYBOOKS = _texts("playbooks/*.yaml")
PLAYBOOK_TESTS = _texts("playbooks/tests/*.test.yaml")
assert EXPOSITIONS and TRACES and PLAYBOOKS and PLAYBOOK_TESTS, "the fuzz corpus is missing"

# ---- what every parser must do ------------------------------------------------------------


def _bounded(parse: Callable[[], object], error: type[Exception]) -> Exception | None:
    """Run ``parse``; return its documented error (checked to be one line), or None.

    Any other exception propagates and fails the test, with the input Hypothesis shrank to.
    """
    start = time.thread_time()
    try:
        parse()
    except error as exc:
        return exc
    finally:
        elapsed = time.thread_time() - start
        assert elapsed < LIMIT_S, f"took {elapsed:.2f} CPU seconds (limit {LIMIT_S})"
    return None


def _one_line(exc: Exception | None) -> None:
    if exc is not None:
        message = str(exc)
        assert message and "\n" not in message and "\r" not in message, repr(message)


def _one_line_each(exc: Exception | None) -> None:
    """Check that each problem of a PlaybookError (one a line) is one line and says something."""
    if exc is not None:
        assert isinstance(exc, PlaybookError)
        assert exc.problems
        for problem in exc.problems:
            assert problem and "\n" not in problem and "\r" not in problem, repr(problem)


# ---- defects this fuzzer found ------------------------------------------------------------
# Each is pinned by an explicit example that must fail (Hypothesis treats an xfail example
# like pytest's strict xfail), and generation steers around its trigger, so that the fuzzer
# goes on finding new defects instead of the same one. Remove both once the parser is fixed.

_INT_DIGITS = (
    "int() refuses more than 4300 digits: the ValueError escapes instead of the parser's error"
)
EXPOSITION_LONG_TIMESTAMP = (
    f"core/exposition.py, _ChunkParser.feed: a 0.0.4 timestamp reaches int(raw_ts); {_INT_DIGITS}"
)
SERIES_LONG_COUNT = (
    "core/series_notation.py, _count: a count of 4300+ digits, mostly leading zeros, passes "
    f"the 12-digit check and reaches int(times); {_INT_DIGITS}"
)
SERIES_BAD_ESCAPE = (
    "core/series_notation.py, _unescape: a \\U escape past U+10FFFF reaches chr(), whose "
    "ValueError (OverflowError past 2**31) escapes instead of SeriesNotationError"
)
EXPOSITION_WHITESPACE_LINE = (
    "core/exposition.py, _garbled: a line of only non-ASCII whitespace (\\x0b, \\x0c, "
    "\\x1c-\\x1f, \\x85, \\xa0, \\u2000-\\u200a, \\u2028, \\u3000...) strips to '' and "
    "line[0] raises IndexError"
)
YAML_READER_ERROR = (
    "core/playbook_model.py, load_yaml_documents: a character YAML may not hold (a control "
    "character) is worded with PyYAML's two-line message, so one problem spans two lines"
)
TEMPLATE_UNKNOWN_FILTER = (
    "core/templating.py, check_template: a template with an unknown filter ({{ x | nosuch }}) "
    "parses, then jinja2.meta.find_undeclared_variables compiles it outside the try, and "
    "jinja2's TemplateAssertionError escapes instead of a PlaybookError problem"
)
YAML_CORE_TAG = (
    "core/playbook_model.py, _convert: PyYAML's constructors for explicit core tags fail "
    "outside YAMLError on values they cannot convert (!!int x: ValueError, an empty !!float: "
    "IndexError, !!bool x: KeyError, !!timestamp x: AttributeError); load_yaml_documents "
    "catches only YAMLError, so the loaders crash instead of naming file:line"
)
_CORE_TAG = re.compile(r"!!(?:int|float|bool|timestamp)\b")
_LONG_DIGITS = re.compile(r"[0-9]{4000,}")
_BAD_ESCAPE = re.compile(r"\\U[0-9a-fA-F]{8}")
_NON_PRINTABLE = Reader.NON_PRINTABLE  # what PyYAML's reader refuses


def _short_digits(text: str) -> str:
    """Cut digit runs below int()'s limit (the two int() defects above)."""
    return _LONG_DIGITS.sub(lambda m: m.group()[:40], text)


def _no_whitespace_lines(text: str) -> str:
    """Blank the lines that are only Python whitespace (the IndexError defect above)."""
    return "\n".join("" if not line.strip() else line for line in text.split("\n"))


def _no_bad_escape(text: str) -> str:
    r"""Turn \U escapes past U+10FFFF into valid ones (the chr() defect above)."""
    return _BAD_ESCAPE.sub(
        lambda m: m.group() if int(m.group()[2:], 16) <= 0x10FFFF else "\\U0001F600", text
    )


_TEMPLATE = re.compile(r"\{\{.*?\}\}|\{%.*?%\}", re.DOTALL)
_FILTER = re.compile(r"\|([ \t]*)([A-Za-z_][A-Za-z0-9_.]*)")  # jinja2 allows dotted names
_KNOWN_FILTERS = frozenset(jinja2.Environment().filters)


def _known_filters(text: str) -> str:
    """Turn unknown filters inside templates into a known one (the filter defect above)."""

    def fix(block: re.Match[str]) -> str:
        return _FILTER.sub(
            lambda m: m.group() if m.group(2) in _KNOWN_FILTERS else f"|{m.group(1)}string",
            block.group(),
        )

    return _TEMPLATE.sub(fix, text)


def _no_core_tags(text: str) -> str:
    """Turn explicit int, float, bool and timestamp tags into !!str (the tag defect above)."""
    return _CORE_TAG.sub("!!str", text)


def _printable(text: str) -> str:
    """Drop characters PyYAML's reader refuses (the two-line message defect above)."""
    return _NON_PRINTABLE.sub("", text)


# ---- mutation of real inputs --------------------------------------------------------------

ANY_CHAR = st.characters(codec="utf-8", exclude_categories=["Cs"])


@st.composite
def windows(draw: st.DrawFn, corpus: list[str], max_lines: int) -> str:
    """Draw a run of consecutive lines from one document of the corpus."""
    # An index, not the document: a 200 kB document in every example's repr costs time.
    lines = corpus[draw(st.integers(0, len(corpus) - 1))].splitlines(keepends=True)
    if len(lines) <= max_lines:
        return "".join(lines)
    start = draw(st.integers(0, len(lines) - max_lines))
    return "".join(lines[start : start + draw(st.integers(1, max_lines))])


@st.composite
def mutated(draw: st.DrawFn, base: st.SearchStrategy[str], tokens: list[str]) -> str:
    """Draw a document and damage it a few times, with tokens of its format or any text."""
    text = draw(base)
    pieces = st.sampled_from(tokens) | st.text(ANY_CHAR, max_size=8)
    for _ in range(draw(st.integers(1, 5))):
        op = draw(
            st.sampled_from(
                ["insert", "delete", "replace", "dup_line", "drop_line", "swap", "cut", "repeat"]
            )
        )
        at = draw(st.integers(0, len(text)))
        span = draw(st.integers(0, 40))
        lines = text.splitlines(keepends=True)
        if op == "insert":
            text = text[:at] + draw(pieces) + text[at:]
        elif op == "delete":
            text = text[:at] + text[at + span :]
        elif op == "replace":
            text = text[:at] + draw(pieces) + text[at + span :]
        elif op == "repeat":
            text = text[:at] + text[at : at + span] * draw(st.integers(2, 20)) + text[at:]
        elif op == "cut":
            text = text[:at]
        elif lines:
            i = draw(st.integers(0, len(lines) - 1))
            j = draw(st.integers(0, len(lines) - 1))
            if op == "dup_line":
                lines.insert(j, lines[i])
            elif op == "drop_line":
                del lines[i]
            else:
                lines[i], lines[j] = lines[j], lines[i]
            text = "".join(lines)
    return text


# ---- expositions --------------------------------------------------------------------------

EXPOSITION_TOKENS = [
    "{", "}", '"', "\\", '\\"', "\\n", "\\\\", "\n", "\r\n", "\r", " ", "\t", "=", ",", "#",
    "# TYPE nv_inference_count counter\n", "# TYPE x untyped\n", "# TYPE x gaugehistogram\n",
    "# HELP nv_inference_count help \\\\ text\n", "# UNIT x seconds\n", "# EOF\n", "# EOF",
    "NaN", "+Inf", "-Inf", "inf", "Infinity", "1e309", "-0", "0x1p3", "1_000", ".5", "5.",
    "\x00", "\ufeff", "\u2028", "\x85", "é", "𝛑", ' # {trace_id="a"} 1 1', " # {} 1",
    "_total", "_created", "_bucket", 'le="+Inf"', 'quantile="0.99"', "9" * 30, "9" * 5000,
    ' 1700000000.5', " 1700000000000", " -1", 'a="b",a="b"', "{}", '{,}', "{a=b}",
]  # fmt: skip
metric_names = st.sampled_from(
    ["nv_inference_count", "nv_gpu_utilization", "DCGM_FI_DEV_GPU_UTIL", "up", "a:b", "_x"]
) | st.from_regex(r"[a-zA-Z_:][a-zA-Z0-9_:]{0,12}", fullmatch=True)
label_pairs = st.lists(
    st.tuples(
        st.from_regex(r"[a-zA-Z_][a-zA-Z0-9_]{0,8}", fullmatch=True),
        st.text(ANY_CHAR, max_size=8).map(
            lambda v: v.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
        ),
    ),
    max_size=4,
).map(lambda pairs: "{" + ",".join(f'{k}="{v}"' for k, v in pairs) + "}" if pairs else "")
sample_values = st.sampled_from(["0", "1", "-2.5e10", "NaN", "+Inf", "-Inf", "1e309"]) | st.floats(
    allow_nan=True
).map(repr)
timestamps = st.sampled_from(["", " 1700000000", " 1700000000.25", " 1700000000123"]) | (
    st.integers(-(10**20), 10**20).map(lambda t: f" {t}")
)
sample_lines = st.builds(
    lambda n, labels, v, ts: f"{n}{labels} {v}{ts}\n",
    metric_names,
    label_pairs,
    sample_values,
    timestamps,
)
meta_lines = st.builds(
    lambda kind, n, rest: f"# {kind} {n} {rest}\n",
    st.sampled_from(["HELP", "TYPE", "UNIT"]),
    metric_names,
    st.sampled_from(["counter", "gauge", "summary", "histogram", "unknown", "info", "bogus", ""])
    | st.text(ANY_CHAR, max_size=10),
)
generated_expositions = st.lists(
    sample_lines | meta_lines | st.just("# EOF\n") | st.just("\n"), max_size=30
).map("".join)
exposition_texts = (
    mutated(windows(EXPOSITIONS, 120), EXPOSITION_TOKENS)
    | generated_expositions
    | st.text(ANY_CHAR, max_size=300)
).map(lambda t: _no_whitespace_lines(_short_digits(t)))


@FUZZ
@given(text=exposition_texts, openmetrics=st.sampled_from([None, True, False]))
@example(text="\x1f", openmetrics=None).xfail(raises=IndexError, reason=EXPOSITION_WHITESPACE_LINE)
@example(text="a 1\n\xa0\n", openmetrics=False).xfail(
    raises=IndexError, reason=EXPOSITION_WHITESPACE_LINE
)
@example(text="a 1 " + "9" * 5000 + "\n", openmetrics=False).xfail(
    raises=ValueError, reason=EXPOSITION_LONG_TIMESTAMP
)
@example(text="a 1 " + "9" * 5000 + "\n# EOF\n", openmetrics=True)
@example(text='a{b="\\q"} 1\n', openmetrics=None)
def test_an_exposition_parses_or_fails_with_one_line(text: str, openmetrics: bool | None) -> None:
    """parse_exposition raises ExpositionError alone, one line, in bounded time (0.0.4 and OM)."""
    _one_line(
        _bounded(
            lambda: parse_exposition(
                text, source="fuzz", openmetrics=openmetrics, max_samples=10_000
            ),
            ExpositionError,
        )
    )


# ---- traces -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def trace_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Return a directory for the trace file each example writes (one file, rewritten)."""
    return tmp_path_factory.mktemp("fuzz-traces")


@st.composite
def trace_files(draw: st.DrawFn) -> tuple[str, bytes]:
    """Draw a trace file: plain or gzipped text, or a gzip stream damaged after compression."""
    base = windows(TRACES, 80).map(lambda t: t + "# EOF\n") | windows(TRACES, 80)
    text = draw(mutated(base, [*EXPOSITION_TOKENS, "# EOF\n"]) | base)
    raw = text.encode("utf-8", "surrogatepass")
    form = draw(st.sampled_from(["plain", "gzip", "gzip-damaged", "bytes"]))
    if form == "plain":
        return ".om", raw
    if form == "bytes":
        return ".om", draw(st.binary(max_size=400))
    packed = bytearray(gzip.compress(raw))
    if form == "gzip-damaged" and packed:
        for _ in range(draw(st.integers(1, 4))):
            at = draw(st.integers(0, len(packed) - 1))
            packed[at] = draw(st.integers(0, 255))
        if draw(st.booleans()):
            del packed[draw(st.integers(0, len(packed))) :]
    return draw(st.sampled_from([".om.gz", ".om"])), bytes(packed)


@FUZZ
@given(trace=trace_files())
@example(trace=(".om.gz", b"\x1f\x8b"))
@example(trace=(".om.gz", gzip.compress(b"a 1 1\n")[:-8]))
@example(trace=(".om", zlib.compress(b"a 1 1\n# EOF\n")))
def test_a_trace_loads_or_fails_with_one_line(trace_dir: Path, trace: tuple[str, bytes]) -> None:
    """load_trace raises TraceError alone, one line, in bounded time: gzipped, plain or damaged."""
    suffix, data = trace
    path = trace_dir / f"trace{suffix}"
    path.write_bytes(data)
    _one_line(_bounded(lambda: load_trace(path), TraceError))


# ---- series notation ----------------------------------------------------------------------

SERIES_TOKENS = [
    "+", "-", "x", "_", "stale", "e", "E", "Inf", "NaN", "inf", " ", "\t", "\n", ".", "0x3",
    "1e309", "9" * 13, "0" * 20 + "1", "x0", "_x", "x" + "9" * 12, "1s", "5m", "1+1", "+-",
    "{", "}", "=", "!=", "=~", ",", '"', "'", "`", "\\", "\\n", "\\x4", "\\u00e9", "\\U0001F600",
    "__name__", 'a="b"', "é",
]  # fmt: skip
SELECTORS = [
    'nv_inference_count{model="resnet",version="1",namespace="prod",pod="triton-0"}',
    "{__name__='up', job=`x`}",
    'up{a="\\"\\n\\\\"}',
]
VALUES = ["0+25x24 625+25x23", "_x3 1 stale -2-1x4 1e3", "0x24 0x23", "8.675e+06+2.255e+06x23"]


selector_texts = (
    mutated(st.sampled_from(SELECTORS), SERIES_TOKENS)
    | st.text(ANY_CHAR, max_size=60)
    | st.lists(st.sampled_from(SERIES_TOKENS), max_size=12).map("".join)
).map(_no_bad_escape)
value_texts = (
    mutated(st.sampled_from(VALUES), SERIES_TOKENS)
    | st.text(ANY_CHAR, max_size=60)
    | st.lists(st.sampled_from(SERIES_TOKENS), max_size=12).map("".join)
).map(_short_digits)
_BAD_ESCAPE_RAISES = (ValueError, OverflowError)


@FUZZ
@given(text=selector_texts)
@example(text='up{a="\\U00110000"}').xfail(raises=_BAD_ESCAPE_RAISES, reason=SERIES_BAD_ESCAPE)
@example(text="up{a='\\UFFFFFFFF'}").xfail(raises=_BAD_ESCAPE_RAISES, reason=SERIES_BAD_ESCAPE)
def test_a_series_selector_parses_or_fails_with_one_line(text: str) -> None:
    """parse_series_selector raises SeriesNotationError alone, one line, in bounded time."""
    _one_line(_bounded(lambda: parse_series_selector(text), SeriesNotationError))


@FUZZ
@given(values=value_texts, max_points=st.sampled_from([None, 10, 100_000]))
@example(values="1+1x" + "9" * 12, max_points=None)
@example(values="0x" + "0" * 5000 + "1", max_points=10).xfail(
    raises=ValueError, reason=SERIES_LONG_COUNT
)
def test_a_values_string_expands_or_fails_with_one_line(
    values: str, max_points: int | None
) -> None:
    """Expanding agrees with counting; both raise SeriesNotationError alone, one line, bounded.

    Without a cap, only strings that count to a modest number of points are expanded (a
    values string may legitimately ask for a year of samples).
    """
    counted: list[int] = []
    error = _bounded(lambda: counted.append(count_points(values)), SeriesNotationError)
    _one_line(error)
    if error is None and (max_points is not None or counted[0] <= 100_000):
        points: list[Any] = []
        expanded = _bounded(
            lambda: points.extend(expand(values, start=0.0, interval=5.0, max_points=max_points)),
            SeriesNotationError,
        )
        _one_line(expanded)
        if expanded is None:
            assert len(points) == counted[0]
        else:
            assert max_points is not None and counted[0] > max_points


# ---- playbooks and their test files -------------------------------------------------------

YAML_TOKENS = [
    ":", ": ", "- ", "-", "  ", "\t", "\n", "#", "'", '"', "{", "}", "[", "]", ",", "&a ", "*a",
    "&a [*a, *a, *a]", "!!python/object:os.system", "!!binary", "!!float", "? ", "|", ">",
    "---\n", "...\n", "%YAML 1.1\n", "~", "null", "true", "yes", "no", ".nan", ".inf", "-.inf",
    "-1", "0", "1e999", "0x10", "0o7", "1_000", "30s", "5m", "1h", "250ms", "-5s", "1y",
    "{{ model }}", "{{ incident.cause }}", "{% for x in y %}", "{{", "}}", "{{ 1/0 }}",
    "triton.update_config", "kubernetes.scale", "slack.post", "verify", "held_for",
    "cooldown", "max_runs_per_hour", "bounds", "dry_run", "restore_on_resolve", "\x00",
    "\ufeff", "é", "x" * 300, "<<: *a",
]  # fmt: skip
playbook_texts = (
    mutated(st.sampled_from(PLAYBOOKS), YAML_TOKENS)
    | st.lists(st.sampled_from(PLAYBOOKS), min_size=1, max_size=3).map("\n---\n".join)
    | st.text(ANY_CHAR, max_size=300)
).map(lambda t: _no_core_tags(_known_filters(_printable(t))))
test_file_texts = (
    mutated(st.sampled_from(PLAYBOOK_TESTS), [*YAML_TOKENS, *SERIES_TOKENS])
    | st.text(ANY_CHAR, max_size=300)
).map(lambda t: _no_core_tags(_short_digits(_no_bad_escape(_printable(t)))))


@FUZZ
@given(text=playbook_texts)
@example(text="\x1f").xfail(raises=AssertionError, reason=YAML_READER_ERROR)
@example(text="name: x\x00\n").xfail(raises=AssertionError, reason=YAML_READER_ERROR)
@example(
    text="name: x\nwhen: {causes: [cold_start]}\nsteps:\n"
    "- {action: slack.post, params: {text: '{{ model | nosuchfilter }}'}}\n"
).xfail(raises=jinja2.TemplateAssertionError, reason=TEMPLATE_UNKNOWN_FILTER)
@example(text="!!float").xfail(raises=IndexError, reason=YAML_CORE_TAG)
@example(text="name: !!int x\n").xfail(raises=ValueError, reason=YAML_CORE_TAG)
@example(text="name: !!bool x\n").xfail(raises=KeyError, reason=YAML_CORE_TAG)
@example(text="name: !!timestamp x\n").xfail(raises=AttributeError, reason=YAML_CORE_TAG)
@example(text="a: &a [*a]\n")
@example(
    text="name: x\nwhen: {causes: [cold_start]}\nsteps: [{action: verify, params: {wait: .nan}}]"
)
def test_a_playbook_file_loads_or_fails_with_one_line_per_problem(text: str) -> None:
    """load_playbooks_text raises PlaybookError alone, one line per problem, in bounded time."""
    _one_line_each(_bounded(lambda: load_playbooks_text(text, "fuzz.yaml", CATALOG), PlaybookError))


_TEST_FILE_WITH_BAD_ESCAPE = PLAYBOOK_TESTS[0].replace("{model=", '{x="\\U00110000",model=', 1)


_TEST_FILE_WITH_LONG_COUNT = PLAYBOOK_TESTS[0].replace(
    "values: 0+25x24 ", "values: 0+25x" + "0" * 5000 + "24 ", 1
)


@FUZZ
@given(text=test_file_texts)
@example(text=_TEST_FILE_WITH_BAD_ESCAPE).xfail(raises=_BAD_ESCAPE_RAISES, reason=SERIES_BAD_ESCAPE)
@example(text=_TEST_FILE_WITH_LONG_COUNT).xfail(raises=ValueError, reason=SERIES_LONG_COUNT)
@example(text="\x1f").xfail(raises=AssertionError, reason=YAML_READER_ERROR)
@example(text="tests: !!int x\n").xfail(raises=ValueError, reason=YAML_CORE_TAG)
@example(text="tests: [{name: a, input_series: [{series: 'up', values: '1x999999999999'}]}]")
def test_a_playbook_test_file_parses_or_fails_with_one_line_per_problem(text: str) -> None:
    """parse_test_file raises PlaybookError alone, one line per problem, in bounded time."""
    _one_line_each(_bounded(lambda: parse_test_file(text, "fuzz.test.yaml"), PlaybookError))


# ---- the Alertmanager webhook -------------------------------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=12,
)
alerts = st.fixed_dictionaries(
    {"status": st.sampled_from(["firing", "resolved", "pending"]) | json_values},
    optional={
        "labels": st.dictionaries(st.text(max_size=8), st.text(max_size=8), max_size=3)
        | json_values,
        "annotations": st.dictionaries(st.text(max_size=8), st.text(max_size=8)) | json_values,
        "startsAt": st.just("2026-01-01T00:00:00Z") | json_values,
        "fingerprint": st.text(max_size=16) | json_values,
        "generatorURL": st.text(max_size=16),
    },
)
payloads = (
    st.fixed_dictionaries(
        {},
        optional={
            "version": st.sampled_from(["4", 4, "3", ""]) | json_values,
            "alerts": st.lists(alerts, max_size=3) | json_values,
            "status": st.sampled_from(["firing", "resolved"]),
            "groupKey": st.text(max_size=10),
        },
    )
    | json_values
)
JSON_TOKENS = [
    "{", "}", "[", "]", '"', "\\", '\\"', "\\u", "\\ud800", ":", ",", "null", "1e999", "-",
    "9" * 5000, "[" * 50, "{" * 50, "\x00", "\ufeff", "é", "NaN", "Infinity",
]  # fmt: skip


def _body_text(payload: object) -> str:
    return json.dumps(payload)


bodies = (
    payloads.map(_body_text).map(lambda t: t.encode())
    | mutated(payloads.map(_body_text), JSON_TOKENS).map(
        lambda t: t.encode("utf-8", "surrogatepass")
    )
    | st.binary(max_size=300)
)


@FUZZ
@given(body=bodies, max_depth=st.sampled_from([4, 8, 64]))
@example(body=b"\xef\xbb\xbf" + b'{"version": "4", "alerts": []}', max_depth=8)
@example(body=b"[" * 100_000, max_depth=64)
@example(
    body=b'{"version": "4", "alerts": [{"status": "firing", "labels": {"a": []}}]}', max_depth=8
)
def test_a_webhook_body_parses_or_fails_with_one_line(body: bytes, max_depth: int) -> None:
    """parse_webhook_body raises WebhookError alone, one line, in bounded time."""
    _one_line(_bounded(lambda: parse_webhook_body(body, max_depth=max_depth), WebhookError))


@FUZZ
@given(payload=payloads)
def test_a_decoded_webhook_payload_parses_or_fails_with_one_line(payload: object) -> None:
    """parse_webhook, on any JSON value, raises WebhookError alone with a one-line reason."""
    _one_line(_bounded(lambda: parse_webhook(payload), WebhookError))


def _iter_corpus() -> Iterator[tuple[str, str]]:
    yield from (("exposition", t) for t in EXPOSITIONS)
    yield from (("playbook", t) for t in PLAYBOOKS)


def test_the_unmutated_corpus_parses() -> None:
    """The seeds themselves are valid: mutations start from inputs the parsers accept."""
    for kind, text in _iter_corpus():
        if kind == "exposition":
            assert parse_exposition(text).samples
        else:
            assert load_playbooks_text(text, "shipped.yaml", CATALOG)
    for text in PLAYBOOK_TESTS:
        assert parse_test_file(text, "shipped.test.yaml").tests
