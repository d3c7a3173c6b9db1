"""Kubernetes Events (events.k8s.io/v1) about incidents and actions, on the Pod and its workload.

The playbook service hands every incident transition (:meth:`KubeEvents.observe_incidents`)
and every recorded decision (:meth:`KubeEvents.observe_records`) over; both return at once.
A background task (:meth:`KubeEvents.run`) writes them: each note becomes an Event regarding
the subject's Pod and another regarding the Deployment or StatefulSet owning it (found
through ownerReferences), so ``kubectl describe`` of either shows what happened. Repeats of
the same note on the same object patch one Event's ``series`` (count and last observed time)
instead of creating more; writes are paced by a token bucket; a full queue drops the newest.

Events are a courtesy, never a dependency: a refusal (403 without RBAC, 5xx, the API server
down) is logged once per kind of failure, counted, and the daemon goes on.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

from tritonguard.clients.kubernetes_api import KubernetesError
from tritonguard.clients.ports import Workload
from tritonguard.core.action_records import ActionRecord
from tritonguard.core.cluster_events import (
    EventNote,
    Series,
    SeriesBook,
    SeriesKey,
    note_for_incident,
    note_for_record,
)
from tritonguard.core.findings import IncidentEvent
from tritonguard.logs import get_logger

# events.k8s.io/v1 wants a qualified name here; kubectl describe shows it under "From".
REPORTING_CONTROLLER = "tritonguard.io/tritonguard"
INCIDENT_ANNOTATION = "tritonguard.io/incident"
# How long a pod's owner and uids are trusted before being read again (a StatefulSet pod
# recreated under its name has a new uid).
OWNER_TTL_S = 60.0
_HINTS = {
    "forbidden": "grant events create and patch (events.k8s.io) in this namespace (deploy/namespace)",
    "unauthorized": "check the service account token",
}


class EventsApi(Protocol):
    """The Kubernetes calls Events need (``kubernetes_api.KubernetesClient``)."""

    async def workload_of_pod(self, namespace: str, pod: str) -> Workload | None:
        """Return the pod's Deployment or StatefulSet."""
        ...

    async def uid_of(self, kind: str, namespace: str, name: str) -> str | None:
        """Return an object's uid."""
        ...

    async def create_event_v1(self, namespace: str, body: Mapping[str, Any]) -> dict[str, Any]:
        """Create an events.k8s.io/v1 Event."""
        ...

    async def patch_event_series(
        self, namespace: str, name: str, count: int, last_observed: datetime
    ) -> dict[str, Any]:
        """Set an Event's series."""
        ...


@dataclass(slots=True)
class _Targets:
    """The objects a pod's notes regard: the Pod, and its workload; when they were read."""

    pod: dict[str, str] | None
    workload: dict[str, str] | None
    read_at: float


def micro_time(when: datetime) -> str:
    """Render a MicroTime as the API server does (RFC 3339, microseconds, ``Z``)."""
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class KubeEvents:
    """Writes the Events of incidents and decisions, deduplicated, paced and failure-proof.

    ``active`` says whether this replica writes now (the leader, when there is an election):
    notes seen while it is False are let go.
    """

    def __init__(
        self,
        api: EventsApi,
        *,
        instance: str,
        controller: str = REPORTING_CONTROLLER,
        queue_size: int = 512,
        rate_per_s: float = 1.0,
        burst: int = 25,
        flush_interval_s: float = 5.0,
        book: SeriesBook | None = None,
        active: Callable[[], bool] = lambda: True,
        monotonic: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self._api = api
        self._instance = instance[:128]
        self._controller = controller
        self._pending: deque[EventNote] = deque()
        self._queue_size = queue_size
        self._rate = rate_per_s
        self._burst = float(burst)
        self._tokens = float(burst)
        self._refilled = monotonic()
        self._flush_interval_s = flush_interval_s
        self._book = book or SeriesBook()
        self._active = active
        self._monotonic = monotonic
        self._wall = wall_clock
        self._targets: dict[tuple[str, str], _Targets] = {}
        self._wake = asyncio.Event()
        self._failing: set[str] = set()
        self._log = get_logger("tritonguard.kube_events")
        self.created = 0
        self.patched = 0
        self.dropped = 0
        self.failed = 0

    # ---- what the service calls -------------------------------------------------------------
    def observe_incident(self, event: IncidentEvent) -> None:
        """Queue the Event of an incident opened or resolved (others say nothing)."""
        self._queue(note_for_incident(event))

    def observe_incidents(self, events: Iterable[IncidentEvent]) -> None:
        """Queue the Events of one evaluation's incident transitions."""
        for event in events:
            self.observe_incident(event)

    def observe_record(self, record: ActionRecord) -> None:
        """Queue the Event of a playbook decision (ran, skipped, failed, rolled back)."""
        self._queue(note_for_record(record))

    def observe_records(self, records: Iterable[ActionRecord]) -> None:
        """Queue the Events of decisions (``PlaybookService.subscribe`` takes this)."""
        for record in records:
            self.observe_record(record)

    def status(self) -> dict[str, Any]:
        """Return counters for ``/readyz`` or the log: written, dropped, failing kinds."""
        return {
            "created": self.created,
            "patched": self.patched,
            "dropped": self.dropped,
            "failed": self.failed,
            "pending": len(self._pending),
            "failing": sorted(self._failing),
        }

    async def run(self) -> None:
        """Write queued Events and held repeats until cancelled; never raises otherwise."""
        while True:
            # Woken by a new note, or at the flush interval for repeats held back.
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout=self._flush_interval_s)
            self._wake.clear()
            await self.drain()

    async def drain(self) -> None:
        """Write everything queued now, and every held repeat that is due."""
        while self._pending:
            note = self._pending.popleft()
            try:
                await self._write(note)
            except Exception as exc:  # a bug must not stop the daemon: log it and go on
                self.failed += 1
                self._log.error("event not written", reason=note.reason, error=repr(exc))
        await self._flush_due()

    # ---- internals ----------------------------------------------------------------------------
    def _queue(self, note: EventNote | None) -> None:
        # With several replicas only the leader writes: they all see the same incidents.
        if note is None or not self._active():
            return
        if len(self._pending) >= self._queue_size:
            self.dropped += 1
            if self.dropped == 1 or self.dropped % 100 == 0:
                self._log.warning("events dropped: the API is not keeping up", dropped=self.dropped)
            return
        self._pending.append(note)
        self._wake.set()

    async def _token(self) -> None:
        """Wait for a write slot: ``burst`` at once, then ``rate_per_s``."""
        while True:
            now = self._monotonic()
            self._tokens = min(self._burst, self._tokens + (now - self._refilled) * self._rate)
            self._refilled = now
            if self._tokens >= 1.0:
                self._tokens -= 1.0
                return
            await asyncio.sleep((1.0 - self._tokens) / self._rate)

    async def _write(self, note: EventNote) -> None:
        targets = await self._regarding(note.namespace, note.pod)
        if targets is None:
            return
        for ref in (targets.pod, targets.workload):
            if ref is None:
                continue
            related = targets.pod if ref is targets.workload else None
            key: SeriesKey = (
                ref["kind"],
                note.namespace,
                ref["name"],
                note.reason,
                note.action,
                note.type,
                note.topic,
            )
            now = self._monotonic()
            decision, entry = self._book.observe(key, now)
            if decision == "create":
                await self._create(key, note, ref, related)
            elif decision == "patch" and entry is not None:
                await self._patch(key, note.namespace, entry)

    async def _create(
        self,
        key: SeriesKey,
        note: EventNote,
        ref: dict[str, str],
        related: dict[str, str] | None,
        count: int = 1,
    ) -> None:
        when = self._wall()
        body: dict[str, Any] = {
            "apiVersion": "events.k8s.io/v1",
            "kind": "Event",
            "metadata": {
                "generateName": f"{ref['name']}.",
                "namespace": note.namespace,
                "annotations": {INCIDENT_ANNOTATION: note.incident_id},
            },
            "eventTime": micro_time(when),
            "reportingController": self._controller,
            "reportingInstance": self._instance,
            "action": note.action,
            "reason": note.reason,
            "type": note.type,
            "note": note.note,
            "regarding": ref,
        }
        if related is not None:
            body["related"] = related
        if count > 1:
            body["series"] = {"count": count, "lastObservedTime": micro_time(when)}
        await self._token()
        try:
            made = await self._api.create_event_v1(note.namespace, body)
        except KubernetesError as err:
            self._failed(err, note.namespace)
            return
        self._ok()
        self.created += 1
        name = str((made.get("metadata") or {}).get("name") or "")
        self._book.created(key, name, self._monotonic(), count)

    async def _patch(self, key: SeriesKey, namespace: str, entry: Series) -> None:
        await self._token()
        try:
            await self._api.patch_event_series(namespace, entry.name, entry.count, self._wall())
        except KubernetesError as err:
            if err.kind == "not_found":
                # The Event expired on the server (its TTL is an hour): the next repeat starts
                # a new one.
                self._book.forget(key)
                return
            self._failed(err, namespace)
            return
        self._ok()
        self.patched += 1
        self._book.written(entry, self._monotonic())

    async def _flush_due(self) -> None:
        for key, entry in self._book.due(self._monotonic()):
            await self._patch(key, key[1], entry)

    async def _regarding(self, namespace: str, pod: str) -> _Targets | None:
        """Return the Pod and workload a note about ``pod`` regards (cached a minute)."""
        now = self._monotonic()
        cached = self._targets.get((namespace, pod))
        if cached is not None and now - cached.read_at < OWNER_TTL_S:
            return cached
        try:
            pod_uid = await self._api.uid_of("Pod", namespace, pod)
            workload = await self._api.workload_of_pod(namespace, pod) if pod_uid else None
            workload_uid = (
                await self._api.uid_of(workload.kind, namespace, workload.name)
                if workload is not None
                else None
            )
        except KubernetesError as err:
            if err.kind != "not_found":
                self._failed(err, namespace)
                return None
            # The pod is gone: its owner, if known from before, still hears about it.
            if cached is None or cached.workload is None:
                return None
            found = _Targets(None, cached.workload, now)
        else:
            pod_ref = _ref("v1", "Pod", namespace, pod, pod_uid) if pod_uid else None
            wl_ref = (
                _ref("apps/v1", workload.kind, namespace, workload.name, workload_uid)
                if workload is not None
                else None
            )
            found = _Targets(pod_ref, wl_ref, now)
        if len(self._targets) > 4096:
            self._targets.clear()
        self._targets[(namespace, pod)] = found
        return found

    def _failed(self, err: KubernetesError, namespace: str) -> None:
        self.failed += 1
        if err.kind in self._failing:
            return
        self._failing.add(err.kind)
        self._log.warning(
            "cannot record Kubernetes events; going on without them",
            namespace=namespace,
            error=str(err),
            hint=_HINTS.get(err.kind),
        )

    def _ok(self) -> None:
        if self._failing:
            self._log.info("Kubernetes events recorded again", after=sorted(self._failing))
            self._failing.clear()


def _ref(api_version: str, kind: str, namespace: str, name: str, uid: str | None) -> dict[str, str]:
    ref = {"apiVersion": api_version, "kind": kind, "namespace": namespace, "name": name}
    if uid:
        ref["uid"] = uid
    return ref
