"""Concurrent HTTP scrapes of many `/metrics` endpoints; a failing target yields an error record."""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import aiohttp

from tritonguard.core.urls import BasicCredentials, redact_url, split_userinfo

# Prometheus's own Accept header: Triton serves text format 0.0.4 either way, other exporters
# may prefer OpenMetrics, which the parser reads too.
ACCEPT = "application/openmetrics-text;version=1.0.0;q=0.5,text/plain;version=0.0.4;q=0.4,*/*;q=0.1"
DEFAULT_MAX_BODY_BYTES = 64 * 1024 * 1024
# How much of the body one read hands over: small enough that a body over the cap is caught
# within one read of it, large enough that a 200 KB Triton exposition takes a few reads.
_READ_CHUNK_BYTES = 64 * 1024


@dataclass(frozen=True, slots=True)
class ScrapeTarget:
    """One endpoint to scrape: a name for logs and metrics, its URL and extra request headers.

    ``auth`` is sent as HTTP basic authentication to this URL only. Credentials written into
    the URL (``http://user:pass@host/metrics``) are taken out of it and sent the same way.
    """

    name: str
    url: str
    headers: Mapping[str, str] = field(default_factory=dict)
    auth: BasicCredentials | None = field(default=None, repr=False)


@dataclass(frozen=True, slots=True)
class ScrapeResult:
    """What one scrape returned: the body on success, else the error; never both."""

    target: ScrapeTarget
    timestamp: float
    duration_s: float
    text: str | None = None
    error: str | None = None
    status: int | None = None

    @property
    def ok(self) -> bool:
        """Return True when the scrape returned a body."""
        return self.error is None and self.text is not None


class MetricsScraper:
    """Scrape many targets at once with a per-target timeout, start jitter and bounded concurrency.

    ``scrape`` never raises for a network or HTTP problem: a down, slow or failing target
    becomes a ``ScrapeResult`` with ``error`` set, so one bad target never stops the loop.
    """

    def __init__(
        self,
        *,
        timeout_s: float = 5.0,
        jitter_s: float = 0.0,
        max_concurrency: int = 32,
        max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
        rng: random.Random | None = None,
    ) -> None:
        if timeout_s <= 0:
            raise ValueError("timeout_s must be positive")
        if max_concurrency < 1:
            raise ValueError("max_concurrency must be at least 1")
        self._timeout_s = timeout_s
        self._jitter_s = max(0.0, jitter_s)
        self._max_body_bytes = max_body_bytes
        self._semaphore = asyncio.Semaphore(max_concurrency)
        self._rng = rng or random.Random()
        self._session: aiohttp.ClientSession | None = None

    def _get_session(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(
                headers={"Accept": ACCEPT, "User-Agent": "tritonguard"},
                connector=aiohttp.TCPConnector(limit=0, ttl_dns_cache=60),
            )
        return self._session

    async def scrape(self, target: ScrapeTarget) -> ScrapeResult:
        """Scrape one target; the timestamp is taken when the request is sent."""
        if self._jitter_s:
            # Spread the targets over the jitter window so they are not all hit at once.
            await asyncio.sleep(self._rng.uniform(0.0, self._jitter_s))
        async with self._semaphore:
            started = time.time()
            clock = time.monotonic()
            try:
                async with asyncio.timeout(self._timeout_s):
                    return await self._fetch(target, started, clock)
            except TimeoutError:
                return self._failed(target, started, clock, f"timeout after {self._timeout_s:g}s")
            except aiohttp.ClientPayloadError as exc:
                return self._failed(target, started, clock, _describe_cut_short(exc))
            except aiohttp.ClientError as exc:
                return self._failed(target, started, clock, _describe_client_error(exc))
            except OSError as exc:
                return self._failed(target, started, clock, f"connection failed: {exc}")
            except UnicodeDecodeError:
                return self._failed(target, started, clock, "response body is not UTF-8 text")

    async def _fetch(self, target: ScrapeTarget, started: float, clock: float) -> ScrapeResult:
        session = self._get_session()
        url, url_auth = split_userinfo(target.url)
        creds = target.auth or url_auth
        headers = dict(target.headers)
        if creds is not None:
            headers["Authorization"] = creds.authorization()
        # Redirects are refused: a redirect could carry the credentials and headers to another
        # host, and a scrape of whatever the redirect names is not the configured target.
        async with session.get(url, headers=headers, allow_redirects=False) as response:
            if response.status != 200:
                return self._failed(
                    target, started, clock, _describe_status(response), status=response.status
                )
            declared = response.content_length
            if declared is not None and declared > self._max_body_bytes:
                response.close()
                return self._failed(
                    target,
                    started,
                    clock,
                    _too_large(self._max_body_bytes, f"Content-Length is {declared}"),
                    status=response.status,
                )
            body = bytearray()
            # Read to the end of the body (aiohttp raises ClientPayloadError when it is cut
            # short), never holding more than the cap: the read that would pass it ends the
            # scrape and closes the connection.
            async for chunk in response.content.iter_chunked(_READ_CHUNK_BYTES):
                if len(body) + len(chunk) > self._max_body_bytes:
                    response.close()
                    return self._failed(
                        target,
                        started,
                        clock,
                        _too_large(self._max_body_bytes, "the body went on past it"),
                        status=response.status,
                    )
                body += chunk
            return ScrapeResult(
                target=target,
                timestamp=started,
                duration_s=time.monotonic() - clock,
                text=body.decode("utf-8"),
                status=response.status,
            )

    @staticmethod
    def _failed(
        target: ScrapeTarget, started: float, clock: float, error: str, status: int | None = None
    ) -> ScrapeResult:
        return ScrapeResult(
            target=target,
            timestamp=started,
            duration_s=time.monotonic() - clock,
            error=error,
            status=status,
        )

    async def scrape_all(self, targets: Sequence[ScrapeTarget]) -> list[ScrapeResult]:
        """Scrape every target concurrently; results come back in the order of ``targets``."""
        return list(await asyncio.gather(*(self.scrape(t) for t in targets)))

    async def close(self) -> None:
        """Close the HTTP session; a later scrape opens a new one."""
        if self._session is not None and not self._session.closed:
            await self._session.close()
        self._session = None


def _describe_status(response: aiohttp.ClientResponse) -> str:
    """Return why a non-200 answer is no scrape; a redirect names where it pointed."""
    head = f"HTTP {response.status} {response.reason or ''}".strip()
    if 300 <= response.status < 400:
        location = response.headers.get("Location")
        where = f" to {redact_url(location)}" if location else ""
        return (
            f"{head}{where}: redirects are not followed; set the target to the URL that "
            "serves the metrics"
        )
    return head


def _too_large(cap: int, why: str) -> str:
    return (
        f"body larger than the {cap}-byte scrape limit ({why}); drop series at the exporter "
        "or scrape a smaller endpoint"
    )


def _describe_cut_short(exc: aiohttp.ClientPayloadError) -> str:
    """Return a one-line reason for a body that ended before its declared end."""
    detail = " ".join(str(exc).split())[:200]
    return f"body cut short: the connection ended before the whole body arrived ({detail})"


def _describe_client_error(exc: aiohttp.ClientError) -> str:
    """Return a short, log-friendly reason for a client error."""
    if isinstance(exc, aiohttp.ClientConnectorError):
        return f"connection failed: {exc.os_error.strerror or exc.os_error}"
    text = str(exc) or type(exc).__name__
    return f"{type(exc).__name__}: {text}".splitlines()[0]
