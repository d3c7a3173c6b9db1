"""Real HTTP servers that misbehave on demand: a metrics target with faults, and a fault proxy.

``FaultyTarget`` is a Triton-like ``/metrics`` endpoint whose ``mode`` a test switches while the
daemon scrapes it: healthy, down (nothing listens), slow, garbage, truncated, huge or flapping.
``FaultProxy`` sits in front of a real server (Triton, the fake Kubernetes API) and forwards
every request, except those a rule tells it to answer itself, to answer late, or to cut off.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import socket
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import aiohttp
from aiohttp import web

TargetMode = Literal[
    "ok", "down", "slow", "garbage", "truncated", "unframed_cut", "huge", "flapping"
]

# What a misconfigured ingress or a crashed sidecar serves where the metrics should be.
GARBAGE = (
    "<html><head><title>502 Bad Gateway</title></head>"
    "<body><center><h1>502 Bad Gateway</h1></center><hr><center>nginx</center></body></html>\n"
)
# Declared by the "huge" mode: past the scraper's 64 MiB body cap.
HUGE_BYTES = 100 * 1024 * 1024


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class FaultyTarget:
    """A ``/metrics`` endpoint on a fixed loopback port, serving ``render()`` or a fault.

    Modes: ``ok`` serves the body with its Content-Length; ``down`` closes the listener
    (connection refused); ``slow`` answers after ``slow_s``; ``garbage`` is an HTML error page
    with status 200; ``truncated`` declares the whole length and hangs up halfway;
    ``unframed_cut`` sends the body without any length or chunking and hangs up in the middle
    of a line (HTTP lets a body end at the connection's close); ``huge`` declares 100 MiB and
    trickles; ``flapping`` alternates a whole answer and a 503, request by request.
    """

    render: Callable[[], str]
    mode: TargetMode = "ok"
    slow_s: float = 3.0
    hits: int = 0
    served: int = 0
    port: int = 0
    _runner: web.AppRunner | None = field(default=None, repr=False)

    @property
    def url(self) -> str:
        """The metrics URL."""
        return f"http://127.0.0.1:{self.port}/metrics"

    async def start(self) -> FaultyTarget:
        """Listen on a free port (kept for later ``set_mode`` calls)."""
        self.port = self.port or _free_port()
        if self.mode != "down":
            await self._open()
        return self

    async def _open(self) -> None:
        app = web.Application()
        app.router.add_get("/metrics", self._handle)
        # Handlers stop when the scraper hangs up, so slow and trickling answers end with it.
        self._runner = web.AppRunner(app, access_log=None, handler_cancellation=True)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", self.port, reuse_address=True)
        await site.start()

    async def _close(self) -> None:
        # The whole runner goes, kept-alive connections included: down means down.
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def set_mode(self, mode: TargetMode) -> None:
        """Switch behaviour; ``down`` stops listening, leaving it listens again."""
        if mode == "down":
            await self._close()
        elif self._runner is None:
            await self._open()
        self.mode = mode

    async def stop(self) -> None:
        """Stop serving."""
        await self._close()

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        self.hits += 1
        # Flapping: a whole answer on odd requests, the 503 of a load balancer whose backend
        # is gone on even ones. (A dropped connection would not do: the client retries a
        # request whose kept-alive connection closed under it.)
        mode: str = self.mode
        if mode == "flapping":
            if not self.hits % 2:
                return web.Response(status=503, text="no healthy upstream\n")
            mode = "ok"
        if mode == "slow":
            await asyncio.sleep(self.slow_s)
        if mode in ("ok", "slow"):
            self.served += 1
            return web.Response(text=self.render(), content_type="text/plain", charset="utf-8")
        if mode == "garbage":
            return web.Response(text=GARBAGE, content_type="text/html")
        body = self.render().encode()
        if mode == "truncated":
            return await _hang_up_halfway(request, body)
        if mode == "unframed_cut":
            return await _unframed_cut(request, body)
        return await _trickle_huge(request)


def _abort(request: web.Request) -> None:
    transport = request.transport
    if transport is not None:
        transport.abort()


async def _hang_up_halfway(request: web.Request, body: bytes) -> web.StreamResponse:
    response = web.StreamResponse(headers={"Content-Type": "text/plain; version=0.0.4"})
    response.content_length = len(body)
    await response.prepare(request)
    await response.write(body[: len(body) // 2])
    await asyncio.sleep(0.02)
    _abort(request)
    return response


async def _unframed_cut(request: web.Request, body: bytes) -> web.StreamResponse:
    # aiohttp frames every HTTP/1.1 answer; a server that simply closes to end its body
    # (legal HTTP) is written by hand on the connection. The cut lands after the first digit
    # of the last long number, where the value reads as a far smaller one.
    transport = request.transport
    assert transport is not None
    numbers = list(re.finditer(rb" ([0-9]{3,})\n", body))
    cut = numbers[-1].start(1) + 1 if numbers else len(body) // 2
    head = (
        b"HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nConnection: close\r\n\r\n"
    )
    transport.write(head + body[:cut])
    await asyncio.sleep(0.02)
    transport.close()
    raise asyncio.CancelledError


async def _trickle_huge(request: web.Request) -> web.StreamResponse:
    response = web.StreamResponse(headers={"Content-Type": "text/plain; version=0.0.4"})
    response.content_length = HUGE_BYTES
    await response.prepare(request)
    line = b'nv_inference_count{model="filler",version="1"} 1\n' * 1000
    for _ in range(HUGE_BYTES // len(line)):
        await response.write(line)
        await asyncio.sleep(0.01)
    return response


# ---- the proxy ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Answer:
    """Answer the request here, without forwarding it: the server behind never sees it."""

    status: int
    body: Any
    headers: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class HoldAnswer:
    """Forward the request, then keep its answer for ``seconds``: the server behind acted."""

    seconds: float


@dataclass(frozen=True)
class ForwardLate:
    """Hold the request ``seconds``, then forward it even if its client has given up.

    A request stuck on its way (a congested link, a slow load balancer) that still reaches
    the server after the client timed out and moved on.
    """

    seconds: float


@dataclass(frozen=True)
class CutStream:
    """Forward the request and stream ``lines`` lines of its answer, then drop the connection."""

    lines: int


Fault = Answer | HoldAnswer | ForwardLate | CutStream


@dataclass
class Rule:
    """Apply ``fault`` to the next ``times`` requests whose method and path match.

    ``query`` names parameters the request must carry (a watch is ``?watch=...``);
    ``values`` pairs a parameter with a pattern its value must match whole (a PromQL
    ``query=ALERTS...``).
    """

    method: str
    path: str
    fault: Fault
    times: int = 1
    query: tuple[str, ...] = ()
    values: tuple[tuple[str, str], ...] = ()

    def matches(self, request: web.Request) -> bool:
        """Whether this rule is armed for ``request``."""
        return (
            self.times > 0
            and self.method in ("*", request.method)
            and re.fullmatch(self.path, request.path) is not None
            and all(name in request.query for name in self.query)
            and all(
                name in request.query and re.fullmatch(pattern, request.query[name]) is not None
                for name, pattern in self.values
            )
        )


@dataclass(frozen=True)
class Seen:
    """One request the proxy handled and what it did with it."""

    method: str
    path: str
    fault: str


# Not passed on: the hop's own framing. Content-Encoding is: bodies go through as they came.
_HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "transfer-encoding",
        "content-length",
        "host",
        "upgrade",
    }
)


class FaultProxy:
    """A reverse proxy on loopback in front of ``upstream`` that injects faults by rule.

    Without a matching rule a request goes through unchanged (streamed, so watches work).
    """

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream.rstrip("/")
        self.rules: list[Rule] = []
        self.seen: list[Seen] = []
        self.port = 0
        self._runner: web.AppRunner | None = None
        self._session: aiohttp.ClientSession | None = None
        self._late_tasks: set[asyncio.Task[tuple[int, bytes]]] = set()

    @property
    def url(self) -> str:
        """The proxy's base URL."""
        return f"http://127.0.0.1:{self.port}"

    def add(
        self,
        method: str,
        path: str,
        fault: Fault,
        times: int = 1,
        query: tuple[str, ...] = (),
        *,
        values: tuple[tuple[str, str], ...] = (),
    ) -> Rule:
        """Arm a rule and return it (its ``times`` counts down as it fires)."""
        rule = Rule(method, path, fault, times, query, values)
        self.rules.append(rule)
        return rule

    def faulted(self, kind: str | None = None) -> list[Seen]:
        """Return the requests a rule acted on (of one fault kind, if given)."""
        return [s for s in self.seen if s.fault != "forwarded" and kind in (None, s.fault)]

    async def start(self) -> FaultProxy:
        """Listen on a free port."""
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        # A connection per request: the proxy must not tie requests together that its
        # client sent apart (Triton, for one, serves each connection on one thread).
        self._session = aiohttp.ClientSession(
            timeout=aiohttp.ClientTimeout(total=None, sock_read=None),
            auto_decompress=False,
            connector=aiohttp.TCPConnector(force_close=True),
        )
        self._runner = web.AppRunner(app, access_log=None, handler_cancellation=True)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = int(self._runner.addresses[0][1])
        return self

    async def stop(self) -> None:
        """Stop serving, deliver what is late, and close the upstream session."""
        await self.settle()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def __aenter__(self) -> FaultProxy:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    def _rule_for(self, request: web.Request) -> Rule | None:
        for rule in self.rules:
            if rule.matches(request):
                rule.times -= 1
                return rule
        return None

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        rule = self._rule_for(request)
        fault = rule.fault if rule is not None else None
        kind = type(fault).__name__ if fault is not None else "forwarded"
        self.seen.append(Seen(request.method, request.path, kind))
        if isinstance(fault, Answer):
            await request.read()
            body = fault.body if isinstance(fault.body, str) else json.dumps(fault.body)
            return web.Response(
                status=fault.status,
                text=body,
                content_type="application/json",
                headers=fault.headers,
            )
        assert self._session is not None
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _HOP_BY_HOP}
        data = await request.read()
        if isinstance(fault, ForwardLate):
            late = asyncio.ensure_future(self._late(request, headers, data, fault.seconds))
            self._late_tasks.add(late)
            late.add_done_callback(self._late_tasks.discard)
            # Shielded: the client hanging up cancels this handler, not the delivery.
            status, delivered = await asyncio.shield(late)
            return web.Response(status=status, body=delivered, content_type="application/json")
        async with self._session.request(
            request.method,
            f"{self.upstream}{request.path_qs}",
            headers=headers,
            data=data or None,
            allow_redirects=False,
        ) as upstream:
            reply_headers = {
                k: v for k, v in upstream.headers.items() if k.lower() not in _HOP_BY_HOP
            }
            if isinstance(fault, CutStream):
                return await self._cut(request, upstream, reply_headers, fault.lines)
            if isinstance(fault, HoldAnswer):
                body_bytes = await upstream.read()
                await asyncio.sleep(fault.seconds)
                return web.Response(status=upstream.status, body=body_bytes, headers=reply_headers)
            response = web.StreamResponse(status=upstream.status, headers=reply_headers)
            await response.prepare(request)
            with contextlib.suppress(ConnectionError):
                async for chunk in upstream.content.iter_any():
                    await response.write(chunk)
                await response.write_eof()
            return response

    async def _late(
        self, request: web.Request, headers: dict[str, str], data: bytes, seconds: float
    ) -> tuple[int, bytes]:
        await asyncio.sleep(seconds)
        assert self._session is not None
        async with self._session.request(
            request.method,
            f"{self.upstream}{request.path_qs}",
            headers=headers,
            data=data or None,
            allow_redirects=False,
        ) as upstream:
            return upstream.status, await upstream.read()

    async def settle(self) -> None:
        """Wait until every late request has been delivered."""
        while self._late_tasks:
            await asyncio.gather(*list(self._late_tasks), return_exceptions=True)

    @staticmethod
    async def _cut(
        request: web.Request,
        upstream: aiohttp.ClientResponse,
        headers: dict[str, str],
        lines: int,
    ) -> web.StreamResponse:
        response = web.StreamResponse(status=upstream.status, headers=headers)
        response.enable_chunked_encoding()
        await response.prepare(request)
        for _ in range(lines):
            line = await upstream.content.readline()
            if not line:
                break
            await response.write(line)
        await asyncio.sleep(0.05)
        _abort(request)
        return response


def kube_status(code: int, reason: str, message: str) -> dict[str, Any]:
    """Return a Kubernetes ``Status`` body as the real API server sends it with an error."""
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }
