"""The daemon's HTTP endpoint: health, readiness, its own metrics, incidents, Alertmanager hook."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from tritonguard.clients.http_listener import HttpListener, HttpReply, HttpRequest, Route
from tritonguard.logs import get_logger
from tritonguard.runtime.alertmanager_webhook import (
    WEBHOOK_PATH,
    Alert,
    WebhookError,
    parse_webhook_body,
)
from tritonguard.runtime.api_auth import BearerToken, Refusal
from tritonguard.runtime.leader_forwarding import FORWARDED_BY_HEADER, LeaderForwarder, answer
from tritonguard.runtime.log_throttle import LogThrottle

Readiness = Callable[[], tuple[bool, dict[str, Any]]]
IncidentsView = Callable[[], list[dict[str, Any]]]
AlertsCallback = Callable[[list[Alert]], Awaitable[None]]
# (endpoint, reason) of each request refused for its credentials.
RefusedCallback = Callable[[str, Refusal], None]

# The same defaults as settings.ApiSettings; the daemon passes the configured values.
MAX_BODY_BYTES = 1024 * 1024
READ_TIMEOUT_S = 10.0
MAX_JSON_DEPTH = 32
# A client retrying a wrong token every few milliseconds gets one log line per reason this often.
REFUSAL_LOG_INTERVAL_S = 10.0

_WWW_AUTHENTICATE = {
    "missing": 'Bearer realm="tritonguard"',
    "not_bearer": 'Bearer realm="tritonguard", error="invalid_request"',
    "wrong_token": 'Bearer realm="tritonguard", error="invalid_token"',
}


class HttpServer:
    """Serve ``/healthz``, ``/readyz``, ``/metrics``, ``/api/incidents[/history]``, the webhook.

    ``/healthz`` answers while the event loop runs (a wedged loop fails it); ``/readyz``
    reports the ``readiness`` callback; ``/metrics`` renders the injected registry only.

    ``/api/alertmanager`` changes what playbooks may do, so it needs ``Authorization: Bearer
    <api_token>``: without a token configured it is off (404); a missing or wrong token gets
    401 before the body is read, is logged (never the token) and reported to ``on_refused``.

    With a ``forwarder`` (replicas electing a leader) an accepted post is kept here too (this
    replica may lead soon) and, unless this replica leads, forwarded to the leader, whose
    answer it passes on: a 5xx when no leader kept it, so Alertmanager retries. A post another
    replica forwarded is kept, never forwarded again, and answered 503 unless this one leads.
    """

    def __init__(
        self,
        *,
        host: str,
        port: int,
        registry: CollectorRegistry,
        readiness: Readiness,
        incidents: IncidentsView,
        history: IncidentsView | None = None,
        on_alerts: AlertsCallback | None = None,
        api_token: str | None = None,
        on_refused: RefusedCallback | None = None,
        forwarder: LeaderForwarder | None = None,
        max_body_bytes: int = MAX_BODY_BYTES,
        read_timeout_s: float = READ_TIMEOUT_S,
        max_json_depth: int = MAX_JSON_DEPTH,
    ) -> None:
        self._registry = registry
        self._readiness = readiness
        self._incidents = incidents
        self._history = history
        self._on_alerts = on_alerts
        self._token = BearerToken(api_token) if api_token else None
        self._on_refused = on_refused
        self._forwarder = forwarder
        self._max_json_depth = max_json_depth
        self._refusal_log = LogThrottle(REFUSAL_LOG_INTERVAL_S)
        self._listener = HttpListener(
            host,
            port,
            {
                ("GET", "/healthz"): self._healthz,
                ("GET", "/readyz"): self._readyz,
                ("GET", "/metrics"): self._metrics,
                ("GET", "/api/incidents"): self._api_incidents,
                ("GET", "/api/incidents/history"): self._api_history,
                ("POST", WEBHOOK_PATH): Route(self._alertmanager, admit=self._admit),
            },
            max_body_bytes=max_body_bytes,
            read_timeout_s=read_timeout_s,
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

    @property
    def webhook_enabled(self) -> bool:
        """Return True when ``/api/alertmanager`` accepts authenticated requests."""
        return self._token is not None

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

    def _admit(self, request: HttpRequest) -> HttpReply | None:
        if self._token is None:
            return _json(
                404,
                {
                    "error": "the Alertmanager webhook is off; set api.token_file (or "
                    "TRITONGUARD_API__TOKEN) on the daemon to turn it on"
                },
            )
        reason = self._token.refusal(request.headers.get("authorization"))
        if reason is None:
            return None
        if self._on_refused is not None:
            self._on_refused(request.path, reason)
        refused = self._refusal_log.tally(reason)
        if refused is not None:
            self._log.warning(
                "request refused: missing or wrong bearer token",
                endpoint=f"{request.method} {request.path}",
                reason=reason,
                remote=request.remote,
                refused_since_last_line=refused,
            )
        return HttpReply(
            401,
            json.dumps({"error": f"unauthorized ({reason})"}).encode("utf-8"),
            headers={"WWW-Authenticate": _WWW_AUTHENTICATE[reason]},
        )

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

    async def _api_history(self, _: HttpRequest) -> HttpReply:
        # Past incidents, resolved ones included, newest first: the ids `tritonguard test
        # --from-incident` takes. Without an audit trail (no playbooks) there is none.
        return _json(200, {"incidents": self._history() if self._history is not None else []})

    async def _alertmanager(self, request: HttpRequest) -> HttpReply:
        try:
            alerts = parse_webhook_body(request.body, max_depth=self._max_json_depth)
        except WebhookError as exc:
            return _json(400, {"error": str(exc)})
        if self._on_alerts is not None:
            await self._on_alerts(alerts)
        forwarder = self._forwarder
        if forwarder is None:
            return _json(200, {"received": len(alerts)})
        forwarded_by = request.headers.get(FORWARDED_BY_HEADER.lower())
        if forwarded_by is not None:
            # One hop at most: whoever gets a forwarded post keeps it or says it did not.
            if forwarder.keeps_forwarded():
                return _json(200, {"received": len(alerts)})
            return _json(
                503,
                {
                    "error": f"replica {forwarder.identity} does not hold the leader lease "
                    f"{forwarder.own_lease}; a post forwarded by {forwarded_by} is not "
                    "forwarded again",
                    "received": len(alerts),
                },
            )
        deliveries = await forwarder.forward(request.body)
        if not deliveries:
            return _json(200, {"received": len(alerts)})
        status, body = answer(len(alerts), deliveries)
        return _json(status, body)


def _json(status: int, value: Any) -> HttpReply:
    return HttpReply(status, json.dumps(value, default=str).encode("utf-8"))
