"""The capped body read of PrometheusQueryClient against a real HTTP server that misbehaves.

A server in a thread answers each query with headers and then a body of its choosing: cut
short, trickled, declared too large, or not the gzip it claims to be. Every such answer must
fail its query (``PrometheusQueryError``) and never escape it, and a slow one must end about
on the client's timeout rather than hold a worker thread.
"""

from __future__ import annotations

import contextlib
import json
import math
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tritonguard.clients.prometheus_query import (
    PrometheusQueryClient,
    PrometheusQueryError,
    PromSample,
)
from tritonguard.core.feature_rows import FEATURE_FIELDS
from tritonguard.core.rules_export import compile_rules, recorded_features
from tritonguard.core.thresholds import Thresholds
from tritonguard.sources.recorded_features import RecordedFeatureSource

BODY = b'{"status":"success","data":{"resultType":"vector","result":[]}}'
Answer = Callable[[BaseHTTPRequestHandler], None]


@contextmanager
def serving(answer: Answer) -> Iterator[str]:
    """Serve every GET with ``answer`` on a loopback port; yield the server's URL."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            # The client giving up first is what some tests want.
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                answer(self)

        def log_message(self, *args: object) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def _headers(handler: BaseHTTPRequestHandler, length: int, **extra: str) -> None:
    handler.send_response(200)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(length))
    for name, value in extra.items():
        handler.send_header(name.replace("_", "-"), value)
    handler.end_headers()


def cut_short(handler: BaseHTTPRequestHandler) -> None:
    """Declare the whole body, send half of it, close the connection."""
    _headers(handler, len(BODY))
    handler.wfile.write(BODY[: len(BODY) // 2])
    handler.wfile.flush()
    handler.connection.shutdown(socket.SHUT_RDWR)
    handler.close_connection = True


def bad_gzip(handler: BaseHTTPRequestHandler) -> None:
    """Claim a gzip body and send bytes that are not gzip."""
    junk = b"this is not gzip at all" * 10
    _headers(handler, len(junk), Content_Encoding="gzip")
    handler.wfile.write(junk)


def trickle(handler: BaseHTTPRequestHandler) -> None:
    """Declare a modest body and send it a byte every 50 ms (about 3 s for all of it)."""
    _headers(handler, len(BODY))
    for byte in BODY:
        handler.wfile.write(bytes([byte]))
        handler.wfile.flush()
        time.sleep(0.05)


def declared_huge(handler: BaseHTTPRequestHandler) -> None:
    """Declare a body far above the cap, then trickle it."""
    _headers(handler, 100 * 1024 * 1024)
    for _ in range(200):
        handler.wfile.write(b" ")
        handler.wfile.flush()
        time.sleep(0.05)


def whole(handler: BaseHTTPRequestHandler) -> None:
    """Answer properly."""
    _headers(handler, len(BODY))
    handler.wfile.write(BODY)


NAN_BODY = json.dumps(
    {
        "status": "success",
        "data": {
            "resultType": "vector",
            "result": [
                {"metric": {"namespace": "n", "pod": "p", "model": "m"}, "value": [0, "NaN"]},
                {"metric": {"namespace": "n", "pod": "q", "model": "m"}, "value": [0, "2"]},
            ],
        },
    }
).encode()


def nan_answer(handler: BaseHTTPRequestHandler) -> None:
    """Answer one NaN series and one finite one."""
    _headers(handler, len(NAN_BODY))
    handler.wfile.write(NAN_BODY)


def _client(url: str, timeout_s: float = 2.0) -> PrometheusQueryClient:
    return PrometheusQueryClient(url, timeout_s=timeout_s, max_response_bytes=64 * 1024)


@pytest.mark.parametrize(
    ("answer", "said"),
    [(cut_short, "broke off"), (bad_gzip, "broke off")],
    ids=["cut-short", "bad-gzip"],
)
async def test_a_body_cut_short_or_undecodable_fails_the_query_naming_it(
    answer: Answer, said: str
) -> None:
    """A truncated or undecodable body is a PrometheusQueryError naming the query, not urllib3's."""
    with serving(answer) as url:
        client = _client(url)
        try:
            with pytest.raises(PrometheusQueryError, match=said) as raised:
                await client.instant_query("up")
        finally:
            await client.close()
    assert "'up'" in str(raised.value)


async def test_a_trickled_body_fails_within_about_the_timeout() -> None:
    """A body sent a byte every 50 ms fails its query within the timeout plus a second."""
    with serving(trickle) as url:
        client = _client(url, timeout_s=1.0)
        started = time.monotonic()
        try:
            with pytest.raises(PrometheusQueryError, match=r"still arriving|stalled"):
                await client.instant_query("up")
        finally:
            await client.close()
        took = time.monotonic() - started
    assert took < 1.0 + 1.0


async def test_a_declared_length_above_the_cap_fails_at_once() -> None:
    """A Content-Length above the cap fails before any of the body is read."""
    with serving(declared_huge) as url:
        client = _client(url, timeout_s=5.0)
        started = time.monotonic()
        try:
            with pytest.raises(PrometheusQueryError, match="Content-Length is 104857600"):
                await client.instant_query("up")
        finally:
            await client.close()
        took = time.monotonic() - started
    assert took < 1.0


async def test_a_whole_body_within_the_cap_is_read() -> None:
    """A proper answer under the cap still reads (the capped read keeps what it got)."""
    with serving(whole) as url:
        client = _client(url)
        try:
            assert await client.instant_query("up") == []
        finally:
            await client.close()


async def test_a_cut_short_body_fails_the_poll_not_the_source() -> None:
    """A body cut short mid-read gives a failed snapshot; poll() itself does not raise."""
    with serving(cut_short) as url:
        source = RecordedFeatureSource(
            _client(url), features=["request_rate"], thresholds=Thresholds()
        )
        try:
            result = await source.poll()
        finally:
            await source.close()
    assert not result.statuses[0].ok
    assert source.latest is not None and not source.latest.ok
    assert "broke off" in (source.latest.error or "")


class _Broken(PrometheusQueryClient):
    async def instant_query(
        self, promql: str, at: float | None = None, *, keep_nan: bool = False
    ) -> list[PromSample]:
        raise RuntimeError("something no handler names")


async def test_any_other_error_of_a_read_is_a_failed_snapshot() -> None:
    """An exception poll() has no handler for by name still fails the snapshot, not the loop."""
    source = RecordedFeatureSource(
        _Broken("http://127.0.0.1:9"), features=["request_rate"], thresholds=Thresholds()
    )
    result = await source.poll()
    assert not result.statuses[0].ok
    assert source.latest is not None and not source.latest.ok
    assert "something no handler names" in (source.latest.error or "")


async def test_nan_is_dropped_by_default_and_kept_when_asked() -> None:
    """A plain query drops NaN (the raw mode's behaviour); ``keep_nan`` returns it as NaN."""
    with serving(nan_answer) as url:
        client = _client(url)
        try:
            plain = await client.instant_query("x")
            kept = await client.instant_query("x", keep_nan=True)
        finally:
            await client.close()
    assert [s.value for s in plain] == [2.0]
    assert len(kept) == 2 and math.isnan(kept[0].value) and kept[1].value == 2.0


async def test_a_nan_feature_is_counted_as_not_finite_in_the_snapshot() -> None:
    """The features source keeps NaN so the snapshot counts it as not finite, as documented."""
    with serving(nan_answer) as url:
        source = RecordedFeatureSource(
            _client(url), features=["request_rate"], thresholds=Thresholds()
        )
        try:
            await source.poll()
        finally:
            await source.close()
    snapshot = source.latest
    assert snapshot is not None and snapshot.ok
    # Both queries (request_rate, cause_confidence) answer one NaN series each; the
    # confidence's finite series has no cause label.
    assert snapshot.problems() == {"not_finite": 2, "unlabelled": 1}
    assert snapshot.fresh(("n", "q", "m")) is not None
    assert ("n", "p", "m") not in snapshot.features


def test_a_poll_queries_only_the_features_an_evaluation_reads() -> None:
    """FeatureSet's fields, the symptom and the confidences are queried; nothing else is.

    The rules record their intermediate steps too; none of those is read, so none is sent.
    """
    recorded = recorded_features(compile_rules(Thresholds(), 15.0))
    source = RecordedFeatureSource(
        _client("http://127.0.0.1:9"), features=recorded, thresholds=Thresholds()
    )
    assert set(source.features) <= FEATURE_FIELDS | {"symptom", "cause_confidence"}
    assert set(recorded) & FEATURE_FIELDS <= set(source.features)
    assert {"symptom", "cause_confidence"} <= set(source.features)
    assert "pod_seen" not in source.features and len(source.features) == 44
