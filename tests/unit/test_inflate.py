"""Bounded gunzip: chunked inflation equals gzip's, gzip bombs stop before they inflate."""

from __future__ import annotations

import gzip
import random

import pytest

from tritonguard.core.inflate import (
    OUTPUT_CHUNK_BYTES,
    GzipBombError,
    GzipCorruptError,
    Inflater,
    gunzip,
)


def _noise(n: int) -> bytes:
    return random.Random(7).randbytes(n)


@pytest.mark.parametrize("step", [1, 13, 4096, 1 << 20])
def test_any_chunking_gives_what_gzip_gives(step: int) -> None:
    """Members, zero padding and chunk boundaries anywhere: the output is gzip.decompress's."""
    raw = _noise(70_000) + b"a 1\n" * 50_000
    data = gzip.compress(raw) + gzip.compress(b"second member\n") + b"\x00\x00"
    inflater = Inflater()
    out = b"".join(p for i in range(0, len(data), step) for p in inflater.feed(data[i : i + step]))
    inflater.finish()
    assert out == raw + b"second member\n"
    assert inflater.line == out.count(b"\n") + 1


def test_output_comes_in_bounded_pieces() -> None:
    """However much one input chunk inflates to, no piece handed out exceeds 1 MiB."""
    data = gzip.compress(_noise(1000) * 5000)
    pieces = list(Inflater().feed(data))
    assert len(pieces) > 1 and max(len(p) for p in pieces) <= OUTPUT_CHUNK_BYTES


def test_a_gzip_bomb_stops_at_the_ratio_after_a_few_megabytes() -> None:
    """1 GiB of one repeated line is refused after inflating only past the ratio floor."""
    member = gzip.compress(b'nv_inference_count{model="m"} 1 1700000000\n' * 400_000, 9)
    inflater = Inflater(ratio_floor=1 << 20)
    produced = 0
    with pytest.raises(GzipBombError) as err:
        for _ in range(64):
            for piece in inflater.feed(member):
                produced += len(piece)
    assert produced <= 3 * OUTPUT_CHUNK_BYTES
    assert err.value.line > 1 and "gzip bomb" in err.value.reason


def test_max_bytes_caps_the_output_exactly() -> None:
    """Past max_bytes the inflater refuses, naming the line it reached."""
    data = gzip.compress(b"a 1\n" * 100)
    assert gunzip(data, max_bytes=400) == b"a 1\n" * 100
    with pytest.raises(GzipBombError, match="past 399 bytes") as err:
        gunzip(data, max_bytes=399)
    assert err.value.line == 100


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (gzip.compress(b"a 1\n" * 1000)[:-12], "ends early"),
        (gzip.compress(b"a 1\n") + b"junk", "unexpected data after the end"),
        (b"\x1f\x8b\x08\x00truncated-gzip", "invalid"),
    ],
    ids=["truncated", "trailing-junk", "garbage"],
)
def test_damaged_gzip_is_a_corrupt_error(data: bytes, reason: str) -> None:
    """Cut-off, trailing junk and garbage are errors, never silently shortened output."""
    with pytest.raises(GzipCorruptError, match=reason) as err:
        gunzip(data)
    assert not isinstance(err.value, GzipBombError)
