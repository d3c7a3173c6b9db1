"""Scrapes read whole bodies from a real HTTP server, or fail: cut short, too slow, too large."""

from __future__ import annotations

import asyncio
import time
import tracemalloc
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from aiohttp import web

from tritonguard.clients.metrics_scraper import (
    DEFAULT_MAX_BODY_BYTES,
    MetricsScraper,
    ScrapeResult,
    ScrapeTarget,
)
from tritonguard.core.exposition import parse_exposition
from tritonguard.core.samples import Sample

CAPTURE_50 = Path(__file__).parents[2] / "benchmarks" / "data" / "triton_50_models.prom"
CAPTURE = CAPTURE_50.read_bytes()

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@dataclass
class ServerLog:
    """What the server saw and did: requests, bytes it managed to send, how it framed them."""

    requests: int = 0
    sent: int = 0
    chunked: list[bool] = field(default_factory=list)


@asynccontextmanager
async def _serving(handler: Handler) -> AsyncIterator[str]:
    """Serve ``handler`` at /metrics on a free loopback port; yield the URL."""
    app = web.Application()
    app.router.add_get("/metrics", handler)
    # Handlers are cancelled when the scraper hangs up, so a trickling or endless body stops.
    runner = web.AppRunner(app, access_log=None, handler_cancellation=True, shutdown_timeout=1.0)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        yield f"http://127.0.0.1:{port}/metrics"
    finally:
        await runner.cleanup()


def _pieces(body: bytes, count: int) -> list[bytes]:
    size = -(-len(body) // count)
    return [body[i : i + size] for i in range(0, len(body), size)]


def _streaming(
    log: ServerLog,
    pieces: list[bytes],
    *,
    pause_s: float = 0.0,
    content_length: int | None = None,
    hang_up_after: int | None = None,
) -> Handler:
    """Return a handler writing ``pieces`` one write each, pausing between them.

    Without ``content_length`` the body goes out chunked. ``hang_up_after`` closes the
    connection after that many pieces, before the body is complete.
    """

    async def handle(request: web.Request) -> web.StreamResponse:
        log.requests += 1
        response = web.StreamResponse(headers={"Content-Type": "text/plain; version=0.0.4"})
        if content_length is not None:
            response.content_length = content_length
        else:
            response.enable_chunked_encoding()
        await response.prepare(request)
        log.chunked.append(response.headers.get("Transfer-Encoding") == "chunked")
        for index, piece in enumerate(pieces):
            if hang_up_after is not None and index == hang_up_after:
                await asyncio.sleep(0.05)
                transport = request.transport
                assert transport is not None
                transport.close()
                return response
            await response.write(piece)
            log.sent += len(piece)
            if pause_s:
                await asyncio.sleep(pause_s)
        await response.write_eof()
        return response

    return handle


async def _scrape(
    url: str, *, timeout_s: float, max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
) -> ScrapeResult:
    scraper = MetricsScraper(timeout_s=timeout_s, max_body_bytes=max_body_bytes)
    try:
        return await scraper.scrape(ScrapeTarget("t", url))
    finally:
        await scraper.close()


def _samples(body: bytes) -> list[Sample]:
    return parse_exposition(body.decode("utf-8"), source="expected").samples


def _assert_whole(result: ScrapeResult, body: bytes) -> None:
    """Check that the scrape succeeded and parses to exactly the samples ``body`` holds."""
    assert result.ok, result.error
    assert result.text is not None
    assert result.text.encode("utf-8") == body
    assert parse_exposition(result.text, source="scraped").samples == _samples(body)


def _five_megabytes() -> bytes:
    """Return a valid exposition of about 5 MB: the 50-model capture with 27x the models."""
    families: list[tuple[list[str], list[str]]] = []
    for line in CAPTURE.decode().splitlines():
        if line.startswith("# HELP"):
            families.append(([line], []))
        elif line.startswith("#"):
            families[-1][0].append(line)
        elif line:
            families[-1][1].append(line)
    out: list[str] = []
    for header, samples in families:
        out.extend(header)
        for copy in range(27):
            out.extend(s.replace('model="', f'model="c{copy}_') for s in samples)
    return ("\n".join(out) + "\n").encode()


async def test_fifty_model_capture_arrives_whole() -> None:
    """The 191 KB capture of a real 50-model Triton, served plainly, parses to all its samples."""
    log = ServerLog()

    async def handle(request: web.Request) -> web.StreamResponse:
        log.requests += 1
        return web.Response(body=CAPTURE, content_type="text/plain")

    async with _serving(handle) as url:
        results = [await _scrape(url, timeout_s=5.0) for _ in range(3)]
    for result in results:
        _assert_whole(result, CAPTURE)
    sample_lines = [line for line in CAPTURE.splitlines() if line and not line.startswith(b"#")]
    assert len(_samples(CAPTURE)) == len(sample_lines)
    assert log.requests == 3


async def test_body_written_in_two_writes_arrives_whole() -> None:
    """A Content-Length body sent in two writes with a pause is read to its end, not halved."""
    log = ServerLog()
    handler = _streaming(log, _pieces(CAPTURE, 2), pause_s=0.1, content_length=len(CAPTURE))
    async with _serving(handler) as url:
        result = await _scrape(url, timeout_s=5.0)
    _assert_whole(result, CAPTURE)
    assert log.chunked == [False]


async def test_five_megabyte_body_arrives_whole() -> None:
    """A 5 MB exposition under the default cap is accepted whole."""
    body = _five_megabytes()
    assert 5_000_000 < len(body) < 6_000_000

    async def handle(request: web.Request) -> web.StreamResponse:
        return web.Response(body=body, content_type="text/plain")

    async with _serving(handle) as url:
        result = await _scrape(url, timeout_s=10.0)
    _assert_whole(result, body)


async def test_chunked_body_arrives_whole() -> None:
    """A body sent with chunked transfer encoding in many chunks is reassembled whole."""
    log = ServerLog()
    async with _serving(_streaming(log, _pieces(CAPTURE, 40))) as url:
        result = await _scrape(url, timeout_s=5.0)
    _assert_whole(result, CAPTURE)
    assert log.chunked == [True]


async def test_slow_trickle_within_the_timeout_is_accepted_whole() -> None:
    """Twenty small writes 50 ms apart (about 1 s) finish inside a 5 s timeout: whole body."""
    log = ServerLog()
    async with _serving(_streaming(log, _pieces(CAPTURE, 20), pause_s=0.05)) as url:
        started = time.monotonic()
        result = await _scrape(url, timeout_s=5.0)
        elapsed = time.monotonic() - started
    _assert_whole(result, CAPTURE)
    assert elapsed >= 0.9


async def test_trickle_past_the_timeout_is_an_error() -> None:
    """A body still trickling when the scrape timeout ends is an error, never half a scrape."""
    log = ServerLog()
    async with _serving(_streaming(log, _pieces(CAPTURE, 20), pause_s=0.2)) as url:
        started = time.monotonic()
        result = await _scrape(url, timeout_s=0.5)
        elapsed = time.monotonic() - started
    assert not result.ok and result.text is None
    assert result.error == "timeout after 0.5s"
    assert 0 < log.sent < len(CAPTURE)
    assert elapsed < 1.5


@pytest.mark.parametrize("framing", ["content-length", "chunked"])
async def test_body_cut_short_is_an_error(framing: str) -> None:
    """The server sends part of the body, then closes: an error naming the cut, no text."""
    log = ServerLog()
    length = len(CAPTURE) if framing == "content-length" else None
    handler = _streaming(log, _pieces(CAPTURE, 4), content_length=length, hang_up_after=2)
    async with _serving(handler) as url:
        result = await _scrape(url, timeout_s=5.0)
    assert log.chunked == [framing == "chunked"]
    assert 0 < log.sent < len(CAPTURE)
    assert not result.ok and result.text is None
    assert result.error is not None and result.error.startswith("body cut short:")
    assert result.status is None


async def test_body_exactly_at_the_cap_is_accepted_one_byte_over_is_not() -> None:
    """The cap is the largest accepted body: ``len(body)`` passes, ``len(body) - 1`` fails."""
    log = ServerLog()
    async with _serving(_streaming(log, _pieces(CAPTURE, 8))) as url:
        at_cap = await _scrape(url, timeout_s=5.0, max_body_bytes=len(CAPTURE))
        under = await _scrape(url, timeout_s=5.0, max_body_bytes=len(CAPTURE) - 1)
    _assert_whole(at_cap, CAPTURE)
    assert not under.ok and under.text is None
    assert under.error is not None and "larger than the 191233-byte scrape limit" in under.error


async def test_endless_body_over_the_cap_fails_fast_in_bounded_memory() -> None:
    """A 200 MB chunked stream against a 1 MB cap fails within a second or so.

    The scraper stops reading at the cap and hangs up: the server manages to send only a few
    MB of its 200, and the scrape's memory stays a few MB, not the size of the body.
    """
    log = ServerLog()
    piece = b"x" * 65536
    total = 200 * 1024 * 1024
    handler = _streaming(log, [piece] * (total // len(piece)))
    async with _serving(handler) as url:
        tracemalloc.start()
        try:
            tracemalloc.reset_peak()
            started = time.monotonic()
            result = await _scrape(url, timeout_s=30.0, max_body_bytes=1024 * 1024)
            elapsed = time.monotonic() - started
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert not result.ok and result.text is None
    assert result.error is not None and "larger than the 1048576-byte scrape limit" in result.error
    assert result.status == 200
    assert elapsed < 3.0
    assert log.sent < 32 * 1024 * 1024
    assert peak < 8 * 1024 * 1024


async def test_declared_length_over_the_cap_is_refused_before_reading() -> None:
    """A Content-Length above the cap ends the scrape at the headers, whatever the body does."""
    log = ServerLog()
    piece = b"x" * 65536
    handler = _streaming(log, [piece] * 3200, pause_s=0.01, content_length=3200 * len(piece))
    async with _serving(handler) as url:
        started = time.monotonic()
        result = await _scrape(url, timeout_s=30.0, max_body_bytes=1024 * 1024)
        elapsed = time.monotonic() - started
    assert not result.ok and result.text is None
    assert result.error is not None and f"Content-Length is {3200 * len(piece)}" in result.error
    assert elapsed < 1.0
