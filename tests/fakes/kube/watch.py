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


def bookmark(rtype: ResourceType, rv: int) -> JsonObj:
    """Return the object of a BOOKMARK event: only kind, apiVersion and a resourceVersion."""
    return {
        "kind": rtype.kind,
        "apiVersion": rtype.api_version,
        "metadata": {"resourceVersion": str(rv)},
    }


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
        if table_of and kind not in ("ERROR", "BOOKMARK"):
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
    bookmarks = request.query.get("allowWatchBookmarks") in ("true", "1")
    next_bookmark = time.monotonic() + store.bookmark_interval_s
    try:
        for obj in initial:
            await send("ADDED", obj)
        while not store.closing:
            changed = store.changed
            with store.lock:
                scanned = store.rv
            for change in store.changes_since(rtype.key, last):
                last = change.rv
                kind = event_type(change, match)
                if kind is not None:
                    await send(kind, change.obj)
            if bookmarks and time.monotonic() >= next_bookmark:
                # As the real server does: "everything up to here was sent", so an idle
                # watcher can resume from a recent resourceVersion instead of a 410.
                last = max(last, scanned)
                await send("BOOKMARK", bookmark(rtype, last))
                next_bookmark = time.monotonic() + store.bookmark_interval_s
            left = deadline - time.monotonic()
            if left <= 0 or changed is None:
                break
            wait = min(left, next_bookmark - time.monotonic()) if bookmarks else left
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(changed.wait(), timeout=max(0.0, wait))
    except ConnectionError:
        return resp  # the watcher went away (kubectl killed, client closed)
    with contextlib.suppress(ConnectionError, RuntimeError):
        await resp.write_eof()
    return resp
