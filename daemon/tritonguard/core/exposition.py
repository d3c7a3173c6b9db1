r"""Parser for Prometheus text format 0.0.4 and OpenMetrics 1.0: exposition text in, samples out.

The format decides how strictly a payload is read. OpenMetrics (it ends with ``# EOF``, or
the caller knows it from the content type) is held to the OpenMetrics parser conformance
suite: every valid case is read and every invalid case refused, except for two relaxations
that cannot make evidence wrong:

- a ``# UNIT`` need not be a suffix of its family's name (the engine never reads units);
- a family may appear again after other families if its metadata is repeated first, keeping
  its type (a trace that concatenates scrapes does this).

Counter-like values that are NaN or negative are refused in OpenMetrics. The 0.0.4 text
format, which Triton serves, keeps Prometheus' leniency (blank lines, comments, any
whitespace, a trailing comma in a label set, families in any order); a NaN or negative
counter there passes the parser, and the series store takes no such point, so it can never
read as a counter reset or a rate. An unknown escape in a label value (``\z``) is kept as
written in OpenMetrics and refused in 0.0.4.

Speed: a series text (``name{labels}``) seen before is not parsed again (``SeriesCache``),
so a known line costs one partition and one lookup, and values are converted in bulk. What
the fast scan does not decide itself sends its chunk through the careful path, the
reference, which names the first problem and its line.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from itertools import chain, repeat
from operator import truediv
from typing import Any, Final

from tritonguard.core.inflate import (
    GZIP_MAGIC,
    GzipBombError,
    GzipCorruptError,
    Inflater,
    gunzip,
)
from tritonguard.core.openmetrics_rules import MAX_EXEMPLAR_CHARS, OpenMetricsRules, RuleError
from tritonguard.core.samples import Labels, Sample

__all__ = [
    "STOP",
    "Exposition",
    "ExpositionError",
    "SeriesCache",
    "SeriesEntry",
    "check_line_lengths",
    "decode_payload",
    "ends_with_eof",
    "is_eof_line",
    "is_value_token",
    "iter_exposition",
    "iter_payload_lines",
    "looks_like_openmetrics",
    "metric_name_at",
    "parse_exposition",
    "read_sample_line",
    "read_text_comment",
    "scan_timed",
    "scan_untimed",
    "shared_cache",
    "to_floats",
    "to_seconds",
]

# Types a `# TYPE` line may declare: 0.0.4 says `untyped`, OpenMetrics says `unknown`.
METRIC_TYPES = frozenset(
    {
        "counter",
        "gauge",
        "summary",
        "histogram",
        "untyped",
        "unknown",
        "gaugehistogram",
        "info",
        "stateset",
    }
)

_NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
_LABEL_NAME = r"[a-zA-Z_][a-zA-Z0-9_]*"
# Go's ParseFloat (what Prometheus uses) accepts Inf/NaN in any case; so does Python's float().
_FINITE = r"[-+]?(?:[0-9]+\.?[0-9]*(?:[eE][-+]?[0-9]+)?|\.[0-9]+(?:[eE][-+]?[0-9]+)?)"
_FLOAT = rf"(?:{_FINITE}|[-+]?(?i:nan|inf(?:inity)?))"
_MILLIS = r"[-+]?[0-9]+"
# A new label block is first tried as plain pairs (no escapes, no '}' inside values), one
# regex for the whole block; anything else is scanned character by character.
_PLAIN_PAIR = rf'[ \t]*{_LABEL_NAME}[ \t]*=[ \t]*"[^"\\\n]*"[ \t]*'
_PLAIN_BLOCK_FULL = re.compile(rf"(?:{_PLAIN_PAIR},)*(?:{_PLAIN_PAIR})?").fullmatch
_PLAIN_PAIRS = re.compile(rf'({_LABEL_NAME})[ \t]*=[ \t]*"([^"\\\n]*)"').findall

_NAME_AT = re.compile(_NAME).match
_NAME_FULL = re.compile(_NAME).fullmatch
_LABEL_NAME_AT = re.compile(_LABEL_NAME).match
_QUOTED_REST = re.compile(r'((?:[^"\\]|\\.)*)"').match
_ESCAPE = re.compile(r"\\(.)")
_FLOAT_FULL = re.compile(_FLOAT).fullmatch
_FINITE_FULL = re.compile(_FINITE).fullmatch
_MILLIS_FULL = re.compile(_MILLIS).fullmatch
# OpenMetrics' exemplar, strictly: '# {labels} value [timestamp]' with single spaces.
_EXEMPLAR_PAIR = rf'{_LABEL_NAME}="(?:[^"\\]|\\.)*"'
_EXEMPLAR_FULL = re.compile(
    rf"# \{{((?:{_EXEMPLAR_PAIR}(?:,{_EXEMPLAR_PAIR})*)?)\}} {_FLOAT}(?: {_FINITE})?"
).fullmatch
_EXEMPLAR_PAIRS = re.compile(rf'({_LABEL_NAME})="((?:[^"\\]|\\.)*)"').findall
_UNIT_FULL = re.compile(r"[a-zA-Z0-9_:]*").fullmatch
_EOF_LINE = re.compile(r"^# EOF[ \t\r]*$", re.MULTILINE)
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]").search

_LABEL_UNESCAPES = {"\\": "\\", '"': '"', "n": "\n"}
# A real 50-model Triton scrape is about 200 KB; a payload decoded whole in memory may be
# much larger than that (a small recorded trace), but not without limit.
MAX_PAYLOAD_BYTES = 256 * 1024 * 1024


class ExpositionError(ValueError):
    """A payload that is not a valid exposition; ``str()`` reads ``<source>:<line>: <reason>``."""

    def __init__(self, source: str, line: int, reason: str) -> None:
        super().__init__(f"{source}:{line}: {reason}")
        self.source = source
        self.line = line
        self.reason = reason


@dataclass
class Exposition:
    """Everything one exposition (or one trace of many scrapes) declared and sampled."""

    samples: list[Sample]
    types: dict[str, str]
    help: dict[str, str] = field(default_factory=dict)
    units: dict[str, str] = field(default_factory=dict)
    openmetrics: bool = False


def decode_payload(data: bytes, *, source: str, max_bytes: int = MAX_PAYLOAD_BYTES) -> str:
    """Decode a scraped or recorded payload to text, gunzipping it first when it is gzipped.

    Gzip data is inflated within bounds: past ``max_bytes`` of text, or inflating far more
    than metrics text does (a gzip bomb), it is refused before it is inflated.
    """
    if data[:2] == GZIP_MAGIC:
        try:
            data = gunzip(data, max_bytes=max_bytes)
        except GzipCorruptError as exc:
            raise _gzip_error(source, exc) from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _not_utf8(source, data, exc, line_offset=0, byte_offset=0) from None


def iter_payload_lines(
    chunks: Iterable[bytes],
    *,
    source: str,
    max_line_length: int = 65536,
    max_bytes: int | None = None,
) -> Iterator[str]:
    """Yield the text lines (without line ends) of a payload arriving as byte chunks.

    The stream is gunzipped when it starts gzipped, within the bounds of ``Inflater`` (a
    gzip bomb is refused, not inflated); ``max_bytes`` caps the text. Memory stays bounded:
    a line without an end is refused once four times ``max_line_length`` bytes of it are in
    hand, never read whole (the parser then checks lengths exactly, in characters). Errors
    are ExpositionError naming the 1-based line.
    """
    stream = _inflated(chunks, source=source, max_bytes=max_bytes)
    pending = b""
    line = 1
    offset = 0
    limit = max_line_length
    for piece in stream:
        block = pending + piece if pending else piece
        cut = block.rfind(b"\n") + 1
        pending = block[cut:]
        if len(pending) > limit * 4:
            # Checked in bytes (a character is at most 4): refuse before it grows further.
            raise _long_line(source, line + block.count(b"\n", 0, cut), limit)
        if not cut:
            continue
        whole = block[:cut]
        try:
            text = whole.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise _not_utf8(source, whole, exc, line_offset=line - 1, byte_offset=offset) from None
        lines = text.split("\n")
        lines.pop()  # empty: the text ends with its last line end
        line += len(lines)
        offset += cut
        yield from lines
    if pending:
        try:
            yield pending.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise _not_utf8(
                source, pending, exc, line_offset=line - 1, byte_offset=offset
            ) from None


def _inflated(chunks: Iterable[bytes], *, source: str, max_bytes: int | None) -> Iterator[bytes]:
    it = iter(chunks)
    head = b""
    for chunk in it:
        head += chunk
        if len(head) >= len(GZIP_MAGIC):
            break
    if head[: len(GZIP_MAGIC)] != GZIP_MAGIC:
        produced = newlines = 0
        for chunk in chain((head,), it):
            produced += len(chunk)
            if max_bytes is not None and produced > max_bytes:
                raise ExpositionError(
                    source,
                    newlines + 1,
                    f"more than {max_bytes} bytes; split the input into smaller parts",
                )
            newlines += chunk.count(b"\n")
            yield chunk
        return
    inflater = Inflater(max_bytes=max_bytes)
    try:
        yield from inflater.feed(head)
        for chunk in it:
            yield from inflater.feed(chunk)
        inflater.finish()
    except GzipCorruptError as exc:
        raise _gzip_error(source, exc) from None


def _gzip_error(source: str, exc: GzipCorruptError) -> ExpositionError:
    if isinstance(exc, GzipBombError):
        return ExpositionError(source, exc.line, exc.reason)
    return ExpositionError(
        source, exc.line, f"corrupt gzip data ({exc.reason}); re-record or re-download the file"
    )


def _long_line(source: str, line: int, limit: int) -> ExpositionError:
    return ExpositionError(
        source,
        line,
        f"line is over {limit} characters long; raise max_line_length if this exporter "
        "really writes such lines (binary data has no line ends)",
    )


def _not_utf8(
    source: str, data: bytes, exc: UnicodeDecodeError, *, line_offset: int, byte_offset: int
) -> ExpositionError:
    line = line_offset + data.count(b"\n", 0, exc.start) + 1
    return ExpositionError(
        source,
        line,
        f"not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {byte_offset + exc.start}); "
        "expected a Prometheus/OpenMetrics text exposition, not binary or protobuf data",
    )


def looks_like_openmetrics(text: str) -> bool:
    """Tell whether a text is OpenMetrics: it has a ``# EOF`` line (0.0.4 never does)."""
    if ends_with_eof(text):
        return True
    return "# EOF" in text and _EOF_LINE.search(text) is not None


def ends_with_eof(text: str) -> bool:
    """Tell whether a text ends with a ``# EOF`` line (whitespace after it aside)."""
    tail = text[-64:].rstrip()
    return tail.endswith("\n# EOF") or tail == "# EOF"


def is_eof_line(line: str) -> bool:
    """Tell whether a line is ``# EOF`` as ``looks_like_openmetrics`` finds it."""
    return line[:5] == "# EOF" and not line[5:].strip(" \t\r")


def parse_exposition(
    text: str,
    *,
    source: str = "<input>",
    openmetrics: bool | None = None,
    default_timestamp: float | None = None,
    max_samples: int | None = None,
    max_line_length: int = 65536,
    cache: SeriesCache | None = None,
) -> Exposition:
    """Parse a whole exposition; ``openmetrics=None`` means OpenMetrics iff a ``# EOF`` line exists.

    Timestamps come out in seconds (0.0.4 gives integer milliseconds, OpenMetrics float
    seconds); a sample without one gets ``default_timestamp``. ``cache`` keeps parsed series
    between calls (a shared one per format is used when none is given).
    """
    om = looks_like_openmetrics(text) if openmetrics is None else openmetrics
    result = Exposition(samples=[], types={}, openmetrics=om)
    parser = _ChunkParser(
        source=source,
        openmetrics=om,
        types=result.types,
        help=result.help,
        units=result.units,
        default_timestamp=default_timestamp,
        max_samples=max_samples,
        max_line_length=max_line_length,
        cache=cache,
    )
    result.samples = parser.feed(text, 1)
    parser.finish(text.count("\n") + 1 if text else 1)
    return result


def iter_exposition(
    lines: Iterable[str],
    *,
    source: str = "<input>",
    openmetrics: bool,
    types: dict[str, str] | None = None,
    help: dict[str, str] | None = None,
    units: dict[str, str] | None = None,
    default_timestamp: float | None = None,
    max_samples: int | None = None,
    max_line_length: int | None = 65536,
    chunk_lines: int = 4096,
    require_timestamps: bool = False,
    cache: SeriesCache | None = None,
) -> Iterator[Sample]:
    """Yield samples from lines (with or without their line ends), e.g. straight from an open file.

    Memory stays bounded by ``chunk_lines``. The format must be given: a stream cannot be
    searched for ``# EOF`` in advance. Metadata lines fill ``types``/``help``/``units`` as they
    are read. Errors carry 1-based line numbers. With ``require_timestamps`` (a trace needs
    one on every sample) untimed samples are not yielded, and the first is an error at the end
    of input, after any other.
    """
    parser = _ChunkParser(
        source=source,
        openmetrics=openmetrics,
        types={} if types is None else types,
        help=help,
        units=units,
        default_timestamp=default_timestamp,
        max_samples=max_samples,
        max_line_length=max_line_length,
        require_timestamps=require_timestamps,
        cache=cache,
    )
    chunk: list[str] = []
    first = 1
    for line in lines:
        chunk.append(line[:-1] if line.endswith("\n") else line)
        if len(chunk) >= chunk_lines:
            yield from parser.feed("\n".join(chunk), first)
            first += len(chunk)
            chunk = []
    if chunk:
        yield from parser.feed("\n".join(chunk), first)
        first += len(chunk)
    parser.finish(max(first - 1, 1))


# ---- the series cache ---------------------------------------------------------------------


class SeriesEntry:
    """One parsed series text: its metric name and canonical labels (compared by identity).

    ``plain`` is free for a reader to remember a fact about the labels (None: not known).
    """

    __slots__ = ("labels", "name", "plain")

    def __init__(self, name: str, labels: Labels) -> None:
        self.name = name
        self.labels = labels
        self.plain: bool | None = None

    def __repr__(self) -> str:
        return f"SeriesEntry({self.name!r}, {self.labels!r})"


class SeriesCache:
    """Series texts already parsed, so that a steady exposition skips label parsing.

    Keys are exact series texts (``name`` or ``name{...}``) that the careful parser accepted;
    label blocks are remembered too, so a new name over a known block reuses its labels (and
    samples share label objects). One cache serves one format: the two read labels
    differently. Past ``max_entries`` series it starts afresh, so a series churn cannot grow
    it without bound.
    """

    __slots__ = ("blocks", "max_entries", "names", "series")

    def __init__(self, max_entries: int = 1 << 18) -> None:
        self.series: dict[str, SeriesEntry] = {}
        self.blocks: dict[str, Labels] = {"": ()}
        self.names: dict[str, str] = {}
        self.max_entries = max_entries

    def __len__(self) -> int:
        return len(self.series)

    def keep_bounded(self) -> None:
        """Forget everything once over the bound (called between chunks, never mid-chunk)."""
        if len(self.series) > self.max_entries or len(self.blocks) > self.max_entries:
            self.series.clear()
            self.blocks.clear()
            self.blocks[""] = ()
            self.names.clear()

    def known_block(self, head: str) -> SeriesEntry | None:
        """Return the entry for ``head`` if it is a name over a label block already parsed."""
        m = _NAME_AT(head)
        if m is None:
            return None
        cut = m.end()
        labels = self.blocks.get(head[cut:])
        if labels is None:
            return None
        name = head[:cut]
        entry = SeriesEntry(self.names.setdefault(name, name), labels)
        self.series[head] = entry
        return entry

    def remember(self, text: str, name: str, block: str, labels: Labels) -> SeriesEntry:
        """Record a series text the careful parser read as ``name`` + ``block``."""
        entry = self.series.get(text)
        if entry is not None:
            return entry
        labels = self.blocks.setdefault(block, labels)
        entry = SeriesEntry(self.names.setdefault(name, name), labels)
        self.series[text] = entry
        return entry


_SHARED_CACHES = {False: SeriesCache(), True: SeriesCache()}


def shared_cache(openmetrics: bool) -> SeriesCache:
    """Return the process-wide series cache of one format (what parsing uses by default)."""
    return _SHARED_CACHES[openmetrics]


def read_sample_line(
    line: str, *, openmetrics: bool, cache: SeriesCache, source: str = "<input>", lineno: int = 0
) -> tuple[SeriesEntry, str, str]:
    """Read one sample line carefully: its series (remembered in ``cache``) and its tokens.

    Return (series, value token, timestamp token or ""); the tokens are checked against the
    grammar. A line with an exemplar, or anything malformed, is an ExpositionError.
    """
    if not openmetrics:
        head, _, raw = line.rpartition(" ")
        entry = cache.series.get(head)
        if entry is None and head:
            entry = cache.known_block(head)
        if entry is not None and _FLOAT_FULL(raw) is not None:
            return entry, raw, ""
    entry, raw, stamp, exemplar = _parse_sample_line(line, source, lineno, openmetrics, cache)
    if exemplar:
        raise ExpositionError(source, lineno, "exemplar: read this line with parse_exposition")
    return entry, raw, stamp


def read_text_comment(line: str, *, source: str = "<input>", lineno: int = 0) -> None:
    """Check a 0.0.4 comment line: a malformed ``# TYPE``/``# HELP`` is an ExpositionError."""
    _read_metadata(
        line.strip(),
        source=source,
        lineno=lineno,
        openmetrics=False,
        types={},
        help=None,
        units=None,
    )


def metric_name_at(line: str) -> str | None:
    """Return the metric name a line starts with, or None."""
    m = _NAME_AT(line)
    return None if m is None else m.group(0)


def is_value_token(token: str) -> bool:
    """Tell whether ``token`` is a sample value the grammar accepts (1, 2.5e-3, NaN, +Inf)."""
    return _FLOAT_FULL(token) is not None


def check_line_lengths(text: str, limit: int | None, *, source: str = "<input>") -> None:
    """Refuse a text with a line longer than ``limit`` characters (ExpositionError)."""
    _ChunkParser(
        source=source,
        openmetrics=False,
        types={},
        help=None,
        units=None,
        default_timestamp=None,
        max_samples=None,
        max_line_length=limit,
    )._check_line_length(text, 1)


# ---- the fast scan ------------------------------------------------------------------------

# What a miss handler returns for a line that ends the current run: a sample whose timing
# does not fit the run, or the end of the exposition.
STOP: Final = object()
MissHandler = Callable[[str, int, bool], object]


def scan_untimed(
    lines: list[str],
    start: int,
    *,
    get: Callable[[str], Any],
    miss: MissHandler,
    slots: list[Any],
    raws: list[str],
) -> int:
    """Scan ``name{labels} value`` lines from ``start``; return where the run stopped.

    A line whose text before its last space is a known series (``get`` finds it) costs one
    partition and one lookup: nothing of it is parsed. Any other line goes to ``miss``, which
    returns None (nothing to keep), ``STOP`` or a ``(slot, raw value)`` pair.
    """
    add_slot = slots.append
    add_raw = raws.append
    index = start
    for index in range(start, len(lines)):
        line = lines[index]
        head, _, raw = line.rpartition(" ")
        slot = get(head)
        if slot is not None:
            add_slot(slot)
            add_raw(raw)
            continue
        got = miss(line, index, False)
        if got is None:
            continue
        if got is STOP:
            return index
        slot, raw = got  # type: ignore[misc]  # a (slot, raw) pair by the handler's contract
        add_slot(slot)
        add_raw(raw)
    return len(lines)


def scan_timed(
    lines: list[str],
    start: int,
    *,
    get: Callable[[str], Any],
    miss: MissHandler,
    slots: list[Any],
    raws: list[str],
    stamps: list[str],
) -> int:
    """Like ``scan_untimed`` for ``name{labels} value timestamp`` lines (traces)."""
    add_slot = slots.append
    add_raw = raws.append
    add_stamp = stamps.append
    index = start
    for index in range(start, len(lines)):
        line = lines[index]
        head, _, stamp = line.rpartition(" ")
        series, _, raw = head.rpartition(" ")
        slot = get(series)
        if slot is not None:
            add_slot(slot)
            add_raw(raw)
            add_stamp(stamp)
            continue
        got = miss(line, index, True)
        if got is None:
            continue
        if got is STOP:
            return index
        slot, raw, stamp = got  # type: ignore[misc]  # a triple by the handler's contract
        add_slot(slot)
        add_raw(raw)
        add_stamp(stamp)
    return len(lines)


# A token that float()/int() read but the grammar does not: underscores, whitespace, other
# scripts' digits. Tokens are joined with line feeds, which no token holds.
_ODD_TOKEN = re.compile(r"[^0-9A-Za-z.+\-\n,]").search
# In a joined list of plain numbers: anything but digits, signs, points and exponents.
_NOT_PLAIN = re.compile(r"[^0-9.eE+\-,]").search
# NaN and the infinities in float()'s spellings, as whole tokens of a comma-joined list.
_SPECIAL = re.compile(r"(?<![^,])([+-]?)(?i:(nan)|inf(?:inity)?)(?![^,])")
# What JSON reads after the special values are respelled its way.
_NOT_JSON = re.compile(r"[^0-9.eE+\-,NaIifnty]").search
_NEGATIVE_ZERO = re.compile(r"(?<![^,])-0(?![^,])").search
_json_decode = json.JSONDecoder().decode


def _json_special(m: re.Match[str]) -> str:
    if m.group(2):
        return "NaN"
    return "-Infinity" if m.group(1) == "-" else "Infinity"


def to_floats(raws: list[str]) -> list[float]:
    """Convert value tokens exactly as the grammar reads them; ValueError if one is not a float.

    On tokens of digits, letters, '.', '+' and '-' Python's float() accepts precisely the
    exposition grammar (NaN and Inf in any case, exponents, no hex), so checking the
    alphabet of all tokens at once leaves a C-level conversion. The tokens are first read
    as one JSON list, which is three times faster than float() token by token, and gives
    the same numbers: a JSON number is a grammar number, integers convert back to floats
    correctly rounded as float() rounds their text, and "-0" (an integer zero in JSON) is
    left to float(). Whatever JSON does not take (a '+' sign, '.5', '01') goes to float().
    """
    if not raws:
        return []
    joined = ",".join(raws)
    text = joined
    if _NOT_PLAIN(joined) is not None:
        if _ODD_TOKEN(joined) is not None:
            raise ValueError("a token outside the number alphabet")
        text = _SPECIAL.sub(_json_special, joined)
        if _NOT_JSON(text) is not None:
            return list(map(float, raws))
    if "-0" in joined and _NEGATIVE_ZERO(joined) is not None:
        return list(map(float, raws))
    try:
        numbers = _json_decode("[" + text + "]")
        values = list(map(float, numbers))
    except (ValueError, TypeError, OverflowError):
        return list(map(float, raws))
    if len(values) != len(raws):
        return list(map(float, raws))
    return values


def to_seconds(stamps: list[str], openmetrics: bool) -> list[float]:
    """Convert timestamp tokens to seconds: OpenMetrics' finite seconds, 0.0.4's integer ms."""
    if stamps and _ODD_TOKEN("\n".join(stamps)) is not None:
        raise ValueError("a token outside the number alphabet")
    if openmetrics:
        seconds = list(map(float, stamps))
        # A non-finite timestamp makes the sum non-finite (so may an overflow, which the
        # careful path then clears).
        if not math.isfinite(sum(seconds)):
            raise ValueError("a timestamp that is not finite")
        return seconds
    return list(map(truediv, map(int, stamps), repeat(1000.0)))


class _Retry(Exception):
    """The fast scan met something it does not decide itself: re-read the chunk carefully."""


class _Run:
    """Samples of consecutive lines with the same timing, as tokens not yet converted."""

    __slots__ = ("events", "exemplars", "raws", "slots", "stamps", "timed")

    def __init__(self, timed: bool) -> None:
        self.timed = timed
        self.slots: list[object] = []
        self.raws: list[str] = []
        self.stamps: list[str] = []
        # OpenMetrics metadata, each before the sample at its position: (pos, kw, family, v).
        self.events: list[tuple[int, str, str, str]] = []
        # Positions of OpenMetrics samples that carried an exemplar.
        self.exemplars: set[int] = set()


# Slot descriptors of Sample: setting them directly builds a sample in half the time of the
# frozen dataclass's __init__ (which goes through object.__setattr__ field by field).
_new_object = object.__new__
_set_name = Sample.__dict__["name"].__set__
_set_labels = Sample.__dict__["labels"].__set__
_set_value = Sample.__dict__["value"].__set__
_set_timestamp = Sample.__dict__["timestamp"].__set__


def _samples(
    entries: list[SeriesEntry],
    values: list[float],
    stamps: list[float] | None,
    default: float | None,
) -> list[Sample]:
    out: list[Sample] = []
    append = out.append
    new = _new_object
    cls = Sample
    if stamps is None:
        for entry, value in zip(entries, values, strict=True):
            s = new(cls)
            _set_name(s, entry.name)
            _set_labels(s, entry.labels)
            _set_value(s, value)
            _set_timestamp(s, default)
            append(s)
    else:
        for entry, value, stamp in zip(entries, values, stamps, strict=True):
            s = new(cls)
            _set_name(s, entry.name)
            _set_labels(s, entry.labels)
            _set_value(s, value)
            _set_timestamp(s, stamp)
            append(s)
    return out


class _ChunkParser:
    """Parse newline-joined lines chunk by chunk, keeping state (metadata, caches, EOF) across.

    Each chunk is read by the fast scan first; whatever it does not decide itself (a bad
    token, a rule broken, an error anywhere) makes the chunk be read again line by line by
    the careful path, which is the reference: it names the first problem and its line.
    """

    def __init__(
        self,
        *,
        source: str,
        openmetrics: bool,
        types: dict[str, str],
        help: dict[str, str] | None,
        units: dict[str, str] | None,
        default_timestamp: float | None,
        max_samples: int | None,
        max_line_length: int | None,
        require_timestamps: bool = False,
        cache: SeriesCache | None = None,
    ) -> None:
        self.source = source
        self.require_timestamps = require_timestamps
        # The first sample without a timestamp, reported at the end so that a truncated
        # input (whose cut-off last line lacks one) is reported as truncated.
        self.untimed: tuple[int, str] | None = None
        self.openmetrics = openmetrics
        self.types = types
        self.help = help
        self.units = units
        self.default_timestamp = default_timestamp
        self.limit = max_samples if max_samples is not None else 1 << 62
        self.max_line_length = max_line_length
        self.count = 0
        self.seen_eof = False
        self.cache = cache if cache is not None else shared_cache(openmetrics)
        self.rules = OpenMetricsRules() if openmetrics else None
        # The timing the last chunk's samples had: traces are timed, scrapes are not.
        self.timed = openmetrics and require_timestamps
        # Set by the miss handler when it meets '# EOF' (index in the chunk's lines).
        self._eof_index: int | None = None
        self._first_line = 1
        self._run: _Run | None = None

    # ---- one chunk --------------------------------------------------------------------------
    def feed(self, text: str, first_line: int) -> list[Sample]:
        """Parse ``text`` whose first line is line ``first_line`` of the input."""
        self._check_line_length(text, first_line)
        if self.seen_eof:
            self._check_after_eof(text, first_line)
            return []
        self.cache.keep_bounded()
        saved = (self.count, self.untimed, self.timed, self.rules)
        if self.rules is not None:
            self.rules = self.rules.copy()
        try:
            return self._fast(text, first_line)
        except _Retry:
            self.count, self.untimed, self.timed, self.rules = saved
            self._eof_index = None
            return self._careful(text, first_line)

    def _fast(self, text: str, first_line: int) -> list[Sample]:
        lines = text.split("\n")
        self._first_line = first_line
        self._eof_index = None
        get = self.cache.series.get
        runs: list[_Run] = []
        start = 0
        end = len(lines)
        timed = self.timed
        while start < end:
            run = self._run = _Run(timed)
            if timed:
                stop = scan_timed(
                    lines,
                    start,
                    get=get,
                    miss=self._miss,
                    slots=run.slots,
                    raws=run.raws,
                    stamps=run.stamps,
                )
            else:
                stop = scan_untimed(
                    lines, start, get=get, miss=self._miss, slots=run.slots, raws=run.raws
                )
            runs.append(run)
            if self._eof_index is not None:
                break
            if stop == start and not run.slots and not run.events:
                raise _Retry  # a line neither timing takes: let the careful path name it
            start = stop
            if start < end:
                # The scan stopped at a line of the other timing. At the chunk's end the
                # timing stays: the next chunk of a trace starts timed, as this one ended.
                timed = not timed
        self._run = None
        self.timed = timed
        om = self.openmetrics
        default = self.default_timestamp
        out: list[Sample] = []
        total = self.count + sum(len(run.slots) for run in runs)
        if total > self.limit:
            raise _Retry
        self.count = total
        for run in runs:
            try:
                values = to_floats(run.raws)
                stamps = to_seconds(run.stamps, om) if run.timed else None
            except (ValueError, OverflowError):
                raise _Retry from None
            entries: list[SeriesEntry] = run.slots  # type: ignore[assignment]  # parser slots
            if self.rules is not None:
                self._apply_rules(run, entries, values, stamps)
            out += _samples(entries, values, stamps, default)
        if self._eof_index is not None:
            self._end_rules()
            self.seen_eof = True
            rest = lines[self._eof_index + 1 :]
            if rest:
                self._check_after_eof("\n".join(rest), first_line + self._eof_index + 1)
        return out

    def _apply_rules(
        self, run: _Run, entries: list[SeriesEntry], values: list[float], stamps: list[float] | None
    ) -> None:
        rules = self.rules
        assert rules is not None
        events = run.events
        exemplars = run.exemplars
        next_event = 0
        sample = rules.sample
        try:
            for pos, entry in enumerate(entries):
                while next_event < len(events) and events[next_event][0] == pos:
                    self._meta(*events[next_event][1:])
                    next_event += 1
                sample(
                    entry,
                    entry.name,
                    entry.labels,
                    values[pos],
                    None if stamps is None else stamps[pos],
                    exemplar=pos in exemplars,
                )
            for event in events[next_event:]:
                self._meta(*event[1:])
        except (RuleError, ExpositionError):
            raise _Retry from None

    def _end_rules(self) -> None:
        if self.rules is not None:
            try:
                self.rules.end()
            except RuleError:
                raise _Retry from None

    def _meta(self, keyword: str, family: str, value: str) -> None:
        """Take one OpenMetrics metadata line: the family rules, then the recorded metadata."""
        rules = self.rules
        assert rules is not None
        rules.meta(keyword, family, value)
        if keyword == "TYPE":
            _declare_type(self.types, family, value, self.source, 0)
        elif keyword == "HELP":
            if self.help is not None:
                self.help[family] = _unescape_help(value, True)
        elif self.units is not None:
            self.units[family] = value

    def _miss(self, line: str, index: int, timed: bool) -> object:
        """Decide a line the scan did not find: metadata, blank, new series or other timing."""
        om = self.openmetrics
        if not line or line[0] == "#" or line[0] in " \t\r":
            stripped = line.strip()
            if om and (not stripped or line[0] != "#"):
                raise _Retry  # OpenMetrics has no blank lines nor leading whitespace
            if not stripped:
                return None
            if stripped[0] != "#":
                raise _Retry  # an indented sample: the careful path reads it
            if om:
                if line == "# EOF":
                    self._eof_index = index
                    return STOP
                try:
                    keyword, family, value = _openmetrics_meta(line, self.source, 0)
                except ExpositionError:
                    raise _Retry from None
                run = self._run
                assert run is not None
                run.events.append((len(run.slots), keyword, family, value))
                return None
            try:
                _read_metadata(
                    stripped,
                    source=self.source,
                    lineno=0,
                    openmetrics=False,
                    types=self.types,
                    help=self.help,
                    units=self.units,
                )
            except ExpositionError:
                raise _Retry from None
            return None
        cache = self.cache
        if timed:
            head, _, stamp = line.rpartition(" ")
            series, _, raw = head.rpartition(" ")
        else:
            series, _, raw = line.rpartition(" ")
            stamp = ""
        entry = cache.known_block(series) if series else None
        if entry is not None:
            return (entry, raw, stamp) if timed else (entry, raw)
        try:
            parsed = _parse_sample_line(line, self.source, 0, om, cache)
        except ExpositionError:
            raise _Retry from None
        entry, raw, stamp, exemplar = parsed
        if exemplar:
            run = self._run
            assert run is not None
            run.exemplars.add(len(run.slots))
        if not stamp:
            if self.require_timestamps:
                self.count += 1
                self._note_untimed(self._first_line + index, entry.name)
                return None
            return STOP if timed else (entry, raw)
        return (entry, raw, stamp) if timed else STOP

    # ---- the careful path -------------------------------------------------------------------
    def _careful(self, text: str, first_line: int) -> list[Sample]:
        """Read a chunk line by line, naming the first problem and its line."""
        source = self.source
        om = self.openmetrics
        cache = self.cache
        default_ts = self.default_timestamp
        out: list[Sample] = []
        lines = text.split("\n")
        for index, line in enumerate(lines):
            lineno = first_line + index
            stripped = line.strip()
            if om and (not stripped or line[0] != stripped[0]):
                reason = (
                    "blank line: OpenMetrics has none before '# EOF'"
                    if not stripped
                    else "leading whitespace: OpenMetrics lines start with a name or '#'"
                )
                raise ExpositionError(source, lineno, reason)
            if not stripped:
                continue
            if stripped[0] == "#":
                if om:
                    if line == "# EOF":
                        self._careful_end(lineno)
                        self.seen_eof = True
                        if index + 1 < len(lines):
                            self._check_after_eof("\n".join(lines[index + 1 :]), lineno + 1)
                        break
                    keyword, family, value = _openmetrics_meta(line, source, lineno)
                    try:
                        self._meta(keyword, family, value)
                    except RuleError as exc:
                        raise ExpositionError(source, lineno, str(exc)) from None
                    continue
                _read_metadata(
                    stripped,
                    source=source,
                    lineno=lineno,
                    openmetrics=False,
                    types=self.types,
                    help=self.help,
                    units=self.units,
                )
                continue
            entry, raw, raw_ts, exemplar = _parse_sample_line(line, source, lineno, om, cache)
            self.count += 1
            if self.count > self.limit:
                _too_many(source, lineno, self.limit)
            number = float(raw)
            timestamp = _seconds(raw_ts, om) if raw_ts else None
            if timestamp is None and self.require_timestamps:
                self._note_untimed(lineno, entry.name)
                continue
            if self.rules is not None:
                try:
                    self.rules.sample(
                        entry, entry.name, entry.labels, number, timestamp, exemplar=exemplar
                    )
                except RuleError as exc:
                    raise ExpositionError(source, lineno, str(exc)) from None
            out.append(
                Sample(
                    entry.name, entry.labels, number, default_ts if timestamp is None else timestamp
                )
            )
        return out

    def _careful_end(self, lineno: int) -> None:
        if self.rules is not None:
            try:
                self.rules.end()
            except RuleError as exc:
                raise ExpositionError(self.source, lineno, str(exc)) from None

    def finish(self, last_line: int) -> None:
        """Check the end of input: OpenMetrics must have ended with ``# EOF``; timestamps given."""
        if self.openmetrics and not self.seen_eof:
            raise ExpositionError(
                self.source,
                last_line,
                "missing the closing '# EOF' line: this OpenMetrics exposition is truncated "
                "(re-scrape or re-record it; a 0.0.4 text exposition must not be read as "
                "OpenMetrics)",
            )
        if self.untimed is not None:
            lineno, name = self.untimed
            raise ExpositionError(
                self.source,
                lineno,
                f"sample {name} has no timestamp; a trace needs one on every sample "
                "(seconds, OpenMetrics)",
            )

    def _note_untimed(self, lineno: int, name: str) -> None:
        if self.untimed is None:
            self.untimed = (lineno, name)

    def _check_line_length(self, text: str, first_line: int) -> None:
        limit = self.max_line_length
        if limit is None:
            return
        # Jump window by window: a window of limit+1 characters from a line start that holds
        # no newline is a too-long line, and a scan costs len(text)/limit steps, not one per line.
        pos = 0
        end = len(text)
        while end - pos > limit:
            newline = text.rfind("\n", pos, pos + limit + 1)
            if newline < 0:
                line_end = text.find("\n", pos)
                length = (end if line_end < 0 else line_end) - pos
                raise ExpositionError(
                    self.source,
                    first_line + text.count("\n", 0, pos),
                    f"line is {length} characters long, over the limit of {limit}; "
                    "raise max_line_length if this exporter really writes such lines",
                )
            pos = newline + 1

    def _check_after_eof(self, text: str, first_line: int) -> None:
        for offset, line in enumerate(text.split("\n")):
            if line.strip():
                raise ExpositionError(
                    self.source,
                    first_line + offset,
                    "content after '# EOF': an OpenMetrics exposition ends at its '# EOF' "
                    "line; remove the trailing data or join traces before their EOF lines",
                )


def _seconds(raw: str, openmetrics: bool) -> float:
    return float(raw) if openmetrics else int(raw) / 1000.0


def _plain_labels(pairs: list[tuple[str, str]], source: str, lineno: int) -> Labels:
    if len(dict(pairs)) != len(pairs):
        seen: set[str] = set()
        for name, _ in pairs:
            if name in seen:
                raise ExpositionError(
                    source, lineno, f"label {name!r} appears twice in one sample; keep only one"
                )
            seen.add(name)
    return tuple(sorted(pairs))


def _too_many(source: str, lineno: int, limit: int) -> None:
    raise ExpositionError(
        source,
        lineno,
        f"more than {limit} samples; raise the limit (tritonguard replay --max-samples) or "
        "split the input into smaller parts",
    )


def _declare_type(types: dict[str, str], family: str, kind: str, source: str, lineno: int) -> None:
    declared = types.get(family)
    if declared is not None and declared != kind:
        raise ExpositionError(
            source,
            lineno,
            f"family {family!r} was declared {declared!r} earlier and {kind!r} here; "
            "one family must keep one type",
        )
    types[family] = kind


def _read_metadata(
    line: str,
    *,
    source: str,
    lineno: int,
    openmetrics: bool,
    types: dict[str, str],
    help: dict[str, str] | None,
    units: dict[str, str] | None,
) -> None:
    """Read a 0.0.4 comment line: ``# TYPE``/``# HELP``/``# UNIT`` are recorded, others ignored."""
    parts = line.split(None, 3)
    if len(parts) < 2 or parts[0] != "#" or parts[1] not in ("TYPE", "HELP", "UNIT"):
        return  # a plain comment
    keyword = parts[1]
    if len(parts) < 3 or _NAME_FULL(parts[2]) is None:
        raise ExpositionError(
            source, lineno, f"'# {keyword}' must be followed by a valid metric family name"
        )
    family = parts[2]
    rest = parts[3] if len(parts) > 3 else ""
    if keyword == "TYPE":
        kind = rest.strip()
        if kind not in METRIC_TYPES:
            raise ExpositionError(
                source,
                lineno,
                f"unknown metric type {kind!r} for {family!r}; "
                f"use one of {', '.join(sorted(METRIC_TYPES))}",
            )
        _declare_type(types, family, kind, source, lineno)
    elif keyword == "HELP":
        if help is not None:
            help[family] = _unescape_help(rest, openmetrics)
    elif units is not None:
        units[family] = rest.strip()


_OPENMETRICS_TYPES = METRIC_TYPES - {"untyped"}


def _openmetrics_meta(line: str, source: str, lineno: int) -> tuple[str, str, str]:
    """Split an OpenMetrics metadata line into (keyword, family, text/type/unit), strictly."""
    parts = line.split(" ", 3)
    keyword = parts[1] if len(parts) > 1 and parts[0] == "#" else ""
    if keyword not in ("TYPE", "HELP", "UNIT"):
        raise ExpositionError(
            source,
            lineno,
            "comment line in OpenMetrics, which has none: a '#' line is '# HELP', '# TYPE', "
            "'# UNIT' or '# EOF'",
        )
    if len(parts) < 3 or _NAME_FULL(parts[2]) is None:
        raise ExpositionError(
            source, lineno, f"'# {keyword}' must be followed by a valid metric family name"
        )
    family = parts[2]
    if len(parts) < 4:
        raise ExpositionError(
            source,
            lineno,
            f"'# {keyword} {family}' needs a space and its value after the name "
            "(OpenMetrics: '# HELP name text', '# TYPE name type', '# UNIT name unit')",
        )
    value = parts[3]
    if keyword == "TYPE" and value not in METRIC_TYPES:
        raise ExpositionError(
            source,
            lineno,
            f"unknown metric type {value!r} for {family!r}; "
            f"use one of {', '.join(sorted(_OPENMETRICS_TYPES))}",
        )
    if keyword == "UNIT" and _UNIT_FULL(value) is None:
        raise ExpositionError(
            source, lineno, f"bad unit {value!r} for {family!r}: letters, digits and '_' only"
        )
    return keyword, family, value


def _unescape_help(text: str, openmetrics: bool) -> str:
    def repl(m: re.Match[str]) -> str:
        char = m.group(1)
        if char == "n":
            return "\n"
        if char == "\\" or (openmetrics and char == '"'):
            return char
        return m.group(0)

    return _ESCAPE.sub(repl, text) if "\\" in text else text


def _unescape_label(raw: str, name: str, source: str, lineno: int, openmetrics: bool) -> str:
    if "\\" not in raw:
        return raw

    def repl(m: re.Match[str]) -> str:
        char = m.group(1)
        known = _LABEL_UNESCAPES.get(char)
        if known is not None:
            return known
        if openmetrics:
            return m.group(0)  # OpenMetrics keeps an unknown escape as written
        raise ExpositionError(
            source,
            lineno,
            f"invalid escape '\\{char}' in the value of label {name!r}; "
            'only \\\\, \\" and \\n are allowed (write a backslash as \\\\)',
        )

    return _ESCAPE.sub(repl, raw)


def _garbled(line: str, source: str, lineno: int) -> ExpositionError:
    if _CONTROL(line):
        reason = (
            "binary data, not a text exposition; request text/plain or "
            "application/openmetrics-text (not protobuf) and decompress it first"
        )
    elif line.startswith("<"):
        reason = (
            "this looks like an HTML/XML page, not a metrics exposition; point the URL at the "
            "metrics endpoint itself (Triton: http://HOST:8002/metrics)"
        )
    elif line[0] in "{[":
        reason = (
            "this looks like JSON, not a metrics exposition; use the text /metrics endpoint "
            "(a PromQL API answer is not an exposition)"
        )
    else:
        shown = line if len(line) <= 60 else line[:57] + "..."
        reason = (
            f"garbled line {shown!r}: expected '<metric>[{{labels}}] <value> [timestamp]', "
            "a '#' comment or a blank line"
        )
    return ExpositionError(source, lineno, reason)


def _parse_sample_line(
    line: str, source: str, lineno: int, openmetrics: bool, cache: SeriesCache
) -> tuple[SeriesEntry, str, str, bool]:
    """Parse one sample line the careful way; return (series, value token, ts token, exemplar).

    The tokens are checked against the grammar (the timestamp is "" when absent), and the
    series text is remembered in ``cache``. Every problem is an ExpositionError naming it.
    """
    text = line.strip()
    if openmetrics and text != line:
        raise ExpositionError(
            source,
            lineno,
            "leading or trailing whitespace: OpenMetrics separates a sample's parts with "
            "single spaces and has none at the line's ends",
        )
    m = _NAME_AT(text)
    if m is None:
        raise _garbled(text, source, lineno)
    name = m.group(0)
    pos = m.end()
    block_start = pos
    end = len(text)
    labels: Labels = ()
    if pos < end and text[pos] == "{":
        pos, labels = _parse_label_block(text, pos, name, source, lineno, openmetrics=openmetrics)
    entry = cache.remember(text[:pos], name, text[block_start:pos], labels)
    rest = text[pos:]
    if not rest or rest[0] not in " \t":
        if not rest:
            raise ExpositionError(source, lineno, f"sample {name!r} has no value")
        raise _garbled(text, source, lineno)
    # Values and timestamps contain no '#', so the first one starts an exemplar.
    hash_at = rest.find("#")
    exemplar = rest[hash_at:] if hash_at >= 0 else ""
    main = rest[:hash_at] if hash_at >= 0 else rest
    if openmetrics:
        tokens = main[1:].split(" ")
        if exemplar:
            if not tokens or tokens[-1] != "":
                raise ExpositionError(
                    source,
                    lineno,
                    f"malformed exemplar after {name!r}; expected ' # {{labels}} value "
                    "[timestamp]' after one space",
                )
            tokens.pop()
        if "" in tokens or "\t" in main:
            if tokens == [""] or not tokens:
                raise ExpositionError(source, lineno, f"sample {name!r} has no value")
            raise ExpositionError(
                source,
                lineno,
                f"sample {name!r}: OpenMetrics separates the name, value and timestamp with "
                "single spaces",
            )
    else:
        tokens = main.split()
    if not tokens:
        raise ExpositionError(source, lineno, f"sample {name!r} has no value")
    if len(tokens) > 2 and _FLOAT_FULL(tokens[0]) is None:
        raise _garbled(text, source, lineno)
    if len(tokens) > 2:
        raise ExpositionError(
            source,
            lineno,
            f"unexpected {tokens[2]!r} after the timestamp of {name!r}; "
            "a sample line is '<metric>[{labels}] <value> [timestamp]'",
        )
    if _FLOAT_FULL(tokens[0]) is None:
        raise ExpositionError(
            source,
            lineno,
            f"bad value {tokens[0]!r} for {name!r}; expected a float such as 1, 2.5e-3, "
            "NaN, +Inf or -Inf",
        )
    raw_ts = tokens[1] if len(tokens) == 2 else ""
    if raw_ts:
        if openmetrics:
            if _FINITE_FULL(raw_ts) is None:
                raise ExpositionError(
                    source,
                    lineno,
                    f"bad timestamp {raw_ts!r} for {name!r}; OpenMetrics wants finite "
                    "seconds since the epoch, e.g. 1700000000.25",
                )
        elif _MILLIS_FULL(raw_ts) is None:
            raise ExpositionError(
                source,
                lineno,
                f"bad timestamp {raw_ts!r} for {name!r}; the 0.0.4 text format wants "
                "integer milliseconds since the epoch (float seconds only in OpenMetrics, "
                "which ends with '# EOF')",
            )
    if exemplar:
        if not openmetrics:
            raise ExpositionError(
                source,
                lineno,
                f"unexpected '#' after the sample of {name!r}; exemplars exist only in "
                "OpenMetrics, whose exposition ends with '# EOF'",
            )
        _check_exemplar(exemplar, name, source, lineno)
    return entry, tokens[0], raw_ts, bool(exemplar)


def _check_exemplar(exemplar: str, name: str, source: str, lineno: int) -> None:
    """Check an OpenMetrics exemplar: '# {labels} value [timestamp]', at most 128 characters."""
    m = _EXEMPLAR_FULL(exemplar)
    if m is None:
        raise ExpositionError(
            source,
            lineno,
            f"malformed exemplar after {name!r}; expected '# {{labels}} value [timestamp]'",
        )
    pairs = _EXEMPLAR_PAIRS(m.group(1))
    size = sum(len(k) + len(_unescape_label(v, k, source, lineno, True)) for k, v in pairs)
    if size > MAX_EXEMPLAR_CHARS:
        raise ExpositionError(
            source,
            lineno,
            f"exemplar labels after {name!r} are {size} characters long; OpenMetrics allows "
            f"{MAX_EXEMPLAR_CHARS}",
        )


def _parse_label_block(
    line: str, pos: int, name: str, source: str, lineno: int, *, openmetrics: bool
) -> tuple[int, Labels]:
    """Parse the label block starting at ``line[pos] == '{'``; return (end, labels)."""
    end = len(line)
    close = line.find("}", pos)
    if close > 0:
        # Most blocks hold no escapes nor braces in their values: one regex decides those.
        inner = line[pos + 1 : close]
        if _PLAIN_BLOCK_FULL(inner) and not (openmetrics and inner.rstrip(" \t").endswith(",")):
            return close + 1, _plain_labels(_PLAIN_PAIRS(inner), source, lineno)
    pairs: list[tuple[str, str]] = []
    pos += 1
    after_comma = False
    while True:
        while pos < end and line[pos] in " \t":
            pos += 1
        if pos >= end:
            raise ExpositionError(
                source, lineno, f"label set of {name!r} is not closed; add the missing '}}'"
            )
        if line[pos] == "}":
            if after_comma and openmetrics:
                raise ExpositionError(
                    source, lineno, f"trailing ',' in the label set of {name!r}; remove it"
                )
            pos += 1
            break
        lm = _LABEL_NAME_AT(line, pos)
        if lm is None:
            raise ExpositionError(
                source,
                lineno,
                f"expected a label name or '}}' at column {pos + 1} of {name!r}'s label set",
            )
        label_name = lm.group(0)
        pos = lm.end()
        while pos < end and line[pos] in " \t":
            pos += 1
        if pos >= end or line[pos] != "=":
            raise ExpositionError(
                source, lineno, f"expected '=' after label name {label_name!r} of {name!r}"
            )
        pos += 1
        while pos < end and line[pos] in " \t":
            pos += 1
        if pos >= end or line[pos] != '"':
            raise ExpositionError(
                source,
                lineno,
                f"the value of label {label_name!r} must be in double quotes",
            )
        qm = _QUOTED_REST(line, pos + 1)
        if qm is None:
            raise ExpositionError(
                source,
                lineno,
                f"unterminated quoted value of label {label_name!r}; add the closing '\"' "
                'and escape quotes inside the value as \\"',
            )
        pairs.append(
            (label_name, _unescape_label(qm.group(1), label_name, source, lineno, openmetrics))
        )
        pos = qm.end()
        while pos < end and line[pos] in " \t":
            pos += 1
        if pos >= end:
            raise ExpositionError(
                source, lineno, f"label set of {name!r} is not closed; add the missing '}}'"
            )
        after_comma = False
        if line[pos] == ",":
            pos += 1
            after_comma = True
        elif line[pos] == "}":
            pos += 1
            break
        else:
            raise ExpositionError(
                source,
                lineno,
                f"expected ',' or '}}' after the value of label {label_name!r} of {name!r}",
            )
    return pos, _plain_labels(pairs, source, lineno)
