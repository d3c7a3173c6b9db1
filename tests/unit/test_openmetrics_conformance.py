"""The parser against the OpenMetrics conformance suite: every valid case read, every invalid refused.

The cases are the OpenMetrics project's own (vendored under
``tests/fixtures/openmetrics_conformance``). An invalid case the parser accepts must be listed
in ``ACCEPTED_BY_POLICY`` with the reason accepting it cannot make evidence wrong; the
parser's module docstring states the same policy.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from tritonguard.core.exposition import (
    Exposition,
    ExpositionError,
    SeriesCache,
    parse_exposition,
)
from tritonguard.core.metric_names import is_counter

SUITE = Path(__file__).parent.parent / "fixtures" / "openmetrics_conformance" / "parsers"

# Invalid OpenMetrics the parser reads anyway, and why that is safe.
ACCEPTED_BY_POLICY: dict[str, str] = {
    "bad_unit_4": (
        "a '# UNIT' that is not a suffix of the family name: units are metadata the engine "
        "never reads, and the samples are read exactly as without the line"
    ),
}


def _cases() -> list[tuple[str, bool]]:
    cases = []
    for case in sorted(SUITE.iterdir()):
        spec = json.loads((case / "test.json").read_text())
        assert spec["type"] == "text" and spec["file"] == "metrics"
        cases.append((case.name, bool(spec["shouldParse"])))
    return cases


CASES = _cases()
VALID = [name for name, ok in CASES if ok]
INVALID = [name for name, ok in CASES if not ok]


def _text(name: str) -> str:
    return (SUITE / name / "metrics").read_bytes().decode("utf-8")


def _parse_twice(text: str) -> tuple[Exposition, Exposition]:
    """Parse with a fresh cache, then again with it warm: both paths of the parser."""
    cache = SeriesCache()
    first = parse_exposition(text, openmetrics=True, source="case", cache=cache)
    second = parse_exposition(text, openmetrics=True, source="case", cache=cache)
    return first, second


def _rows(exposition: Exposition) -> list[tuple[object, ...]]:
    # repr() makes NaN equal to NaN for the comparison.
    return [(s.name, s.labels, repr(s.value), s.timestamp) for s in exposition.samples]


def test_the_vendored_suite_is_complete() -> None:
    """The copy holds all 211 cases upstream has: 44 valid and 167 invalid."""
    assert (len(VALID), len(INVALID)) == (44, 167)


@pytest.mark.parametrize("name", VALID)
def test_valid_case_is_read(name: str) -> None:
    """A valid case parses, and reads the same when its series are already cached."""
    first, second = _parse_twice(_text(name))
    assert _rows(first) == _rows(second)
    assert first.types == second.types and first.help == second.help


@pytest.mark.parametrize("name", INVALID)
def test_invalid_case_is_refused_or_accepted_by_policy(name: str) -> None:
    """An invalid case is refused with a one-line error, cold or warm, unless policy accepts it."""
    text = _text(name)
    if name in ACCEPTED_BY_POLICY:
        first, second = _parse_twice(text)
        assert _rows(first) == _rows(second)
        return
    cache = SeriesCache()
    for _ in range(2):
        with pytest.raises(ExpositionError) as info:
            parse_exposition(text, openmetrics=True, source="case", cache=cache)
        assert "\n" not in str(info.value)
        assert str(info.value).startswith("case:")


def test_every_policy_entry_is_an_invalid_case() -> None:
    """The policy list names only invalid cases of the suite (no stale entries)."""
    assert set(ACCEPTED_BY_POLICY) <= set(INVALID)


def test_no_accepted_case_gives_a_counter_that_is_nan_or_negative() -> None:
    """No sample of any accepted case is a NaN or negative counter-like value."""
    for name in VALID + list(ACCEPTED_BY_POLICY):
        exposition = parse_exposition(_text(name), openmetrics=True, cache=SeriesCache())
        for s in exposition.samples:
            counter_like = s.name.endswith(("_total", "_count", "_bucket", "_gcount"))
            if counter_like or (is_counter(s.name) and s.name.endswith("_sum")):
                assert not math.isnan(s.value) and s.value >= 0, (name, s)


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("bad_counter_values_1", "cannot be negative"),
        ("bad_counter_values_0", "NaN"),
        ("bad_blank_line", "blank line"),
        ("bad_grouping_or_ordering_4", "goes back"),
        ("bad_grouping_or_ordering_0", 'lacks its le="+Inf" bucket'),
        ("bad_histograms_9", "increasing 'le'"),
        ("bad_exemplars_on_unallowed_metric_types_0", "exemplars are allowed only"),
        ("bad_metadata_in_wrong_place_0", "after its samples"),
        ("bad_repeated_metadata_1", "a second '# HELP'"),
        ("bad_clashing_names_2", "clashes"),
        ("bad_type_7", "untyped"),
        ("bad_text_after_eof_0", "content after '# EOF'"),
    ],
)
def test_refusals_name_the_rule(name: str, reason: str) -> None:
    """A refused case says which rule it broke, in words a user can act on."""
    with pytest.raises(ExpositionError) as info:
        parse_exposition(_text(name), openmetrics=True, cache=SeriesCache())
    assert reason in info.value.reason


def test_unknown_label_escapes_pass_through_in_openmetrics() -> None:
    r"""OpenMetrics keeps an unknown escape such as \z as written; known ones decode."""
    exposition = parse_exposition(
        '# TYPE a counter\na_total{foo="b\\\\a\\z",bar="x\\"y\\n"} 2\n# EOF\n',
        openmetrics=True,
        cache=SeriesCache(),
    )
    assert exposition.samples[0].labels == (("bar", 'x"y\n'), ("foo", "b\\a\\z"))


def test_a_family_repeated_with_its_metadata_keeps_its_samples() -> None:
    """A trace concatenating scrapes repeats each family's '# TYPE': that is accepted."""
    text = "# TYPE a gauge\na 1 10\n# TYPE b gauge\nb 1 10\n# TYPE a gauge\na 2 25\n# EOF\n"
    exposition = parse_exposition(text, cache=SeriesCache())
    assert [(s.name, s.value) for s in exposition.samples] == [("a", 1), ("b", 1), ("a", 2)]


def test_a_family_repeated_without_its_metadata_is_refused() -> None:
    """Without repeated metadata, a family's samples must stay together."""
    text = "# TYPE a gauge\na 1 10\n# TYPE b gauge\nb 1 10\na 2 25\n# EOF\n"
    with pytest.raises(ExpositionError, match="stay together") as info:
        parse_exposition(text, cache=SeriesCache())
    assert info.value.line == 5


def test_a_metric_split_by_another_is_refused() -> None:
    """One metric's points must stay together within its family."""
    text = '# TYPE a gauge\na{x="1"} 1 10\na{x="2"} 1 10\na{x="1"} 2 20\n# EOF\n'
    with pytest.raises(ExpositionError, match="split by other metrics") as info:
        parse_exposition(text, cache=SeriesCache())
    assert info.value.line == 4


def test_text_format_keeps_its_leniency() -> None:
    """0.0.4 still reads blank lines, comments, trailing commas and double spaces."""
    text = '# a comment\n\na{x="1",}  1\n# TYPE b counter\nb -1\n'
    exposition = parse_exposition(text, cache=SeriesCache())
    assert [(s.name, s.labels, s.value) for s in exposition.samples] == [
        ("a", (("x", "1"),), 1.0),
        ("b", (), -1.0),
    ]
