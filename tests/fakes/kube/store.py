"""The object store: objects by type, namespace and name, resourceVersions and the change log."""

from __future__ import annotations

import asyncio
import contextlib
import copy
import itertools
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

from tests.fakes.kube.errors import ApiError, already_exists, not_found
from tests.fakes.kube.objects import now_iso
from tests.fakes.kube.resources import NAMESPACES, WORKLOADS, JsonObj, ResourceType
from tests.fakes.kube.validation import validate

Key = tuple[str, str, str]


@dataclass
class Change:
    """One entry of the watch log: what happened to which object at which resourceVersion."""

    rv: int
    key: str
    namespace: str
    type: str
    obj: JsonObj
    old: JsonObj | None = field(default=None)


class Store:
    """Objects keyed by ``(type key, namespace, name)``; every write bumps one cluster-wide rv.

    Callers hold :attr:`lock` around anything that reads and then writes. Each write is logged
    as a :class:`Change` and wakes the watchers waiting on :attr:`changed`.
    """

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.objects: dict[Key, JsonObj] = {}
        self.log: list[Change] = []
        self.watch_log_size = 2000
        # How often a watch that asked for bookmarks gets one (the real server: about a minute).
        self.bookmark_interval_s = 60.0
        self.rv = 1000
        self.oldest_rv = self.rv
        self.changed: asyncio.Event | None = None
        self.closing = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._uid_seq = itertools.count(1)

    # -- reads ------------------------------------------------------------------------------

    def get(self, rtype: ResourceType, namespace: str, name: str) -> JsonObj | None:
        """Return the stored object itself (not a copy), or None."""
        return self.objects.get((rtype.key, namespace, name))

    def require(self, rtype: ResourceType, namespace: str, name: str) -> JsonObj:
        """Return a copy of the stored object, or raise 404 NotFound."""
        obj = self.get(rtype, namespace, name)
        if obj is None:
            raise not_found(rtype, name)
        return copy.deepcopy(obj)

    def select(
        self,
        rtype: ResourceType,
        match: Callable[[JsonObj], bool],
        namespace: str | None = None,
    ) -> list[JsonObj]:
        """Return copies of the objects of a type (in ``namespace``, if given) that ``match``."""
        return [
            copy.deepcopy(o)
            for (k, ns, _), o in sorted(self.objects.items())
            if k == rtype.key and (namespace is None or ns == namespace) and match(o)
        ]

    def changes_since(self, key: str, rv: int) -> list[Change]:
        """Return the logged changes to objects of type ``key`` after resourceVersion ``rv``."""
        with self.lock:
            return [c for c in self.log if c.rv > rv and c.key == key]

    # -- writes -----------------------------------------------------------------------------

    def create(self, rtype: ResourceType, namespace: str, obj: JsonObj) -> JsonObj:
        """Store a new object, checked as the real server does (name, namespace, clash, rules)."""
        md = obj.setdefault("metadata", {})
        if not md.get("name") and md.get("generateName"):
            md["name"] = f"{md['generateName']}{uuid.uuid4().hex[:5]}"
        name = md.get("name")
        if not name:
            raise ApiError(
                422,
                "Invalid",
                f'{rtype.kind} "" is invalid: metadata.name: Required value: name or '
                "generateName is required",
                {
                    "kind": rtype.kind,
                    "group": rtype.group,
                    "causes": [
                        {
                            "reason": "FieldValueRequired",
                            "field": "metadata.name",
                            "message": "Required value: name or generateName is required",
                        }
                    ],
                },
            )
        if rtype.namespaced and self.get(NAMESPACES, "", namespace) is None:
            raise ApiError(
                404,
                "NotFound",
                f'namespaces "{namespace}" not found',
                {"name": namespace, "kind": "namespaces"},
            )
        if self.get(rtype, namespace, name) is not None:
            raise already_exists(rtype, name)
        validate(rtype, obj)
        if rtype in WORKLOADS:
            obj.pop("status", None)
        return self.put(rtype, namespace, obj)

    def put(
        self, rtype: ResourceType, namespace: str, obj: JsonObj, *, event: bool = True
    ) -> JsonObj:
        """Store ``obj`` as new without checks; ``event=False`` keeps it out of the watch log."""
        name = obj["metadata"]["name"]
        self._stamp(rtype, namespace, obj, new=True)
        if rtype is NAMESPACES:
            obj["spec"] = {"finalizers": ["kubernetes"]}
            obj["status"] = {"phase": "Active"}
        self.objects[(rtype.key, namespace, name)] = obj
        if event:
            self._record(rtype, namespace, "ADDED", obj, None)
        return obj

    def update(self, rtype: ResourceType, namespace: str, obj: JsonObj) -> JsonObj:
        """Replace a stored object; identity is kept and ``generation`` follows ``spec``."""
        name = obj["metadata"]["name"]
        old = self.objects[(rtype.key, namespace, name)]
        validate(rtype, obj)
        md = obj["metadata"]
        for keep in ("uid", "creationTimestamp", "generation"):
            if keep in old["metadata"]:
                md[keep] = old["metadata"][keep]
        if obj.get("spec") != old.get("spec"):
            md["generation"] = int(old["metadata"].get("generation", 1)) + 1
        self._stamp(rtype, namespace, obj, new=False)
        self.objects[(rtype.key, namespace, name)] = obj
        self._record(rtype, namespace, "MODIFIED", obj, old)
        return obj

    def set_status(self, rtype: ResourceType, namespace: str, name: str, status: JsonObj) -> None:
        """Write a controller's view of an object's status, if it changed (no validation)."""
        old = self.objects[(rtype.key, namespace, name)]
        if old.get("status") == status:
            return
        new = copy.deepcopy(old)
        new["status"] = status
        self._stamp(rtype, namespace, new, new=False)
        self.objects[(rtype.key, namespace, name)] = new
        self._record(rtype, namespace, "MODIFIED", new, old)

    def delete(self, rtype: ResourceType, namespace: str, name: str) -> JsonObj:
        """Remove a stored object; return it as its DELETED event carries it."""
        old = self.objects.pop((rtype.key, namespace, name))
        gone = copy.deepcopy(old)
        self.rv += 1
        gone["metadata"]["resourceVersion"] = str(self.rv)
        self._record(rtype, namespace, "DELETED", gone, old)
        return gone

    def compact(self) -> None:
        """Forget the watch history, as etcd compaction does: older resourceVersions get 410."""
        with self.lock:
            self.log.clear()
            self.oldest_rv = self.rv

    def _stamp(self, rtype: ResourceType, namespace: str, obj: JsonObj, *, new: bool) -> None:
        obj["kind"] = rtype.kind
        obj["apiVersion"] = rtype.api_version
        md = obj.setdefault("metadata", {})
        if rtype.namespaced:
            md["namespace"] = namespace
        else:
            md.pop("namespace", None)
        if new:
            md["uid"] = str(uuid.UUID(int=next(self._uid_seq) + (1 << 62)))
            md["creationTimestamp"] = now_iso()
            md["generation"] = 1
        self.rv += 1
        md["resourceVersion"] = str(self.rv)

    def _record(
        self, rtype: ResourceType, namespace: str, kind: str, obj: JsonObj, old: JsonObj | None
    ) -> None:
        self.log.append(
            Change(
                self.rv,
                rtype.key,
                namespace,
                kind,
                copy.deepcopy(obj),
                copy.deepcopy(old) if old else None,
            )
        )
        if len(self.log) > self.watch_log_size:
            drop = len(self.log) - self.watch_log_size
            self.oldest_rv = self.log[drop - 1].rv
            del self.log[:drop]
        self.wake()

    # -- waking watchers --------------------------------------------------------------------

    def open_watches(self, loop: asyncio.AbstractEventLoop) -> None:
        """Let watches served on ``loop`` wait for changes."""
        self._loop = loop
        self.changed = asyncio.Event()
        self.closing = False

    def close_watches(self) -> None:
        """End every open watch (the server is stopping)."""
        self.closing = True
        self.wake()

    def wake(self) -> None:
        """Wake the watchers; safe from any thread, as tests write from outside the loop."""
        loop, changed = self._loop, self.changed
        if loop is None or changed is None or loop.is_closed():
            return

        def _fire() -> None:
            # Watchers wait on the event they read before scanning the log; a fresh one for
            # the next round means none of them misses a change made while it was scanning.
            assert self.changed is not None
            self.changed.set()
            self.changed = asyncio.Event()

        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            _fire()
        else:
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(_fire)
