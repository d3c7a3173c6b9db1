"""Parser for Prometheus text format 0.0.4 and OpenMetrics 1.0: exposition text in, samples out."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from itertools import chain

from tritonguard.core.inflate import (
    GZIP_MAGIC,
    GzipBombError,
    GzipCorruptError,
    Inflater,
    gunzip,
)
from tritonguard.core.samples import Labels, Sample

__all__ = [
    "Exposition",
    "ExpositionError",
    "decode_payload",
    "iter_exposition",
    "iter_payload_lines",
    "looks_like_openmetrics",
    "parse_exposition",
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
# The fast path takes any brace-free text as the label block and validates it once per
# distinct block (the cache key); a block with escapes or a '}' inside a value fails that
# validation or the line's match, and the line goes to the careful slow path.
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
_EXEMPLAR_FULL = re.compile(
    rf'#[ \t]+\{{(?:[ \t]*{_LABEL_NAME}[ \t]*=[ \t]*"(?:[^"\\]|\\.)*"[ \t]*,?)*\}}'
    rf"[ \t]+{_FLOAT}(?:[ \t]+{_FINITE})?"
).fullmatch
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
    tail = text[-64:].rstrip()
    if tail.endswith("\n# EOF") or tail == "# EOF":
        return True
    return "# EOF" in text and _EOF_LINE.search(text) is not None


def parse_exposition(
    text: str,
    *,
    source: str = "<input>",
    openmetrics: bool | None = None,
    default_timestamp: float | None = None,
    max_samples: int | None = None,
    max_line_length: int = 65536,
) -> Exposition:
    """Parse a whole exposition; ``openmetrics=None`` means OpenMetrics iff a ``# EOF`` line exists.

    Timestamps come out in seconds (0.0.4 gives integer milliseconds, OpenMetrics float
    seconds); a sample without one gets ``default_timestamp``.
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


def _line_regex(timestamp: str) -> re.Pattern[str]:
    # One match per line: a sample on the fast path, or the whole line in the last group.
    return re.compile(
        rf"^(?:({_NAME})(?:\{{([^}}\n]*)\}})?[ \t]+({_FLOAT})(?:[ \t]+({timestamp}))?[ \t\r]*"
        r"|(.*))$",
        re.MULTILINE,
    )


_LINES_TEXT = _line_regex(_MILLIS).findall
_LINES_OPENMETRICS = _line_regex(_FINITE).findall


class _ChunkParser:
    """Parse newline-joined lines chunk by chunk, keeping state (metadata, caches, EOF) across."""

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
        self.label_cache: dict[str, Labels] = {"": ()}
        self.names: dict[str, str] = {}

    def feed(self, text: str, first_line: int) -> list[Sample]:
        """Parse ``text`` whose first line is line ``first_line`` of the input."""
        source = self.source
        self._check_line_length(text, first_line)
        if self.seen_eof:
            self._check_after_eof(text, first_line)
            return []
        om = self.openmetrics
        rows = (_LINES_OPENMETRICS if om else _LINES_TEXT)(text)
        label_cache = self.label_cache
        names = self.names
        default_ts = self.default_timestamp
        limit = self.limit
        count = self.count
        lines: list[str] | None = None
        out: list[Sample] = []
        append = out.append
        new_sample = Sample
        to_float = float
        for index, (name, block, raw_value, raw_ts, rest_of_line) in enumerate(rows):
            line = rest_of_line
            if name:
                labels = label_cache.get(block)
                if labels is None and _PLAIN_BLOCK_FULL(block):
                    labels = _plain_labels(_PLAIN_PAIRS(block), source, first_line + index)
                    label_cache[block] = labels
                if labels is not None:
                    count += 1
                    if count > limit:
                        _too_many(source, first_line + index, limit)
                    if not raw_ts:
                        if self.require_timestamps:
                            self._note_untimed(first_line + index, name)
                            continue
                        timestamp = default_ts
                    elif om:
                        timestamp = to_float(raw_ts)
                    else:
                        timestamp = int(raw_ts) / 1000.0
                    append(
                        new_sample(
                            names.setdefault(name, name), labels, to_float(raw_value), timestamp
                        )
                    )
                    continue
                # Escapes or an odd label block: re-read the whole line the careful way.
                if lines is None:
                    lines = text.split("\n")
                line = lines[index]
            stripped = line.strip()
            if not stripped:
                continue
            lineno = first_line + index
            if stripped[0] == "#":
                if om and stripped == "# EOF":
                    self.seen_eof = True
                    rest = text.split("\n", index + 1)
                    if len(rest) > index + 1:
                        self._check_after_eof(rest[index + 1], lineno + 1)
                    break
                _read_metadata(
                    stripped,
                    source=source,
                    lineno=lineno,
                    openmetrics=om,
                    types=self.types,
                    help=self.help,
                    units=self.units,
                )
                continue
            sample_name, labels_, value, timestamp = _parse_sample_slow(
                stripped, source, lineno, om
            )
            count += 1
            if count > limit:
                _too_many(source, lineno, limit)
            if timestamp is None and self.require_timestamps:
                self._note_untimed(lineno, sample_name)
                continue
            append(
                Sample(
                    names.setdefault(sample_name, sample_name),
                    labels_,
                    value,
                    default_ts if timestamp is None else timestamp,
                )
            )
        self.count = count
        return out

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
        f"more than {limit} samples; raise max_samples or split the input into smaller parts",
    )


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
        declared = types.get(family)
        if declared is not None and declared != kind:
            raise ExpositionError(
                source,
                lineno,
                f"family {family!r} was declared {declared!r} earlier and {kind!r} here; "
                "one family must keep one type",
            )
        types[family] = kind
    elif keyword == "HELP":
        if help is not None:
            help[family] = _unescape_help(rest, openmetrics)
    elif units is not None:
        units[family] = rest.strip()


def _unescape_help(text: str, openmetrics: bool) -> str:
    def repl(m: re.Match[str]) -> str:
        char = m.group(1)
        if char == "n":
            return "\n"
        if char == "\\" or (openmetrics and char == '"'):
            return char
        return m.group(0)

    return _ESCAPE.sub(repl, text) if "\\" in text else text


def _unescape_label(raw: str, name: str, source: str, lineno: int) -> str:
    def repl(m: re.Match[str]) -> str:
        char = m.group(1)
        try:
            return _LABEL_UNESCAPES[char]
        except KeyError:
            raise ExpositionError(
                source,
                lineno,
                f"invalid escape '\\{char}' in the value of label {name!r}; "
                'only \\\\, \\" and \\n are allowed (write a backslash as \\\\)',
            ) from None

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


def _parse_sample_slow(
    line: str, source: str, lineno: int, openmetrics: bool
) -> tuple[str, Labels, float, float | None]:
    """Parse one stripped sample line the careful way, naming precisely what is wrong."""
    m = _NAME_AT(line)
    if m is None:
        raise _garbled(line, source, lineno)
    name = m.group(0)
    pos = m.end()
    end = len(line)
    labels: Labels = ()
    if pos < end and line[pos] == "{":
        pairs: list[tuple[str, str]] = []
        pos += 1
        while True:
            while pos < end and line[pos] in " \t":
                pos += 1
            if pos >= end:
                raise ExpositionError(
                    source, lineno, f"label set of {name!r} is not closed; add the missing '}}'"
                )
            if line[pos] == "}":
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
            pairs.append((label_name, _unescape_label(qm.group(1), label_name, source, lineno)))
            pos = qm.end()
            while pos < end and line[pos] in " \t":
                pos += 1
            if pos >= end:
                raise ExpositionError(
                    source, lineno, f"label set of {name!r} is not closed; add the missing '}}'"
                )
            if line[pos] == ",":
                pos += 1
            elif line[pos] == "}":
                pos += 1
                break
            else:
                raise ExpositionError(
                    source,
                    lineno,
                    f"expected ',' or '}}' after the value of label {label_name!r} of {name!r}",
                )
        labels = _plain_labels(pairs, source, lineno)
    rest = line[pos:]
    if not rest or rest[0] not in " \t":
        if not rest:
            raise ExpositionError(source, lineno, f"sample {name!r} has no value")
        raise _garbled(line, source, lineno)
    # Values and timestamps contain no '#', so the first one starts an exemplar.
    hash_at = rest.find("#")
    exemplar = rest[hash_at:] if hash_at >= 0 else ""
    tokens = (rest[:hash_at] if hash_at >= 0 else rest).split()
    if not tokens:
        raise ExpositionError(source, lineno, f"sample {name!r} has no value")
    if len(tokens) > 2 and _FLOAT_FULL(tokens[0]) is None:
        raise _garbled(line, source, lineno)
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
    value = float(tokens[0])
    timestamp: float | None = None
    if len(tokens) == 2:
        raw_ts = tokens[1]
        if openmetrics:
            if _FINITE_FULL(raw_ts) is None:
                raise ExpositionError(
                    source,
                    lineno,
                    f"bad timestamp {raw_ts!r} for {name!r}; OpenMetrics wants finite "
                    "seconds since the epoch, e.g. 1700000000.25",
                )
            timestamp = float(raw_ts)
        else:
            if _MILLIS_FULL(raw_ts) is None:
                raise ExpositionError(
                    source,
                    lineno,
                    f"bad timestamp {raw_ts!r} for {name!r}; the 0.0.4 text format wants "
                    "integer milliseconds since the epoch (float seconds only in OpenMetrics, "
                    "which ends with '# EOF')",
                )
            timestamp = int(raw_ts) / 1000.0
    if exemplar:
        if not openmetrics:
            raise ExpositionError(
                source,
                lineno,
                f"unexpected '#' after the sample of {name!r}; exemplars exist only in "
                "OpenMetrics, whose exposition ends with '# EOF'",
            )
        if _EXEMPLAR_FULL(exemplar.rstrip()) is None:
            raise ExpositionError(
                source,
                lineno,
                f"malformed exemplar after {name!r}; expected '# {{labels}} value [timestamp]'",
            )
    return name, labels, value, timestamp
