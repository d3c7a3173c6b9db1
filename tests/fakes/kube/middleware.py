"""Around every request: the request log, injected faults, and errors rendered as Status."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from tests.fakes.kube.errors import ApiError

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

_BODY = web.RequestKey("body", object)
_RECORD = web.RequestKey("record", dict)
_LOGGED = web.RequestKey("logged", bool)


@dataclass(frozen=True)
class RequestRecord:
    """One request the fake served, for assertions in tests."""

    method: str
    path: str
    query: dict[str, str]
    content_type: str
    body: Any
    status: int
    accept: str = ""


@dataclass
class Faults:
    """Injected misbehaviour; every field is read on each request."""

    delay_s: float = 0.0
    fail_next: int = 0
    fail_status: int = 503
    drop_next: int = 0


def _server_error(code: int, request: web.Request | None = None) -> ApiError:
    if code == 403:
        # As RBAC words a refusal; the resource is the URL's, whatever the verb.
        what = request.path.rstrip("/").split("/")[-1] if request is not None else "resource"
        return ApiError(
            code,
            "Forbidden",
            f'{what} is forbidden: User "system:serviceaccount:tritonguard:tritonguard" '
            f"cannot {request.method.lower() if request is not None else 'use'} it",
        )
    if code == 503:
        return ApiError(
            code, "ServiceUnavailable", "the server is currently unable to handle the request"
        )
    return ApiError(
        code,
        "InternalError",
        "an error on the server has prevented the request from succeeding",
    )


def body_of(request: web.Request) -> Any:
    """Return the request's body as parsed JSON (text if it is not JSON, None if empty)."""
    return request[_BODY]


class RequestLog:
    """Appends a :class:`RequestRecord` to ``records`` for each request, applying ``faults``."""

    def __init__(self, records: list[RequestRecord], faults: Faults) -> None:
        self.records = records
        self.faults = faults
        # Requests being handled. A client that gave up (a timeout against a delay) leaves its
        # handler running: aiohttp forgets the connection and never cancels it.
        self.inflight: set[asyncio.Task[Any]] = set()

    async def cancel_inflight(self) -> None:
        """End the handlers still running once the server stopped, as a stopped server would."""
        pending = [t for t in self.inflight if not t.done() and t is not asyncio.current_task()]
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)

    def log_now(self, request: web.Request, status: int) -> None:
        """Log a request before it ends; a watch stays open, so it is logged when it starts."""
        self.records.append(RequestRecord(**request[_RECORD], status=status))
        request[_LOGGED] = True

    @web.middleware
    async def middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        """Parse the body, misbehave as told, run ``handler`` and log what it answered."""
        task = asyncio.current_task()
        if task is not None and task not in self.inflight:
            self.inflight.add(task)
            task.add_done_callback(self.inflight.discard)
        body: Any = None
        if request.can_read_body:
            raw = await request.read()
            try:
                body = json.loads(raw) if raw else None
            except ValueError:
                body = raw.decode(errors="replace")
        record = dict(
            method=request.method,
            path=request.path,
            query=dict(request.query),
            content_type=request.headers.get("Content-Type", ""),
            body=body,
            accept=request.headers.get("Accept", ""),
        )
        faults = self.faults
        if faults.delay_s:
            await asyncio.sleep(faults.delay_s)
        if faults.drop_next > 0:
            faults.drop_next -= 1
            self.records.append(RequestRecord(**record, status=0))
            if request.transport is not None:
                request.transport.abort()
            raise asyncio.CancelledError
        if faults.fail_next > 0:
            faults.fail_next -= 1
            err = _server_error(faults.fail_status, request)
            self.records.append(RequestRecord(**record, status=err.code))
            return web.json_response(err.status(), status=err.code)
        request[_BODY] = body
        request[_RECORD] = record
        try:
            resp = await handler(request)
        except ApiError as err:
            resp = web.json_response(err.status(), status=err.code)
        if not request.get(_LOGGED):
            self.records.append(RequestRecord(**record, status=resp.status))
        return resp
