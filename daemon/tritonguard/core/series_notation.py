"""promtool's test-series notation: `metric{a="b"}` selectors and expanding values (`0+10x3`)."""

from __future__ import annotations

import math
import re
import struct
from collections.abc import Iterator

from tritonguard.core.samples import Labels, make_labels

__all__ = [
    "STALE",
    "SeriesNotationError",
    "count_points",
    "expand",
    "is_stale",
    "parse_series_selector",
]

# Prometheus marks a stale series with this particular NaN bit pattern (value.StaleNaN).
STALE: float = struct.unpack("<d", struct.pack("<Q", 0x7FF0000000000002))[0]
_STALE_BITS = struct.pack("<d", STALE)

# No hexadecimal: promtool disallows it here, since "0x3" reads as "0, three more times".
_NUMBER = r"(?:(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?|(?i:inf|nan))"
# One item of a values string; the forms are those of promtool's series grammar:
#   _   _xN   stale   a   axN   a+bxN   a-bxN   (a itself may carry a sign)
_ITEM = re.compile(
    rf"(?P<blank>_)(?:x(?P<blank_times>[0-9]+))?"
    rf"|(?P<stale>stale)"
    rf"|(?P<start>[-+]?{_NUMBER})"
    rf"(?:(?P<step>[-+]{_NUMBER})?x(?P<times>[0-9]+))?"
)
_SPACE = re.compile(r"[ \t\n]+")
_METRIC = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_LABEL = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
_QUOTED = {
    '"': re.compile(r'"((?:[^"\\\n]|\\.)*)"'),
    "'": re.compile(r"'((?:[^'\\\n]|\\.)*)'"),
    "`": re.compile(r"`([^`]*)`"),
}
_ESCAPES = {"\\": "\\", '"': '"', "'": "'", "n": "\n", "t": "\t", "r": "\r", "a": "\a",
            "b": "\b", "f": "\f", "v": "\v"}  # fmt: skip
_ESCAPE = re.compile(r"\\(u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8}|x[0-9a-fA-F]{2}|.)")


class SeriesNotationError(ValueError):
    """A malformed values string or series selector; ``position`` is the 0-based column."""

    def __init__(self, text: str, position: int, reason: str) -> None:
        super().__init__(f"column {position + 1} of {text!r}: {reason}")
        self.text = text
        self.position = position
        self.reason = reason


def is_stale(value: float | None) -> bool:
    """Tell whether a value is Prometheus's staleness marker (a NaN unlike other NaNs)."""
    return value is not None and math.isnan(value) and struct.pack("<d", value) == _STALE_BITS


def count_points(values: str) -> int:
    """Return how many samples a values string expands to, checking it without expanding it.

    Raises SeriesNotationError for a malformed string, as ``expand`` would.
    """
    return sum(n for _, n, _ in _items(values))


def expand(
    values: str, *, start: float, interval: float, max_points: int | None = None
) -> list[tuple[float, float | None]]:
    """Expand a promtool values string into (timestamp, value) pairs; None marks a missing sample.

    ``a+bxn`` gives n+1 values a, a+b, ..., a+n*b (accumulated by addition, as promtool does);
    ``axn`` gives a n+1 times; ``_`` one missing sample, ``_xn`` n missing; ``stale`` the
    staleness marker (see ``is_stale``). The i-th value is at ``start + i * interval``. Past
    ``max_points`` samples a SeriesNotationError names the item that crosses it, before
    anything is allocated for it.
    """
    items = list(_items(values))
    total = 0
    for index, n, _ in items:
        total += n
        if max_points is not None and total > max_points:
            raise SeriesNotationError(
                values,
                index,
                f"expands to more than {max_points} samples; shorten the count "
                "(a+bxn gives n+1 samples) or split the series over several tests",
            )
    out: list[float | None] = []
    for _, n, m in items:
        if m.group("blank"):
            out.extend([None] * n)
        elif m.group("stale"):
            out.append(STALE)
        else:
            value = _number(m.group("start"))
            step_text = m.group("step")
            step = _number(step_text) if step_text else 0.0
            for _ in range(n):
                out.append(value)
                value += step
    return [(float(start + i * interval), value) for i, value in enumerate(out)]


# A count longer than this cannot be meant (a year of 1 s samples has 8 digits), and int() of a
# long digit string is slow, and refused outright past 4300 digits.
_MAX_COUNT_DIGITS = 12


def _items(values: str) -> Iterator[tuple[int, int, re.Match[str]]]:
    """Yield (column, samples it gives, match) for each item of a values string."""
    pos = _SPACE.match(values)
    index = pos.end() if pos else 0
    end = len(values)
    while index < end:
        m = _ITEM.match(values, index)
        token_end = index
        while token_end < end and values[token_end] not in " \t\n":
            token_end += 1
        if m is None or m.end() != token_end:
            raise SeriesNotationError(values, index, _explain(values[index:token_end]))
        if m.group("blank"):
            n = _count(m.group("blank_times"), values, index, extra=0)
        elif m.group("stale"):
            n = 1
        else:
            n = _count(m.group("times"), values, index, extra=1)
        yield index, n, m
        space = _SPACE.match(values, token_end)
        index = space.end() if space else token_end


def _count(times: str | None, values: str, index: int, *, extra: int) -> int:
    if times is None:
        return 1
    if len(times.lstrip("0")) > _MAX_COUNT_DIGITS:
        raise SeriesNotationError(
            values, index, f"the count {times[:20]}... is far too large; write a count of samples"
        )
    return int(times) + extra


def parse_series_selector(text: str) -> tuple[str, Labels]:
    """Parse ``metric{a="b", ...}`` (or ``{__name__="metric", ...}``) into (name, labels).

    Only ``=`` matchers make sense for a series to create; values may use double, single or
    back quotes as in PromQL.
    """
    index = _skip_space(text, 0)
    name = ""
    m = _METRIC.match(text, index)
    if m is not None:
        name = m.group(0)
        index = m.end()
    pairs: dict[str, str] = {}
    index = _skip_space(text, index)
    if index < len(text) and text[index] == "{":
        index += 1
        while True:
            index = _skip_space(text, index)
            if index >= len(text):
                raise SeriesNotationError(text, index, "label set is not closed; add '}'")
            if text[index] == "}":
                index += 1
                break
            lm = _LABEL.match(text, index)
            if lm is None:
                raise SeriesNotationError(text, index, "expected a label name or '}'")
            label = lm.group(0)
            index = _skip_space(text, lm.end())
            if text.startswith(("!=", "=~", "!~"), index):
                raise SeriesNotationError(
                    text,
                    index,
                    f"label {label!r} uses {text[index : index + 2]!r}; a series to create "
                    'needs exact values, write label="value"',
                )
            if index >= len(text) or text[index] != "=":
                raise SeriesNotationError(text, index, f"expected '=' after label {label!r}")
            index = _skip_space(text, index + 1)
            quote = text[index] if index < len(text) else ""
            pattern = _QUOTED.get(quote)
            if pattern is None:
                raise SeriesNotationError(
                    text, index, f'the value of label {label!r} must be quoted, e.g. "value"'
                )
            qm = pattern.match(text, index)
            if qm is None:
                raise SeriesNotationError(
                    text, index, f"unterminated quoted value of label {label!r}; close the quote"
                )
            value = qm.group(1) if quote == "`" else _unescape(qm.group(1), text, index)
            if label in pairs:
                raise SeriesNotationError(text, index, f"label {label!r} is given twice")
            pairs[label] = value
            index = _skip_space(text, qm.end())
            if index >= len(text):
                raise SeriesNotationError(text, index, "label set is not closed; add '}'")
            if text[index] == ",":
                index += 1
            elif text[index] == "}":
                index += 1
                break
            else:
                raise SeriesNotationError(
                    text, index, f"expected ',' or '}}' after the value of label {label!r}"
                )
    index = _skip_space(text, index)
    if index != len(text):
        raise SeriesNotationError(
            text, index, f"unexpected {text[index:]!r}; a series is 'metric{{label=\"value\"}}'"
        )
    metric_label = pairs.pop("__name__", None)
    if name and metric_label is not None and metric_label != name:
        raise SeriesNotationError(
            text, 0, f"metric name {name!r} conflicts with __name__={metric_label!r}"
        )
    name = name or metric_label or ""
    if not name:
        raise SeriesNotationError(text, 0, "no metric name; write 'metric{...}' or __name__=")
    return name, make_labels(pairs)


def _number(text: str) -> float:
    return float(text)


def _skip_space(text: str, index: int) -> int:
    while index < len(text) and text[index] in " \t\n":
        index += 1
    return index


def _explain(token: str) -> str:
    if re.fullmatch(r"[-+]?[0-9.eE]+[-+][0-9.eE]+", token):
        return f"{token!r} lacks its count; write e.g. {token}x10 for 11 values"
    if re.fullmatch(r"[-+]?[0-9.]+[smhdwy]+", token):
        return f"durations like {token!r} are not supported here; write the number of seconds"
    return (
        f"cannot read {token!r}; use numbers, 'a+bxn', 'a-bxn', 'axn', '_', '_xn' or 'stale', "
        "separated by spaces"
    )


def _unescape(raw: str, text: str, position: int) -> str:
    def repl(m: re.Match[str]) -> str:
        code = m.group(1)
        if code in _ESCAPES:
            return _ESCAPES[code]
        if len(code) > 1:
            return chr(int(code[1:], 16))
        raise SeriesNotationError(text, position, f"unknown escape '\\{code}' in a label value")

    return _ESCAPE.sub(repl, raw) if "\\" in raw else raw
