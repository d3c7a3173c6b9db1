"""The daemon's HTTP endpoint: health, readiness, its own metrics, incidents, Alertmanager hook."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from tritonguard.clients.http_listener import HttpListener, HttpReply, HttpRequest
from tritonguard.logs import get_logger
from tritonguard.runtime.alertmanager_webhook import Alert, WebhookError, parse_webhook

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
        self._registry = registry
        self._readiness = readiness
        self._incidents = incidents
        self._on_alerts = on_alerts
        self._listener = HttpListener(
            host,
            port,
            {
                ("GET", "/healthz"): self._healthz,
                ("GET", "/readyz"): self._readyz,
                ("GET", "/metrics"): self._metrics,
                ("GET", "/api/incidents"): self._api_incidents,
                ("POST", "/api/alertmanager"): self._alertmanager,
            },
            max_body_bytes=MAX_BODY_BYTES,
        )
        self._log = get_logger("tritonguard.http")

    @property
    def host(self) -> str:
        """Return the listen host."""
        return self._listener.host

    @property
    def port(self) -> int:
        """Return the listen port (the bound one once started)."""
        return self._listener.port

    async def start(self) -> None:
        """Bind and serve; ``port`` 0 picks a free port, readable afterwards from ``port``."""
        await self._listener.start()
        self._log.info("http server listening", host=self.host, port=self.port)

    async def stop(self) -> None:
        """Stop serving and release the port."""
        await self._listener.stop()

    async def serve_forever(self) -> None:
        """Start, then serve until cancelled (the supervisor's task body)."""
        await self.start()
        try:
            await asyncio.Event().wait()
        finally:
            await self.stop()

    async def _healthz(self, _: HttpRequest) -> HttpReply:
        return _json(200, {"status": "ok"})

    async def _readyz(self, _: HttpRequest) -> HttpReply:
        ready, detail = self._readiness()
        body = {"status": "ready" if ready else "not ready", **detail}
        return _json(200 if ready else 503, body)

    async def _metrics(self, _: HttpRequest) -> HttpReply:
        return HttpReply(200, generate_latest(self._registry), CONTENT_TYPE_LATEST)

    async def _api_incidents(self, _: HttpRequest) -> HttpReply:
        return _json(200, {"incidents": self._incidents()})

    async def _alertmanager(self, request: HttpRequest) -> HttpReply:
        try:
            payload = json.loads(request.body)
        except (json.JSONDecodeError, UnicodeDecodeError):
            return _json(400, {"error": "body is not JSON"})
        try:
            alerts = parse_webhook(payload)
        except WebhookError as exc:
            return _json(400, {"error": str(exc)})
        if self._on_alerts is not None:
            await self._on_alerts(alerts)
        return _json(200, {"received": len(alerts)})


def _json(status: int, value: Any) -> HttpReply:
    return HttpReply(status, json.dumps(value, default=str).encode("utf-8"))
