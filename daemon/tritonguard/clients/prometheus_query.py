"""PromQL instant queries through prometheus-api-client, run off the event loop with timeouts."""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import requests
import urllib3
from prometheus_api_client.exceptions import PrometheusApiClientException
from prometheus_api_client.prometheus_connect import PrometheusConnect
from urllib3.util.retry import Retry

from tritonguard.core.urls import redact_url, split_userinfo


class PrometheusQueryError(RuntimeError):
    """A query failed: Prometheus down, slow, or it rejected the query."""


class _RedirectRefused(requests.RequestException):
    """Prometheus answered with a redirect, which is not followed."""


def _refuse_redirects(response: requests.Response, *args: Any, **kwargs: Any) -> None:
    """Raise before requests follows a redirect, which would carry the headers along."""
    if response.is_redirect:
        location = " ".join(redact_url(response.headers.get("Location", "")).split())[:200]
        response.close()
        raise _RedirectRefused(
            f"HTTP {response.status_code} redirect to {location}: redirects are not followed; "
            "set prometheus_url to the server's own address",
            response=response,
        )


class _ResponseTooLarge(requests.RequestException):
    """Prometheus' answer passed the byte cap, or took longer than the timeout to arrive."""


class _BodyFailed(requests.RequestException):
    """Prometheus' answer broke off, stalled or could not be decoded while it was read."""


# Each read takes what has arrived, up to this much, so the deadline is checked between reads
# however slowly the body comes.
_READ_BYTES = 64 * 1024


def _capped_body(max_bytes: int, timeout_s: float) -> Any:
    """Return a response hook reading the body itself, at most ``max_bytes`` within ``timeout_s``.

    requests reads the body after its response hooks, so this one bounds what a huge or
    trickling answer costs before the SDK parses it: the socket timeout alone would let a
    server that sends a byte a second hold a worker thread for ever. A declared length above
    the cap fails at once; otherwise each read returns what has arrived (``read1``) with the
    socket's timeout cut to what is left of the deadline, so the call ends about on time.
    urllib3's own errors (a body cut short, a stalled read, bad gzip) are raised here, where
    requests would have wrapped them, so the query fails rather than the caller's loop.
    """

    def hook(response: requests.Response, *args: Any, **kwargs: Any) -> None:
        deadline = time.monotonic() + timeout_s
        declared = response.headers.get("Content-Length", "")
        if declared.isdigit() and int(declared) > max_bytes:
            response.close()
            raise _ResponseTooLarge(
                f"answer larger than {max_bytes} bytes (Content-Length is {declared}); "
                "nothing of it is used",
                response=response,
            )
        raw = response.raw
        chunks: list[bytes] = []
        size = 0
        try:
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    response.close()
                    raise _ResponseTooLarge(
                        f"answer still arriving after {timeout_s:g}s; nothing of it is used",
                        response=response,
                    )
                _set_read_timeout(raw, left)
                chunk = raw.read1(_READ_BYTES, decode_content=True)
                if not chunk:
                    break
                size += len(chunk)
                if size > max_bytes:
                    response.close()
                    raise _ResponseTooLarge(
                        f"answer larger than {max_bytes} bytes; nothing of it is used",
                        response=response,
                    )
                chunks.append(chunk)
        except urllib3.exceptions.ReadTimeoutError:
            response.close()
            raise _BodyFailed(
                f"answer stalled: not read whole within {timeout_s:g}s; nothing of it is used",
                response=response,
            ) from None
        except urllib3.exceptions.HTTPError as exc:
            response.close()
            raise _BodyFailed(
                f"answer broke off while it was read ({type(exc).__name__}: {_first_line(exc)}); "
                "nothing of it is used",
                response=response,
            ) from None
        # What requests would have read, so the SDK finds the body in place.
        response._content = b"".join(chunks)
        response._content_consumed = True

    return hook


def _set_read_timeout(raw: Any, seconds: float) -> None:
    """Bound the next socket read to ``seconds`` (urllib3 sets it anew for the next request)."""
    sock = getattr(getattr(raw, "connection", None), "sock", None)
    if sock is not None:
        sock.settimeout(max(0.01, seconds))


@dataclass(frozen=True, slots=True)
class PromSample:
    """One value of one series with the timestamp Prometheus returned (seconds)."""

    metric: Mapping[str, str]
    value: float
    timestamp: float


class PrometheusQueryClient:
    """Instant queries against one Prometheus server.

    The SDK is blocking, so each call runs in a worker thread; the HTTP timeout is set on the
    request itself so a timed-out thread does not linger, and ``asyncio.timeout`` bounds the
    wait. Retries are off: the caller polls again on its next tick. Redirects are refused, so
    ``headers`` and credentials in ``url`` (sent as basic authentication, and left out of
    ``url`` and every error message) only ever go to that server. With ``max_response_bytes``
    an answer larger than that, or still arriving after the timeout, fails its query.
    """

    def __init__(
        self,
        url: str,
        *,
        timeout_s: float = 10.0,
        headers: Mapping[str, str] | None = None,
        max_response_bytes: int | None = None,
    ) -> None:
        self.url, creds = split_userinfo(url.rstrip("/"))
        self._timeout_s = timeout_s
        sent = dict(headers or {})
        if creds is not None:
            sent["Authorization"] = creds.authorization()
        session = requests.Session()
        session.hooks["response"].append(_refuse_redirects)
        if max_response_bytes is not None:
            session.hooks["response"].append(_capped_body(max_response_bytes, timeout_s))
        self._connect = PrometheusConnect(
            url=self.url,
            headers=sent,
            session=session,
            retry=Retry(total=0, raise_on_status=False),
            timeout=timeout_s,  # type: ignore[arg-type]  # requests takes float s; the hint says int
        )

    async def instant_query(
        self, promql: str, at: float | None = None, *, keep_nan: bool = False
    ) -> list[PromSample]:
        """Evaluate ``promql`` at ``at`` (default: now); return every sample of every series.

        Vector results give one sample per series at the evaluation time; a range selector
        (``metric[1m]``) gives the raw samples with the timestamps they were scraped at.
        NaN values are dropped unless ``keep_nan``, for a caller that counts them itself.
        """
        params = {} if at is None else {"time": f"{at:.3f}"}
        try:
            async with asyncio.timeout(self._timeout_s + 1.0):
                raw = await asyncio.to_thread(self._connect.custom_query, promql, params)
        except TimeoutError:
            raise PrometheusQueryError(
                f"{self.url}: query timed out after {self._timeout_s:g}s"
            ) from None
        except PrometheusApiClientException as exc:
            raise PrometheusQueryError(f"{self.url}: {_first_line(exc)}") from None
        except _BodyFailed as exc:
            raise PrometheusQueryError(f"{self.url}: query {promql[:200]!r}: {exc}") from None
        except requests.RequestException as exc:
            raise PrometheusQueryError(f"{self.url}: {_describe_request_error(exc)}") from None
        except (ValueError, KeyError, TypeError) as exc:
            raise PrometheusQueryError(f"{self.url}: malformed response ({exc})") from None
        try:
            return _to_samples(raw, keep_nan=keep_nan)
        except PrometheusQueryError as exc:
            raise PrometheusQueryError(f"{self.url}: {exc}") from None

    async def close(self) -> None:
        """Close the underlying HTTP session."""
        session = getattr(self._connect, "_session", None)
        if session is not None:
            await asyncio.to_thread(session.close)


def _to_samples(raw: Any, *, keep_nan: bool = False) -> list[PromSample]:
    """Flatten a vector or matrix result into samples (NaN only with ``keep_nan``)."""
    if not isinstance(raw, list):
        raise PrometheusQueryError(f"unexpected result type {type(raw).__name__}")
    samples: list[PromSample] = []
    try:
        for series in raw:
            metric = {str(k): str(v) for k, v in series.get("metric", {}).items()}
            points = series.get("values") or ([series["value"]] if "value" in series else [])
            for ts, text in points:
                value = float(text)
                # Prometheus returns "NaN" for stale or undefined values; they carry no data.
                if math.isnan(value) and not keep_nan:
                    continue
                samples.append(PromSample(metric=metric, value=value, timestamp=float(ts)))
    except (AttributeError, TypeError, ValueError, KeyError) as exc:
        # Not the shape Prometheus answers in: nothing of the answer is used.
        raise PrometheusQueryError(
            f"malformed result ({type(exc).__name__}: {_first_line(exc)})"
        ) from None
    return samples


def _first_line(exc: BaseException) -> str:
    return (str(exc) or type(exc).__name__).splitlines()[0][:300]


def _describe_request_error(exc: requests.RequestException) -> str:
    if isinstance(exc, _RedirectRefused | _ResponseTooLarge | _BodyFailed):
        return str(exc)
    if isinstance(exc, requests.exceptions.JSONDecodeError):
        # A proxy's error page or a truncated answer, served as 200.
        return f"malformed response (not JSON: {_first_line(exc)})"
    if isinstance(exc, requests.ConnectionError):
        return "connection failed (is Prometheus running?)"
    if isinstance(exc, requests.Timeout):
        return "request timed out"
    return f"{type(exc).__name__}: {_first_line(exc)}"
