"""Kubernetes discovery: follow Triton pods by label selector and hand on the targets they make.

One watch per namespace (list, then watch from its resourceVersion with bookmarks; a relist on
410 Gone; backoff while the API is away, all in the client). Each change is mapped by the pure
``core.pod_targets``; whenever the set of targets changes, ``on_change`` gets all of them, at
once, so a deleted pod stops being scraped before the next poll.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any, Protocol

from tritonguard.clients.kubernetes_api import KubernetesError, PodEvent
from tritonguard.core.pod_targets import (
    DiscoveryRules,
    OwnerRef,
    Pod,
    PodTarget,
    Skipped,
    owner_chain,
    pod_target,
    replicaset_to_resolve,
)
from tritonguard.logs import get_logger
from tritonguard.settings import DiscoverySettings

# After a refusal (403: RBAC missing, 404: no such namespace) a retry can only help once an
# operator fixes it; try again at this pace rather than hammer the API server.
REFUSED_RETRY_S = 30.0
# A namespace whose watch has been failing this long makes discovery not ready: its targets may
# no longer be the pods that exist.
DEFAULT_STALE_AFTER_S = 60.0

TargetsCallback = Callable[[list[PodTarget]], None]


class PodWatchApi(Protocol):
    """The Kubernetes calls discovery makes (``kubernetes_api.KubernetesClient``)."""

    def watch_pods(
        self,
        namespace: str,
        label_selector: str = "",
        *,
        resource_version: str | None = None,
        watch_timeout_s: int = 300,
        initial_backoff_s: float = 0.5,
        max_backoff_s: float = 30.0,
        on_error: Callable[[KubernetesError], None] | None = None,
        on_synced: Callable[[], None] | None = None,
    ) -> AsyncIterator[PodEvent]:
        """Follow pods forever."""
        ...

    async def read_replicaset_owner(self, namespace: str, name: str) -> OwnerRef | None:
        """Return a ReplicaSet's controller."""
        ...


class DiscoveryMetrics(Protocol):
    """What discovery reports to the daemon's own metrics (``SelfMetrics``)."""

    def observe_discovery(self, namespace: str, targets: int, synced: bool) -> None:
        """Export one namespace's target count and whether its view is current."""
        ...

    def count_discovery_error(self, namespace: str, kind: str) -> None:
        """Count one failed list or watch request."""
        ...


@dataclass(slots=True)
class _Namespace:
    synced: bool = False
    ever_synced: bool = False
    failing_since: float | None = None
    last_error: str | None = None
    errors: int = 0
    # Pods seen since a new follow began, until its first list is done: the pods known from
    # before it that are not among them were deleted meanwhile.
    seen: set[str] | None = None


class PodDiscovery:
    """Follows the configured namespaces and keeps the current targets.

    Ready once every namespace has been listed, and as long as none has been failing for
    ``stale_after_s``. A pod's owner chain is read once, when it first becomes a target, and
    kept while the pod lives, so its series keep their labels.
    """

    def __init__(
        self,
        kube: PodWatchApi,
        settings: DiscoverySettings,
        *,
        on_change: TargetsCallback,
        metrics: DiscoveryMetrics | None = None,
        monotonic: Callable[[], float] = time.monotonic,
        stale_after_s: float = DEFAULT_STALE_AFTER_S,
        max_backoff_s: float = 30.0,
    ) -> None:
        self._kube = kube
        self._settings = settings
        self._rules = DiscoveryRules(
            metrics_port=settings.metrics_port,
            http_port=settings.http_port,
            metrics_path=settings.metrics_path,
        )
        self._on_change = on_change
        self._metrics = metrics
        self._monotonic = monotonic
        self._stale_after_s = stale_after_s
        self._max_backoff_s = max_backoff_s
        self._namespaces = {ns: _Namespace() for ns in settings.namespaces}
        self._targets: dict[tuple[str, str], PodTarget] = {}
        self._skipped: dict[tuple[str, str], str] = {}
        self._chains: dict[str, tuple[OwnerRef, ...]] = {}
        self._rs_owners: dict[tuple[str, str], OwnerRef | None] = {}
        self._log = get_logger("tritonguard.discovery")

    # ---- state ------------------------------------------------------------------------------
    @property
    def targets(self) -> list[PodTarget]:
        """Return the current targets, ordered by namespace and pod."""
        return [self._targets[k] for k in sorted(self._targets)]

    def ready(self) -> bool:
        """Return whether every namespace was listed and none has been failing for long."""
        now = self._monotonic()
        return all(
            st.ever_synced
            and (st.failing_since is None or now - st.failing_since < self._stale_after_s)
            for st in self._namespaces.values()
        )

    def status(self) -> dict[str, Any]:
        """Return discovery's state for ``/readyz``: per namespace, and the targets found."""
        now = self._monotonic()
        return {
            "ready": self.ready(),
            "targets": len(self._targets),
            "namespaces": {
                ns: {
                    "synced": st.synced,
                    "targets": sum(1 for k in self._targets if k[0] == ns),
                    "skipped": {
                        pod: why for (n, pod), why in sorted(self._skipped.items()) if n == ns
                    },
                    "failing_for_s": None
                    if st.failing_since is None
                    else round(now - st.failing_since, 3),
                    "last_error": st.last_error,
                    "errors": st.errors,
                }
                for ns, st in sorted(self._namespaces.items())
            },
        }

    # ---- following ----------------------------------------------------------------------------
    async def run(self) -> None:
        """Follow every namespace until cancelled."""
        async with asyncio.TaskGroup() as group:
            for ns in self._namespaces:
                group.create_task(self._follow(ns), name=f"discovery:{ns}")

    async def _follow(self, namespace: str) -> None:
        while True:
            self._namespaces[namespace].seen = set()
            events = self._kube.watch_pods(
                namespace,
                self._settings.label_selector,
                watch_timeout_s=self._settings.watch_timeout_s,
                max_backoff_s=self._max_backoff_s,
                on_error=lambda err: self._failed(namespace, err),
                on_synced=lambda: self._synced(namespace),
            )
            try:
                async with contextlib.aclosing(events):  # type: ignore[type-var]
                    async for event in events:
                        await self._apply(event)
            except KubernetesError as err:
                # Not worth a fast retry (403, 404, invalid selector): say what to fix.
                self._failed(namespace, err)
                await asyncio.sleep(REFUSED_RETRY_S)

    def _synced(self, namespace: str) -> None:
        st = self._namespaces[namespace]
        if st.failing_since is not None:
            self._log.info(
                "pod discovery recovered",
                namespace=namespace,
                failed_for_s=round(self._monotonic() - st.failing_since, 3),
            )
        st.synced = st.ever_synced = True
        st.failing_since = None
        if st.seen is not None:
            seen, st.seen = st.seen, None
            for key in [k for k in self._skipped if k[0] == namespace and k[1] not in seen]:
                del self._skipped[key]
            for key in [k for k in self._targets if k[0] == namespace and k[1] not in seen]:
                self._drop(key, "the pod is gone (not listed again)")
        self._report(namespace)

    def _failed(self, namespace: str, err: KubernetesError) -> None:
        st = self._namespaces[namespace]
        first = st.failing_since is None
        st.synced = False
        st.errors += 1
        st.last_error = str(err)
        if first:
            st.failing_since = self._monotonic()
        if self._metrics is not None:
            self._metrics.count_discovery_error(namespace, err.kind)
        hint = {
            "forbidden": "grant pods get/list/watch in this namespace (deploy/namespace)",
            "not_found": "check discovery.namespaces",
            "invalid": "check discovery.label_selector",
        }.get(err.kind)
        log = self._log.warning if first or not err.retryable else self._log.debug
        log("pod discovery failed", namespace=namespace, error=str(err), hint=hint)
        self._report(namespace)

    def _report(self, namespace: str) -> None:
        if self._metrics is not None:
            count = sum(1 for k in self._targets if k[0] == namespace)
            self._metrics.observe_discovery(namespace, count, self._namespaces[namespace].synced)

    async def _apply(self, event: PodEvent) -> None:
        pod = event.pod
        key = (pod.namespace, pod.name)
        seen = self._namespaces[pod.namespace].seen if pod.namespace in self._namespaces else None
        if seen is not None:
            seen.add(pod.name)
        if event.type == "DELETED":
            self._skipped.pop(key, None)
            self._chains.pop(pod.uid, None)
            self._drop(key, "the pod was deleted")
            self._forget_replicasets()
            return
        chain = await self._chain(pod)
        mapped = pod_target(pod, self._rules, chain)
        if isinstance(mapped, Skipped):
            if self._skipped.get(key) != mapped.reason:
                self._log.info(
                    "pod not scraped", namespace=pod.namespace, pod=pod.name, reason=mapped.reason
                )
            self._skipped[key] = mapped.reason
            self._drop(key, mapped.reason)
            return
        self._skipped.pop(key, None)
        if self._targets.get(key) == mapped:
            return
        self._targets[key] = mapped
        self._log.info(
            "pod target found",
            namespace=pod.namespace,
            pod=pod.name,
            metrics_url=mapped.metrics_url,
            triton_url=mapped.triton_url,
            owners=[f"{o.kind}/{o.name}" for o in mapped.owners],
        )
        self._changed(pod.namespace)

    def _drop(self, key: tuple[str, str], why: str) -> None:
        if self._targets.pop(key, None) is not None:
            self._log.info("pod target gone", namespace=key[0], pod=key[1], reason=why)
            self._changed(key[0])

    def _changed(self, namespace: str) -> None:
        self._report(namespace)
        self._on_change(self.targets)

    async def _chain(self, pod: Pod) -> tuple[OwnerRef, ...]:
        if pod.uid and pod.uid in self._chains:
            return self._chains[pod.uid]
        rs = replicaset_to_resolve(pod) if self._settings.resolve_owners else None
        owner: OwnerRef | None = None
        known = True
        if rs is not None:
            owner, known = await self._replicaset_owner(pod.namespace, rs)
        chain = owner_chain(pod, owner)
        if known and pod.uid:
            self._chains[pod.uid] = chain
        return chain

    async def _replicaset_owner(self, namespace: str, name: str) -> tuple[OwnerRef | None, bool]:
        """Return the ReplicaSet's owner (cached) and whether it is known for sure."""
        key = (namespace, name)
        if key in self._rs_owners:
            return self._rs_owners[key], True
        try:
            owner = await self._kube.read_replicaset_owner(namespace, name)
        except KubernetesError as err:
            # The pod is scraped with the ReplicaSet as its top owner until the next change.
            self._log.warning(
                "ReplicaSet owner unknown",
                namespace=namespace,
                replicaset=name,
                error=str(err),
                hint="grant replicasets get (deploy/namespace) to name the Deployment",
            )
            return None, False
        self._rs_owners[key] = owner
        return owner, True

    def _forget_replicasets(self) -> None:
        """Keep cached ReplicaSet owners only for ReplicaSets a known chain still names."""
        named = {
            (t.namespace, o.name)
            for t in self._targets.values()
            for o in t.owners
            if o.kind == "ReplicaSet"
        }
        for key in [k for k in self._rs_owners if k not in named]:
            del self._rs_owners[key]
