"""Replay source: read a recorded trace file (OpenMetrics, optionally gzipped) into samples."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from tritonguard.core.config_info import TRACE_INFO, check_trace_info
from tritonguard.core.exposition import (
    ExpositionError,
    SeriesCache,
    iter_exposition,
    iter_payload_lines,
    read_sample_line,
)
from tritonguard.core.samples import Sample

# Samples a trace loaded whole into memory may hold (``load_trace``); past it the trace is
# refused with the line where it happened rather than exhausting the machine's memory.
# Replay itself streams (``trace_stream``) and is bounded by disk, not memory.
MAX_TRACE_SAMPLES = 20_000_000
# Bytes read from the file at a time.
READ_BLOCK_BYTES = 1024 * 1024


class TraceError(ValueError):
    """A trace that cannot be replayed; ``str()`` is one line naming the file, line and fix."""


def iter_trace(path: str | Path, *, max_samples: int = MAX_TRACE_SAMPLES) -> Iterator[Sample]:
    """Yield a trace's samples in file order, reading it block by block; raise TraceError.

    Memory stays bounded whatever the file's length. Every sample must be timed; a gzip bomb,
    a line without an end or binary data is refused at the line it reaches.
    """
    p = Path(path)
    try:
        handle = p.open("rb")
    except OSError as exc:
        raise TraceError(f"{p}: cannot read trace: {exc.strerror or exc}") from None
    count = 0
    content = [False]
    with handle:
        lines = iter_payload_lines(_blocks(handle, p, content), source=str(p))
        try:
            # A trace is OpenMetrics by contract: read as 0.0.4 its timestamps would be taken
            # as milliseconds, and a missing `# EOF` is how a truncated recording shows.
            for sample in iter_exposition(
                lines,
                source=str(p),
                openmetrics=True,
                max_samples=max_samples,
                require_timestamps=True,
            ):
                count += 1
                if sample.name in TRACE_INFO:
                    _check_info(p, sample)
                yield sample
        except ExpositionError as exc:
            if not content[0]:
                raise TraceError(
                    f"{p}:1: empty trace; record one with the lab or export it from Prometheus"
                ) from None
            raise TraceError(str(exc)) from None
    if count == 0:
        raise TraceError(f"{p}:1: the trace holds no samples")


def _check_info(path: Path, sample: Sample) -> None:
    """Refuse an info sample that cannot be read, naming its line: before anything replays."""
    try:
        check_trace_info(sample)
    except ValueError as exc:
        line = _line_of(path, sample)
        raise TraceError(
            f"{path}:{line or '?'}: {exc}; correct or remove that line (docs/discovery.md, "
            "'Changes in a trace')"
        ) from None


def _line_of(path: Path, sample: Sample) -> int | None:
    """Return the 1-based line holding ``sample``, read again from the file (errors only)."""
    cache = SeriesCache()
    head = sample.name + "{"
    try:
        with path.open("rb") as handle:
            lines = iter_payload_lines(_blocks(handle, path, [False]), source=str(path))
            for number, line in enumerate(lines, start=1):
                if not line.startswith(head):
                    continue
                try:
                    entry, _, stamp = read_sample_line(
                        line, openmetrics=True, cache=cache, source=str(path), lineno=number
                    )
                except ExpositionError:
                    continue
                if entry.labels == sample.labels and stamp and float(stamp) == sample.timestamp:
                    return number
    except (OSError, ExpositionError):
        return None
    return None


def load_trace(path: str | Path, *, max_samples: int = MAX_TRACE_SAMPLES) -> list[Sample]:
    """Read a trace (DESIGN.md format) and return its samples; every sample must be timed.

    This holds the whole trace in memory; replaying a long one goes through
    ``trace_stream.open_trace`` instead.
    """
    return list(iter_trace(path, max_samples=max_samples))


def _blocks(handle: BinaryIO, path: Path, content: list[bool]) -> Iterator[bytes]:
    """Yield the file's bytes block by block, noting in ``content[0]`` any that is not blank."""
    while True:
        try:
            block = handle.read(READ_BLOCK_BYTES)
        except OSError as exc:
            raise TraceError(f"{path}: cannot read trace: {exc.strerror or exc}") from None
        if not block:
            return
        if not content[0] and block.strip():
            content[0] = True
        yield block
