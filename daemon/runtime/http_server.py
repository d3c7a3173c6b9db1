"""The daemon's HTTP endpoint: health, readiness, its own metrics, incidents, Alertmanager hook."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from daemon.logs import get_logger
from daemon.runtime.alertmanager_webhook import Alert, WebhookError, parse_webhook

Readiness = Callable[[], tuple[bool, dict[str, Any]]]
IncidentsView = Callable[[], list[dict[str, Any]]]
AlertsCallback = Callable[[list[Alert]], Awaitable[None]]

# Alertmanager batches alerts per group; a megabyte is thousands of alerts.
MAX_BODY_BYTES = 1024 * 1024


class HttpServer:
    """Serve ``/healthz``, ``/readyz``, ``/metrics``, ``/api/incidents``, ``/api/alertmanager``.

    ``/healthz`` answers while the event loop runs (a wedged loop fails it); ``/readyz``
    reports the ``readiness`` callback; ``/metrics`` renders the injected registry only.
    """

    def __init__(
        self,
        *,
        host: str,
        port: int,
        registry: CollectorRegistry,
        readiness: Readiness,
        incidents: IncidentsView,
        on_alerts: AlertsCallback | None = None,
    ) -> None:
        self.host = host
        self.port = port
        self._registry = registry
        self._readiness = readiness
        self._incidents = incidents
        self._on_alerts = on_alerts
        self._runner: web.AppRunner | None = None
        self._log = get_logger("tritonguard.http")

    def build_app(self) -> web.Application:
        """Return the aiohttp application with every route."""
        app = web.Application(client_max_size=MAX_BODY_BYTES)
        app.router.add_get("/healthz", self._healthz)
        app.router.add_get("/readyz", self._readyz)
        app.router.add_get("/metrics", self._metrics)
        app.router.add_get("/api/incidents", self._api_incidents)
        app.router.add_post("/api/alertmanager", self._alertmanager)
        return app

    async def start(self) -> None:
        """Bind and serve; ``port`` 0 picks a free port, readable afterwards from ``port``."""
        self._runner = web.AppRunner(self.build_app(), access_log=None, handle_signals=False)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port)
        await site.start()
        addresses = self._runner.addresses
        if addresses:
            self.port = int(addresses[0][1])
        self._log.info("http server listening", host=self.host, port=self.port)

    async def stop(self) -> None:
        """Stop serving and release the port."""
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def serve_forever(self) -> None:
        """Start, then serve until cancelled (the supervisor's task body)."""
        await self.start()
        try:
            await asyncio.Event().wait()
        finally:
            await self.stop()

    async def _healthz(self, _: web.Request) -> web.Response:
        return web.json_response({"status": "ok"})

    async def _readyz(self, _: web.Request) -> web.Response:
        ready, detail = self._readiness()
        body = {"status": "ready" if ready else "not ready", **detail}
        return web.json_response(body, status=200 if ready else 503, dumps=_dumps)

    async def _metrics(self, _: web.Request) -> web.Response:
        body = generate_latest(self._registry)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def _api_incidents(self, _: web.Request) -> web.Response:
        return web.json_response({"incidents": self._incidents()}, dumps=_dumps)

    async def _alertmanager(self, request: web.Request) -> web.Response:
        try:
            payload = await request.json()
        except (json.JSONDecodeError, UnicodeDecodeError):
            return _bad_request("body is not JSON")
        try:
            alerts = parse_webhook(payload)
        except WebhookError as exc:
            return _bad_request(str(exc))
        if self._on_alerts is not None:
            await self._on_alerts(alerts)
        return web.json_response({"received": len(alerts)})


def _bad_request(reason: str) -> web.Response:
    return web.json_response({"error": reason}, status=400)


def _dumps(value: Any) -> str:
    return json.dumps(value, default=str)
