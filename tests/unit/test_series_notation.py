"""promtool series notation: expanding values and series selectors, with positioned errors."""

from __future__ import annotations

import math

import pytest

from tritonguard.core.series_notation import (
    STALE,
    SeriesNotationError,
    count_points,
    expand,
    is_stale,
    parse_series_selector,
)


def _values(text: str) -> list[float | None]:
    return [v for _, v in expand(text, start=0, interval=60)]


def test_increment_gives_n_plus_one_values_at_interval_steps() -> None:
    """'0+10x3' is 0 10 20 30, at start, start+interval, ..."""
    assert expand("0+10x3", start=1000, interval=60) == [
        (1000.0, 0.0), (1060.0, 10.0), (1120.0, 20.0), (1180.0, 30.0),
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("text", "values"),
    [
        ("-2+4x3", [-2.0, 2.0, 6.0, 10.0]),  # promtool docs example 1
        (" 1-2x4", [1.0, -1.0, -3.0, -5.0, -7.0]),  # example 2
        (" 1x4", [1.0, 1.0, 1.0, 1.0, 1.0]),  # example 3: shorthand for 1+0x4
        ("1 _x3 2", [1.0, None, None, None, 2.0]),  # _xn is n missing, not n+1
        ("1 _ 3", [1.0, None, 3.0]),
        ("1 -2x2", [1.0, -2.0, -2.0, -2.0]),  # a space makes -2x2 its own item
        ("0x3", [0.0, 0.0, 0.0, 0.0]),  # not hexadecimal
        ("1.5e3 +2", [1500.0, 2.0]),
        ("1+1x0", [1.0]),
        ("", []),
    ],
)
def test_expansion_forms(text: str, values: list[float | None]) -> None:
    """Each promtool form expands as promtool documents it."""
    assert _values(text) == values


def test_increments_accumulate_like_promtool() -> None:
    """Steps are added one at a time, so floating error matches promtool's own values."""
    assert _values("0.1+0.1x3") == [0.1, 0.2, 0.1 + 0.1 + 0.1, 0.1 + 0.1 + 0.1 + 0.1]


def test_stale_and_special_values() -> None:
    """'stale' is the staleness NaN; Inf and NaN are numbers; a plain NaN is not stale."""
    values = _values("stale Inf -Inf NaN")
    assert is_stale(values[0]) and is_stale(STALE)
    assert values[1:3] == [math.inf, -math.inf]
    assert math.isnan(values[3]) and not is_stale(values[3])  # type: ignore[arg-type]
    assert not is_stale(None) and not is_stale(1.0)


@pytest.mark.parametrize(
    ("text", "column", "reason"),
    [
        ("1+2", 1, "lacks its count"),
        ("1 2 ,", 5, "cannot read ','"),
        ("0+1x", 1, "cannot read '0+1x'"),
        ("1 5m", 3, "durations like '5m' are not supported"),
        ("stalex3", 1, "cannot read 'stalex3'"),
        ("1 abc", 3, "cannot read 'abc'"),
        ("1 x3", 3, "cannot read 'x3'"),
        ("1 0x-3", 3, "cannot read '0x-3'"),
    ],
)
def test_bad_values_name_the_column(text: str, column: int, reason: str) -> None:
    """A malformed values string raises SeriesNotationError with the 1-based column and a fix."""
    with pytest.raises(SeriesNotationError) as info:
        expand(text, start=0, interval=1)
    assert info.value.position == column - 1
    assert reason in info.value.reason
    assert str(info.value).startswith(f"column {column} of {text!r}: ")
    assert "\n" not in str(info.value)


def test_selector_forms() -> None:
    """Metric names, label sets in any order, escapes, other quotes and __name__ all parse."""
    assert parse_series_selector('up{job="prometheus", instance="localhost:9090"}') == (
        "up",
        (("instance", "localhost:9090"), ("job", "prometheus")),
    )
    assert parse_series_selector("nv_inference_count") == ("nv_inference_count", ())
    assert parse_series_selector(" m{} ") == ("m", ())
    assert parse_series_selector('m{a="x\\"y\\n",b=\'q\',c=`r\\s`,}') == (
        "m",
        (("a", 'x"y\n'), ("b", "q"), ("c", "r\\s")),
    )
    assert parse_series_selector('{__name__="up", job="x"}') == ("up", (("job", "x"),))


@pytest.mark.parametrize(
    ("text", "column", "reason"),
    [
        ('up{a=~"x"}', 5, "uses '=~'"),
        ('up{a!="x"}', 5, "uses '!='"),
        ('up{a="x}', 6, "unterminated quoted value"),
        ("up{a=b}", 6, "must be quoted"),
        ('up{a="1" b="2"}', 10, "expected ',' or '}'"),
        ('up{a="1"', 9, "not closed"),
        ('up{a="1",a="2"}', 12, "given twice"),
        ('up{1="2"}', 4, "expected a label name"),
        ("up x", 4, "unexpected 'x'"),
        ('{a="b"}', 1, "no metric name"),
        ('up{__name__="down"}', 1, "conflicts with __name__"),
        ('up{a="\\q"}', 6, "unknown escape"),
    ],
)
def test_bad_selectors_name_the_column(text: str, column: int, reason: str) -> None:
    """A malformed selector raises SeriesNotationError with the column and what to write."""
    with pytest.raises(SeriesNotationError) as info:
        parse_series_selector(text)
    assert info.value.position == column - 1
    assert reason in info.value.reason


def test_counting_checks_and_counts_without_expanding() -> None:
    """count_points gives the expanded length (n+1 for axn, n for _xn) of a billion cheaply."""
    assert count_points("0+1x1000000000 _x5 stale 3") == 1_000_000_001 + 5 + 1 + 1
    assert count_points("") == 0
    with pytest.raises(SeriesNotationError, match="lacks its count"):
        count_points("1+2")


def test_expansion_past_max_points_is_refused_at_the_item_before_allocating() -> None:
    """'0+1x1000000000' names the item that crosses the limit instead of using gigabytes."""
    with pytest.raises(SeriesNotationError) as info:
        expand("1 2 0+1x1000000000", start=0, interval=1, max_points=1000)
    assert info.value.position == 4 and "more than 1000 samples" in info.value.reason
    assert len(expand("0+1x999", start=0, interval=1, max_points=1000)) == 1000


def test_an_absurd_count_is_refused_before_int_reads_it() -> None:
    """Thousands of digits would make int() slow or raise a bare ValueError; not here."""
    with pytest.raises(SeriesNotationError, match="far too large") as info:
        count_points("1 1x" + "9" * 5000)
    assert info.value.position == 2
