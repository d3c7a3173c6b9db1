"""Streaming watches: the initial list, events from the change log, 410 Gone and timeouts."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Callable

from aiohttp import web

from tests.fakes.kube.errors import ApiError
from tests.fakes.kube.resources import JsonObj, ResourceType
from tests.fakes.kube.store import Change, Store
from tests.fakes.kube.tables import table, wants_table


def event_type(change: Change, match: Callable[[JsonObj], bool]) -> str | None:
    """Return the event a watcher selecting ``match`` sees for ``change``, or None."""
    now_match = match(change.obj)
    was_match = change.old is not None and match(change.old)
    if change.type == "DELETED":
        return "DELETED" if was_match else None
    if now_match:
        return "ADDED" if change.type == "ADDED" or not was_match else "MODIFIED"
    # The object left the selection: watchers see it go away.
    return "DELETED" if was_match else None


async def serve_watch(
    request: web.Request,
    store: Store,
    rtype: ResourceType,
    match: Callable[[JsonObj], bool],
    opened: Callable[[web.Request], None],
) -> web.StreamResponse:
    """Stream watch events of ``rtype`` until ``timeoutSeconds``, the client or the server ends.

    ``opened`` is called once the response has started, so the request can be logged then.
    """
    table_of = wants_table(request.headers.get("Accept", ""))
    include = request.query.get("includeObject", "Metadata")
    since = request.query.get("resourceVersion", "")
    try:
        timeout = float(request.query.get("timeoutSeconds", "1800"))
    except ValueError as exc:
        raise ApiError(400, "BadRequest", "timeoutSeconds must be an integer") from exc
    deadline = time.monotonic() + timeout
    resp = web.StreamResponse(
        status=200, headers={"Content-Type": "application/json", "Cache-Control": "no-cache"}
    )
    resp.enable_chunked_encoding()
    await resp.prepare(request)
    opened(request)

    async def send(kind: str, obj: JsonObj) -> None:
        if table_of and kind != "ERROR":
            obj = table(rtype, [obj], obj["metadata"]["resourceVersion"], include)
        await resp.write(json.dumps({"type": kind, "object": obj}).encode() + b"\n")

    with store.lock:
        if since in ("", "0"):
            initial = store.select(rtype, match)
            last = store.rv
        elif not since.isdigit():
            raise ApiError(400, "BadRequest", f"invalid resource version {since!r}")
        elif int(since) < store.oldest_rv:
            initial, last = [], -1
        else:
            initial, last = [], int(since)
    if last < 0:
        gone = ApiError(410, "Expired", f"too old resource version: {since} ({store.oldest_rv})")
        await send("ERROR", gone.status())
        return resp
    try:
        for obj in initial:
            await send("ADDED", obj)
        while not store.closing:
            changed = store.changed
            for change in store.changes_since(rtype.key, last):
                last = change.rv
                kind = event_type(change, match)
                if kind is not None:
                    await send(kind, change.obj)
            left = deadline - time.monotonic()
            if left <= 0 or changed is None:
                break
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(changed.wait(), timeout=left)
    except ConnectionError:
        return resp  # the watcher went away (kubectl killed, client closed)
    with contextlib.suppress(ConnectionError, RuntimeError):
        await resp.write_eof()
    return resp
