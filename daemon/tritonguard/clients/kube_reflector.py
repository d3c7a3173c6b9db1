"""The list-then-watch loop that follows one kind of Kubernetes object, as client-go's reflector.

One driver serves every kind ``KubernetesClient`` follows (pods, ConfigMaps): list, then watch
from the list's resourceVersion with bookmarks; on 410 Gone list again and tell what differs;
while the API server is away retry with exponential backoff. What differs between kinds (how
to list, watch, parse and name an object, what a watch's ERROR event becomes) is handed in, so
this module imports no SDK and knows no kind.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, Literal, TypeVar

T = TypeVar("T")
Ev = TypeVar("Ev")
E = TypeVar("E", bound=Exception)
ChangeType = Literal["ADDED", "MODIFIED", "DELETED"]
Key = tuple[str, str]

# A watch that ends sooner than this after it was opened, having sent nothing, was closed at
# once (a server shutting down), not by its timeout: the next one waits a backoff first.
_QUICK_CLOSE_S = 1.0


@dataclass(frozen=True)
class ObjectKind(Generic[T, Ev, E]):
    """How to follow one kind of object: the calls, and what its objects and errors are.

    ``parse`` returns None for an object that cannot be read (having reported it): it is
    skipped. ``tombstone`` is what is remembered of an object, and told as DELETED when a
    relist no longer has it; ``event`` builds what the caller is given (``listed`` when it
    came from a list rather than from a watch in sync). ``watch_error`` turns a watch's
    ERROR event (other than 410 Gone) into the error raised; ``retryable`` says whether one
    of ``errors`` is worth trying again after a backoff, else it is raised.
    """

    list_all: Callable[[], Awaitable[tuple[list[T], str]]]
    watch: Callable[[str, Callable[[], None] | None], AsyncGenerator[Mapping[str, Any], None]]
    parse: Callable[[Mapping[str, Any]], T | None]
    key: Callable[[T], Key]
    version: Callable[[T], str]
    tombstone: Callable[[T], T]
    event: Callable[[ChangeType, T, bool], Ev]
    watch_error: Callable[[Mapping[str, Any]], E]
    errors: type[E]
    retryable: Callable[[E], bool]


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


async def reflect(
    kind: ObjectKind[T, Ev, E],
    *,
    resource_version: str | None = None,
    initial_backoff_s: float = 0.5,
    max_backoff_s: float = 30.0,
    on_error: Callable[[E], None] | None = None,
    on_synced: Callable[[], None] | None = None,
) -> AsyncGenerator[Ev, None]:
    """Follow objects of ``kind`` forever: those listed as ADDED, then every change.

    Without ``resource_version`` it lists first; with one it watches from there. Each watch
    resumes from the last resourceVersion seen (bookmarks advance it while idle). 410 Gone
    lists again and tells what differs, so no change is lost. A retryable error goes to
    ``on_error`` and is retried after a backoff doubling up to ``max_backoff_s`` (back to
    ``initial_backoff_s`` at each change told); any other is raised. ``on_synced`` is called
    after each list and, through ``kind.watch``, when a watch request is accepted.
    """
    known: dict[Key, tuple[str, T]] = {}
    rv = resource_version
    backoff = initial_backoff_s
    while True:
        try:
            if rv is None:
                listed, rv = await kind.list_all()
                current = {kind.key(item): item for item in listed}
                for key, item in current.items():
                    before = known.get(key)
                    if before is None:
                        yield kind.event("ADDED", item, True)
                    elif before[0] != kind.version(item):
                        yield kind.event("MODIFIED", item, True)
                for key in sorted(set(known) - set(current)):
                    yield kind.event("DELETED", known[key][1], True)
                known = {k: (kind.version(o), kind.tombstone(o)) for k, o in current.items()}
                if on_synced is not None:
                    on_synced()
            opened = time.monotonic()
            events_seen = 0
            # Closed on leaving (410, an error, the caller stopping) so its reading thread ends.
            async with contextlib.aclosing(kind.watch(rv, on_synced)) as stream:
                async for raw in stream:
                    events_seen += 1
                    change = raw.get("type")
                    obj = _mapping(raw.get("object"))
                    if change == "ERROR":
                        if obj.get("code") == 410:
                            rv = None  # expired: relist and diff
                            break
                        raise kind.watch_error(obj)
                    rv = str(_mapping(obj.get("metadata")).get("resourceVersion") or rv)
                    if change not in ("ADDED", "MODIFIED", "DELETED"):
                        continue  # BOOKMARK: only the resourceVersion matters
                    parsed = kind.parse(obj)
                    if parsed is None:
                        continue
                    if change == "DELETED":
                        known.pop(kind.key(parsed), None)
                    else:
                        known[kind.key(parsed)] = (kind.version(parsed), kind.tombstone(parsed))
                    backoff = initial_backoff_s
                    yield kind.event(change, parsed, False)
            if rv is not None and not events_seen and time.monotonic() - opened < _QUICK_CLOSE_S:
                # A watch closed at once without news (a server shutting down): do not spin.
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, max_backoff_s)
        except kind.errors as err:
            if not kind.retryable(err):
                raise
            if on_error is not None:
                on_error(err)
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, max_backoff_s)
