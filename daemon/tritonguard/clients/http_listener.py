"""A small aiohttp HTTP listener: routes of plain request/reply handlers; no aiohttp types leak."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field

from aiohttp import web

# After a reply sent before the whole body was read (401, 404, 408, 413) aiohttp keeps reading
# and discarding the rest for this long, so a client still sending can read the reply instead
# of a reset. Short, because a client trickling its body would otherwise keep the socket.
LINGER_S = 1.0


@dataclass(frozen=True, slots=True)
class HttpRequest:
    """What a handler sees of a request; header names are lower-case."""

    method: str
    path: str
    body: bytes
    headers: Mapping[str, str] = field(default_factory=dict)
    remote: str = ""


@dataclass(frozen=True, slots=True)
class HttpReply:
    """What a handler answers."""

    status: int
    body: bytes
    content_type: str = "application/json"
    headers: Mapping[str, str] = field(default_factory=dict)


Handler = Callable[[HttpRequest], Awaitable[HttpReply]]
# Sees the request head (``body`` empty) before the body is read; a reply refuses the request.
Admission = Callable[[HttpRequest], HttpReply | None]


@dataclass(frozen=True, slots=True)
class Route:
    """A handler, and optionally an admission check that runs before its body is read."""

    handler: Handler
    admit: Admission | None = None


class HttpListener:
    """Serve ``routes`` ({(method, path): handler or Route}) on ``host:port``; port 0 picks one.

    A client must send its request head within ``read_timeout_s`` of connecting (or of the
    previous reply on a kept-alive connection), and its body within ``read_timeout_s`` more;
    otherwise the connection is closed. Slow clients hold only their own connection: every
    other one is served meanwhile. Bodies over ``max_body_bytes`` get 413.
    """

    def __init__(
        self,
        host: str,
        port: int,
        routes: Mapping[tuple[str, str], Handler | Route],
        *,
        max_body_bytes: int = 1024 * 1024,
        read_timeout_s: float = 10.0,
    ) -> None:
        self.host = host
        self.port = port
        self._routes = {key: r if isinstance(r, Route) else Route(r) for key, r in routes.items()}
        self._max_body_bytes = max_body_bytes
        self._read_timeout_s = read_timeout_s
        self._runner: web.AppRunner | None = None

    def _wrap(self, route: Route) -> Callable[[web.Request], Awaitable[web.Response]]:
        async def serve(request: web.Request) -> web.Response:
            head = HttpRequest(
                request.method,
                request.path,
                b"",
                _headers(request),
                request.remote or "",
            )
            if route.admit is not None:
                refusal = route.admit(head)
                if refusal is not None:
                    return _response(refusal)
            length = request.content_length
            if length is not None and length > self._max_body_bytes:
                return _too_large()
            try:
                async with asyncio.timeout(self._read_timeout_s):
                    body = await request.read()
            except web.HTTPRequestEntityTooLarge:
                return _too_large()
            except TimeoutError:
                timeout = f"{self._read_timeout_s:g}"
                slow = web.json_response(
                    {"error": f"request body not received within {timeout}s"}, status=408
                )
                slow.force_close()
                return slow
            reply = await route.handler(
                HttpRequest(head.method, head.path, body, head.headers, head.remote)
            )
            return _response(reply)

        return serve

    async def start(self) -> None:
        """Bind and serve; afterwards ``port`` is the bound port."""
        app = web.Application(client_max_size=self._max_body_bytes)
        for (method, path), route in self._routes.items():
            app.router.add_route(method, path, self._wrap(route))
        # aiohttp's keep-alive timer runs from the moment a client connects and from each
        # reply, and closes the connection if no complete request head arrived by then: that
        # is the read timeout for heads, however slowly their bytes trickle in.
        self._runner = web.AppRunner(
            app,
            access_log=None,
            handle_signals=False,
            keepalive_timeout=self._read_timeout_s,
            lingering_time=min(LINGER_S, self._read_timeout_s),
        )
        await self._runner.setup()
        await web.TCPSite(self._runner, self.host, self.port).start()
        addresses = self._runner.addresses
        if addresses:
            self.port = int(addresses[0][1])

    async def stop(self) -> None:
        """Stop serving and release the port."""
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None


def _headers(request: web.Request) -> dict[str, str]:
    out: dict[str, str] = {}
    for name, value in request.headers.items():
        key = name.lower()
        # Repeated fields combine into one, comma-separated, as HTTP defines it.
        out[key] = f"{out[key]}, {value}" if key in out else value
    return out


def _response(reply: HttpReply) -> web.Response:
    # content_type may carry parameters (version=0.0.4); set the raw header.
    headers = {**reply.headers, "Content-Type": reply.content_type}
    return web.Response(status=reply.status, body=reply.body, headers=headers)


def _too_large() -> web.Response:
    return web.json_response({"error": "request body too large"}, status=413)
