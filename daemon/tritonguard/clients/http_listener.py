"""A small aiohttp HTTP listener: routes of plain request/reply handlers; no aiohttp types leak."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field

from aiohttp import web


@dataclass(frozen=True, slots=True)
class HttpRequest:
    """What a handler sees of a request."""

    method: str
    path: str
    body: bytes
    headers: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class HttpReply:
    """What a handler answers."""

    status: int
    body: bytes
    content_type: str = "application/json"


Handler = Callable[[HttpRequest], Awaitable[HttpReply]]


class HttpListener:
    """Serve ``routes`` ({(method, path): handler}) on ``host:port``; port 0 picks a free one."""

    def __init__(
        self,
        host: str,
        port: int,
        routes: Mapping[tuple[str, str], Handler],
        *,
        max_body_bytes: int = 1024 * 1024,
    ) -> None:
        self.host = host
        self.port = port
        self._routes = dict(routes)
        self._max_body_bytes = max_body_bytes
        self._runner: web.AppRunner | None = None

    def _wrap(self, handler: Handler) -> Callable[[web.Request], Awaitable[web.Response]]:
        async def serve(request: web.Request) -> web.Response:
            try:
                body = await request.read()
            except web.HTTPRequestEntityTooLarge:
                return web.json_response({"error": "request body too large"}, status=413)
            reply = await handler(
                HttpRequest(request.method, request.path, body, dict(request.headers))
            )
            # content_type may carry parameters (version=0.0.4); set the raw header.
            return web.Response(
                status=reply.status, body=reply.body, headers={"Content-Type": reply.content_type}
            )

        return serve

    async def start(self) -> None:
        """Bind and serve; afterwards ``port`` is the bound port."""
        app = web.Application(client_max_size=self._max_body_bytes)
        for (method, path), handler in self._routes.items():
            app.router.add_route(method, path, self._wrap(handler))
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False)
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
