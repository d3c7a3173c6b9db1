"""Bounded gunzip: inflate gzip data chunk by chunk, refusing gzip bombs before they inflate."""

from __future__ import annotations

import zlib
from collections.abc import Iterator

__all__ = [
    "GZIP_MAGIC",
    "MAX_GZIP_RATIO",
    "GzipBombError",
    "GzipCorruptError",
    "Inflater",
    "gunzip",
]

GZIP_MAGIC = b"\x1f\x8b"

# Recorded traces and scrapes compress 20-30 times (measured on the lab's traces and on
# constant series); deflate cannot exceed about 1030. Far past what text gives, and only a
# crafted file inflates this much, so it is refused at once instead of being inflated.
MAX_GZIP_RATIO = 200
# Below this much output the ratio is not judged: tiny, very regular payloads may exceed it.
RATIO_FLOOR_BYTES = 2 * 1024 * 1024
# What one call of the inflater hands out at most, so a caller holds a bounded piece.
OUTPUT_CHUNK_BYTES = 1024 * 1024


class GzipCorruptError(ValueError):
    """The gzip data is damaged or cut short; ``line`` is the output line it was reached at."""

    def __init__(self, line: int, reason: str) -> None:
        super().__init__(reason)
        self.line = line
        self.reason = reason


class GzipBombError(GzipCorruptError):
    """The gzip data inflates far more than any text exposition does, or past a hard limit."""


class Inflater:
    """Gunzip a stream fed in chunks (several gzip members allowed), within bounds.

    ``max_bytes`` caps the total output (None: no cap); ``max_ratio`` caps output per input
    byte once the output passes ``ratio_floor``. Errors carry the 1-based line of the output
    that was reached, so a message can point at the file's line.
    """

    def __init__(
        self,
        *,
        max_bytes: int | None = None,
        max_ratio: float = MAX_GZIP_RATIO,
        ratio_floor: int = RATIO_FLOOR_BYTES,
    ) -> None:
        self.max_bytes = max_bytes
        self.max_ratio = max_ratio
        self.ratio_floor = ratio_floor
        self.consumed = 0
        self.produced = 0
        self.newlines = 0
        self._member: zlib._Decompress | None = None
        self._started = False

    @property
    def line(self) -> int:
        """Return the 1-based line of the output reached so far."""
        return self.newlines + 1

    def feed(self, data: bytes) -> Iterator[bytes]:
        """Inflate ``data`` (the next compressed bytes); yield output of at most 1 MiB a piece."""
        while True:
            if self._member is None:
                if self._started:
                    # Members may be followed by zero padding (as tar and some tools write).
                    data = data.lstrip(b"\x00")
                    if data and not data.startswith(GZIP_MAGIC[: len(data)]):
                        raise GzipCorruptError(
                            self.line, "unexpected data after the end of the gzip stream"
                        )
                if not data:
                    return
                self._member = zlib.decompressobj(wbits=zlib.MAX_WBITS | 16)
                self._started = True
            member = self._member
            room = self._room()
            try:
                out = member.decompress(data, room)
            except zlib.error as exc:
                raise GzipCorruptError(self.line, str(exc)) from None
            if member.eof:
                rest = member.unused_data
                self._member = None
            else:
                rest = member.unconsumed_tail
            self.consumed += len(data) - len(rest)
            data = rest
            if out:
                self._account(out)
                yield out
            # A full output buffer may leave output pending inside zlib even when all input
            # was taken, so only a short one (or the member's end) means this input is done.
            if self._member is not None and len(out) < room and not data:
                return

    def finish(self) -> None:
        """Check that the stream ended where a gzip member ends (not cut off mid-member)."""
        if self._member is not None or not self._started:
            raise GzipCorruptError(
                self.line,
                "the gzip stream ends early (the file is truncated or still being written)",
            )

    def _room(self) -> int:
        limit = OUTPUT_CHUNK_BYTES
        if self.max_bytes is not None:
            # One byte beyond the cap is asked for, so crossing it is seen, not clipped.
            limit = min(limit, self.max_bytes - self.produced + 1)
        return max(limit, 1)

    def _account(self, out: bytes) -> None:
        if self.max_bytes is not None and self.produced + len(out) > self.max_bytes:
            # Name the line holding the first byte past the cap.
            keep = self.max_bytes - self.produced
            raise GzipBombError(
                self.newlines + out.count(b"\n", 0, keep) + 1,
                f"gzip data inflates past {self.max_bytes} bytes, the limit for data read "
                "whole; split it, or stream it (a trace: tritonguard replay)",
            )
        self.produced += len(out)
        self.newlines += out.count(b"\n")
        if self.produced > self.ratio_floor and self.produced > self.max_ratio * max(
            self.consumed, 1
        ):
            raise GzipBombError(
                self.line,
                f"gzip data inflates more than {self.max_ratio:g} times ({self.consumed} "
                f"bytes gave {self.produced} so far), where metrics text gives about 25: a "
                "gzip bomb, not a trace or scrape; check where the file came from",
            )


def gunzip(data: bytes, *, max_bytes: int | None = None) -> bytes:
    """Inflate complete gzip data in memory within the bounds of ``Inflater``."""
    inflater = Inflater(max_bytes=max_bytes)
    out = b"".join(inflater.feed(data))
    inflater.finish()
    return out
