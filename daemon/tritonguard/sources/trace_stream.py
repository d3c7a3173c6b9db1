"""Stream a trace in time order in bounded memory: spill it into time buckets, replay each sorted.

A trace may be written series by series (as promtool backfill files and ``trace_writer`` are)
or in time order, so replaying it in time order needs a sort. This one is external: the file
is parsed once, each sample packed into 20 bytes and appended to the temporary file of its
time bucket (a fixed span of trace time); replay then reads bucket after bucket, each sorted
in memory. A bucket holding more samples than the budget is split again by time on the way,
so no more than the budget is decoded at once whatever the trace's length or density. Only the
distinct series (name and labels, as many as the trace has, not growing with its duration)
stay in memory throughout.
"""

from __future__ import annotations

import math
import shutil
import struct
import tempfile
import weakref
from collections.abc import Iterator
from dataclasses import dataclass
from operator import itemgetter
from pathlib import Path

from tritonguard.core.replay import InTimeOrder
from tritonguard.core.samples import Labels, Sample
from tritonguard.sources.replay import TraceError, iter_trace

__all__ = ["STREAM_MAX_SAMPLES", "SpilledTrace", "TraceSummary", "open_trace", "scan_trace"]

# A streamed trace costs 20 bytes of temporary disk per sample; this many is 5 GB.
STREAM_MAX_SAMPLES = 250_000_000
# Samples decoded in memory at once while replaying (about 150 bytes each).
BUCKET_SAMPLES = 250_000
# Trace time per bucket: a 50-model cluster scraped every 10 s gives about 20 000 samples per
# minute; denser traces are split further when read, sparser ones simply give small buckets.
BUCKET_SPAN_S = 60.0
# Packed samples buffered in memory before they are appended to their bucket files.
SPILL_BUFFER_BYTES = 16 * 1024 * 1024
# How many sub-buckets an over-full bucket is split into at most at once (files written).
MAX_SPLIT = 256

_RECORD = struct.Struct("<Idd")  # series id, value, timestamp
_READ_RECORDS = 65536
_by_time = itemgetter(2)


@dataclass(frozen=True, slots=True)
class TraceSummary:
    """What a trace holds: how many samples, and its first and last timestamps."""

    samples: int
    start: float
    end: float


def scan_trace(path: str | Path, *, max_samples: int = STREAM_MAX_SAMPLES) -> TraceSummary:
    """Read a trace through once, checking it; return its summary (memory stays bounded)."""
    count = 0
    start = math.inf
    end = -math.inf
    for sample in iter_trace(path, max_samples=max_samples):
        t = sample.timestamp
        if t is None:  # never: the parser requires timestamps here
            continue
        count += 1
        start = min(start, t)
        end = max(end, t)
    return TraceSummary(count, start, end)


def open_trace(
    path: str | Path,
    *,
    max_samples: int = STREAM_MAX_SAMPLES,
    bucket_samples: int = BUCKET_SAMPLES,
    bucket_span_s: float = BUCKET_SPAN_S,
    spill_buffer_bytes: int = SPILL_BUFFER_BYTES,
    spill_dir: str | Path | None = None,
) -> SpilledTrace:
    """Check and spill a trace; iterate the result for its samples in time order.

    Every problem with the file (bad lines, truncation, a gzip bomb) is a TraceError here,
    before the first sample is replayed. Close the result (or use it as a context manager) to
    remove its temporary files at once; they go when it is garbage-collected otherwise.
    """
    return SpilledTrace(
        path,
        max_samples=max_samples,
        bucket_samples=bucket_samples,
        bucket_span_s=bucket_span_s,
        spill_buffer_bytes=spill_buffer_bytes,
        spill_dir=spill_dir,
    )


class SpilledTrace(InTimeOrder):
    """A trace parsed once and spilled into time buckets on disk; iterates in time order.

    Ties (samples of one timestamp) keep their order in the file, exactly as a stable sort of
    the whole trace would give. ``peak_held`` is the most samples decoded in memory at once
    by any iteration so far, ``peak_buffered`` the most held while spilling: both are bounded
    by the budgets given, whatever the trace's length.
    """

    def __init__(
        self,
        path: str | Path,
        *,
        max_samples: int,
        bucket_samples: int,
        bucket_span_s: float,
        spill_buffer_bytes: int,
        spill_dir: str | Path | None,
    ) -> None:
        if bucket_samples < 1 or spill_buffer_bytes < 1:
            raise ValueError("bucket_samples and spill_buffer_bytes must be positive")
        if not (math.isfinite(bucket_span_s) and bucket_span_s > 0):
            raise ValueError("bucket_span_s must be a positive number of seconds")
        self.spill_buffer_bytes = spill_buffer_bytes
        self.path = Path(path)
        self.bucket_samples = bucket_samples
        self.span = bucket_span_s
        self.series: list[tuple[str, Labels]] = []
        self.counts: dict[int, int] = {}
        self.samples = 0
        self.start = math.inf
        self.end = -math.inf
        self.peak_held = 0
        self.peak_buffered = 0
        try:
            self.dir = Path(tempfile.mkdtemp(prefix="tritonguard-replay-", dir=spill_dir))
        except OSError as exc:
            raise TraceError(
                f"{self.path}: cannot make a temporary directory to replay it from: "
                f"{exc.strerror or exc}; set TMPDIR to a writable place"
            ) from None
        self._cleanup = weakref.finalize(self, shutil.rmtree, self.dir, ignore_errors=True)
        try:
            self._spill(max_samples)
        except BaseException:
            self.close()
            raise

    # ---- pass 1: parse and spill ----------------------------------------------------------
    def _spill(self, max_samples: int) -> None:
        ids: dict[tuple[str, Labels], int] = {}
        series = self.series
        counts = self.counts
        span = self.span
        pack = _RECORD.pack
        floor = math.floor
        buffers: dict[int, bytearray] = {}
        buffered = 0
        limit = self.spill_buffer_bytes
        start = math.inf
        end = -math.inf
        for sample in iter_trace(self.path, max_samples=max_samples):
            t = sample.timestamp
            if t is None:  # never: the parser requires timestamps here
                continue
            key = (sample.name, sample.labels)
            sid = ids.get(key)
            if sid is None:
                sid = ids[key] = len(series)
                series.append(key)
            # floor(t / span) never decreases as t grows (division and floor are monotone),
            # so bucket order is time order.
            bucket = floor(t / span)
            buf = buffers.get(bucket)
            if buf is None:
                buf = buffers[bucket] = bytearray()
            buf += pack(sid, sample.value, t)
            counts[bucket] = counts.get(bucket, 0) + 1
            start = min(start, t)
            end = max(end, t)
            buffered += _RECORD.size
            if buffered >= limit:
                self._flush(buffers, self.dir)
                self.peak_buffered = max(self.peak_buffered, buffered // _RECORD.size)
                buffered = 0
        self._flush(buffers, self.dir)
        self.peak_buffered = max(self.peak_buffered, buffered // _RECORD.size)
        self.samples = sum(counts.values())
        self.start, self.end = start, end

    def _flush(self, buffers: dict[int, bytearray], where: Path) -> None:
        try:
            for bucket, buf in buffers.items():
                with (where / _name(bucket)).open("ab") as out:
                    out.write(buf)
        except OSError as exc:
            raise TraceError(
                f"{self.path}: cannot spill the trace to {where}: {exc.strerror or exc}; "
                "free disk space or set TMPDIR elsewhere"
            ) from None
        buffers.clear()

    # ---- pass 2: replay bucket by bucket ----------------------------------------------------
    def __iter__(self) -> Iterator[Sample]:
        """Yield every sample in time order (ties in file order), a bucket at a time."""
        for bucket in sorted(self.counts):
            yield from self._bucket(self.dir / _name(bucket), self.counts[bucket], depth=0)

    def _bucket(self, path: Path, count: int, *, depth: int) -> Iterator[Sample]:
        if count <= self.bucket_samples:
            yield from self._sorted(path, count)
            return
        lo, hi = self._range(path)
        if lo == hi:
            # One instant holds more than the budget: its samples are already in file order.
            yield from self._streamed(path)
            return
        yield from self._split(path, count, lo, hi, depth)

    def _sorted(self, path: Path, count: int) -> Iterator[Sample]:
        data = self._read(path)
        records = list(_RECORD.iter_unpack(data))
        del data
        self.peak_held = max(self.peak_held, len(records))
        records.sort(key=_by_time)  # stable: ties keep file order
        series = self.series
        for sid, value, t in records:
            name, labels = series[sid]
            yield Sample(name, labels, value, t)

    def _streamed(self, path: Path) -> Iterator[Sample]:
        series = self.series
        for block in self._blocks(path):
            self.peak_held = max(self.peak_held, len(block) // _RECORD.size)
            for sid, value, t in _RECORD.iter_unpack(block):
                name, labels = series[sid]
                yield Sample(name, labels, value, t)

    def _split(self, path: Path, count: int, lo: float, hi: float, depth: int) -> Iterator[Sample]:
        parts = min(MAX_SPLIT, max(2, math.ceil(2 * count / self.bucket_samples)))
        width = (hi - lo) / parts
        where = path.with_name(f"{path.name}.{depth}")
        where.mkdir(exist_ok=True)
        sub_counts: dict[int, int] = {}
        buffers: dict[int, bytearray] = {}
        buffered = 0
        floor = math.floor
        last = parts - 1
        for block in self._blocks(path):
            for record in _RECORD.iter_unpack(block):
                # Monotone in t like the top-level buckets; the largest t lands in the last.
                part = min(last, floor((record[2] - lo) / width)) if width > 0 else 0
                buf = buffers.get(part)
                if buf is None:
                    buf = buffers[part] = bytearray()
                buf += _RECORD.pack(*record)
                sub_counts[part] = sub_counts.get(part, 0) + 1
                buffered += _RECORD.size
                if buffered >= self.spill_buffer_bytes:
                    self._flush(buffers, where)
                    buffered = 0
        self._flush(buffers, where)
        try:
            for part in sorted(sub_counts):
                yield from self._bucket(where / _name(part), sub_counts[part], depth=depth + 1)
        finally:
            shutil.rmtree(where, ignore_errors=True)

    def _range(self, path: Path) -> tuple[float, float]:
        lo = math.inf
        hi = -math.inf
        for block in self._blocks(path):
            times = [t for _, _, t in _RECORD.iter_unpack(block)]
            lo = min(lo, *times)
            hi = max(hi, *times)
        return lo, hi

    def _blocks(self, path: Path) -> Iterator[bytes]:
        try:
            # Never more records at once than the bucket budget, packed or not.
            size = _RECORD.size * min(_READ_RECORDS, self.bucket_samples)
            with path.open("rb") as handle:
                while block := handle.read(size):
                    yield block
        except OSError as exc:
            raise TraceError(
                f"{self.path}: cannot read back its spilled samples: {exc.strerror or exc}"
            ) from None

    def _read(self, path: Path) -> bytes:
        try:
            return path.read_bytes()
        except OSError as exc:
            raise TraceError(
                f"{self.path}: cannot read back its spilled samples: {exc.strerror or exc}"
            ) from None

    # ---- lifetime -------------------------------------------------------------------------
    def close(self) -> None:
        """Remove the temporary files; the trace cannot be iterated afterwards."""
        self._cleanup()

    def __enter__(self) -> SpilledTrace:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _name(bucket: int) -> str:
    return f"b{bucket}"
