"""A `/metrics` endpoint on a free loopback port, serving whatever exposition a lab part renders."""

from __future__ import annotations

from collections.abc import Callable

from aiohttp import web

from tritonguard.lab.triton_server import free_port


async def serve_metrics(render: Callable[[], str]) -> tuple[web.AppRunner, int]:
    """Serve ``render()`` at ``/metrics`` on 127.0.0.1; return the runner (to clean up) and port."""

    async def handle(_: web.Request) -> web.Response:
        return web.Response(text=render(), content_type="text/plain")

    app = web.Application()
    app.router.add_get("/metrics", handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    return runner, port
