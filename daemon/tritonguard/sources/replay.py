"""Replay source: read a recorded trace file (OpenMetrics, optionally gzipped) into samples."""

from __future__ import annotations

from pathlib import Path

from tritonguard.core.exposition import ExpositionError, decode_payload, parse_exposition
from tritonguard.core.samples import Sample

# A trace is loaded whole to be replayed in timestamp order; beyond this it is refused with a
# clear message rather than exhausting the machine's memory.
MAX_TRACE_BYTES = 2 * 1024**3
MAX_TRACE_SAMPLES = 20_000_000


class TraceError(ValueError):
    """A trace that cannot be replayed; ``str()`` is one line naming the file, line and fix."""


def load_trace(path: str | Path, *, max_samples: int = MAX_TRACE_SAMPLES) -> list[Sample]:
    """Read a trace (DESIGN.md format) and return its samples; every sample must be timed."""
    p = Path(path)
    try:
        size = p.stat().st_size
        if size > MAX_TRACE_BYTES:
            raise TraceError(
                f"{p}: {size} bytes is over the {MAX_TRACE_BYTES} byte limit; split the trace by time"
            )
        data = p.read_bytes()
    except OSError as exc:
        raise TraceError(f"{p}: cannot read trace: {exc.strerror or exc}") from None
    if not data.strip():
        raise TraceError(
            f"{p}:1: empty trace; record one with the lab or export it from Prometheus"
        )
    try:
        text = decode_payload(data, source=str(p))
        # A trace is OpenMetrics by contract: read as 0.0.4 its timestamps would be taken as
        # milliseconds, and a missing `# EOF` is how a truncated recording shows.
        expo = parse_exposition(text, source=str(p), openmetrics=True, max_samples=max_samples)
    except ExpositionError as exc:
        raise TraceError(str(exc)) from None
    if not expo.samples:
        raise TraceError(f"{p}:1: the trace holds no samples")
    for s in expo.samples:
        if s.timestamp is None:
            line = _line_of(text, s.name)
            raise TraceError(
                f"{p}:{line}: sample {s.name} has no timestamp; a trace needs one on every sample "
                "(seconds, OpenMetrics)"
            )
    return expo.samples


def _line_of(text: str, name: str) -> int:
    for n, line in enumerate(text.splitlines(), 1):
        if line.startswith(name) and len(line.split()) == 2:
            return n
    return 1
