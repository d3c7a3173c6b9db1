"""Kubernetes discovery: follow Triton pods by label selector and hand on the targets they make.

One watch per namespace (list, then watch from its resourceVersion with bookmarks; a relist on
410 Gone; backoff while the API is away, all in the client). Each change is mapped by the pure
``core.pod_targets``; whenever the set of targets changes, ``on_change`` gets all of them, at
once, so a deleted pod stops being scraped before the next poll. ``on_rollout`` hears the
workload revision each target pod runs (``core.rollout_changes``); with
``watch_config_maps`` on, ``on_config_map`` hears each change of a ConfigMap a target pod
mounts (one ConfigMap watch per namespace, ``core.config_map_changes``), so incidents can
name what changed.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any, Protocol

from tritonguard.clients.kubernetes_api import ConfigMapEvent, KubernetesError, PodEvent
from tritonguard.core.config_map_changes import ConfigMapChange, ConfigMapData, ConfigMapReads
from tritonguard.core.pod_targets import (
    DiscoveryRules,
    OwnerRef,
    Pod,
    PodRevision,
    PodTarget,
    Skipped,
    owner_chain,
    pod_revision,
    pod_target,
    replicaset_to_resolve,
)
from tritonguard.core.rollout_changes import Revision, RolloutChange, rollout_of
from tritonguard.logs import get_logger
from tritonguard.settings import ALL_NAMESPACES, DiscoverySettings

# After a refusal (403: RBAC missing, 404: no such namespace) a retry can only help once an
# operator fixes it; try again at this pace rather than hammer the API server.
REFUSED_RETRY_S = 30.0
# A namespace whose watch has been failing this long makes discovery not ready: its targets may
# no longer be the pods that exist.
DEFAULT_STALE_AFTER_S = 60.0

TargetsCallback = Callable[[list[PodTarget]], None]
# Told the rollout (workload revision) each target pod runs: namespace, pod, rollout.
RolloutCallback = Callable[[str, str, RolloutChange], None]
# Told each change of a ConfigMap a target pod mounts: namespace, pod, change.
ConfigMapCallback = Callable[[str, str, ConfigMapChange], None]
# Revisions whose rollout is kept, to name it for each of its pods without listing again.
MAX_ROLLOUTS = 256
_CONFIG_MAP_HINT = (
    "grant configmaps get/list/watch in this namespace (deploy/components/config-maps), "
    "or set discovery.watch_config_maps: false"
)


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

    async def list_revisions(self, namespace: str, kind: str, workload: str) -> list[Revision]:
        """Return a workload's revisions (ReplicaSets or ControllerRevisions)."""
        ...

    def watch_config_maps(
        self,
        namespace: str,
        *,
        watch_timeout_s: int = 300,
        initial_backoff_s: float = 0.5,
        max_backoff_s: float = 30.0,
        on_error: Callable[[KubernetesError], None] | None = None,
        on_synced: Callable[[], None] | None = None,
        keep: Callable[[str, str], bool] | None = None,
    ) -> AsyncIterator[ConfigMapEvent]:
        """Follow a namespace's ConfigMaps forever (a list holds only those ``keep`` wants)."""
        ...

    async def read_config_map(self, namespace: str, name: str) -> ConfigMapData:
        """Return one ConfigMap."""
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
    seen: set[tuple[str, str]] | None = None


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
        on_rollout: RolloutCallback | None = None,
        on_config_map: ConfigMapCallback | None = None,
        metrics: DiscoveryMetrics | None = None,
        monotonic: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
        stale_after_s: float = DEFAULT_STALE_AFTER_S,
        max_backoff_s: float = 30.0,
        keep: Callable[[str, tuple[OwnerRef, ...], str], bool] | None = None,
    ) -> None:
        self._kube = kube
        # Another shard's pods are left alone entirely: not targets, not skipped, no rollout.
        self._keep = keep
        self._settings = settings
        self._rules = DiscoveryRules(
            metrics_port=settings.metrics_port,
            http_port=settings.http_port,
            metrics_path=settings.metrics_path,
        )
        self._on_change = on_change
        self._on_rollout = on_rollout
        self._metrics = metrics
        self._monotonic = monotonic
        self._wall_clock = wall_clock
        self._rollouts: dict[PodRevision, RolloutChange] = {}
        self._on_config_map = on_config_map if settings.watch_config_maps else None
        self._config_maps = ConfigMapReads()
        # The ConfigMaps each target pod mounts; per ConfigMap watch, since when it has been
        # failing (wall clock: a change seen after a relist may date from then on).
        self._mounts: dict[tuple[str, str], tuple[str, ...]] = {}
        self._config_maps_failing: dict[str, float] = {}
        self._stale_after_s = stale_after_s
        self._max_backoff_s = max_backoff_s
        self._namespaces = {ns: _Namespace() for ns in settings.namespaces}
        self._targets: dict[tuple[str, str], PodTarget] = {}
        self._skipped: dict[tuple[str, str], str] = {}
        self._chains: dict[str, tuple[OwnerRef, ...]] = {}
        self._rs_owners: dict[tuple[str, str], OwnerRef | None] = {}
        self._log = get_logger("tritonguard.discovery")

    # ---- state ------------------------------------------------------------------------------
    def _watch_of(self, namespace: str) -> str:
        """Return the watch that follows a namespace (``*`` when every one is watched)."""
        return ALL_NAMESPACES if ALL_NAMESPACES in self._namespaces else namespace

    def _covers(self, watch: str, namespace: str) -> bool:
        return watch in (ALL_NAMESPACES, namespace)

    def stale(self, namespace: str) -> str | None:
        """Return why a namespace's endpoints must not be acted on now, or None.

        A namespace whose watch has been failing for ``stale_after_s`` may hold pods that
        are gone or moved: acting on their old addresses would hit the wrong server.
        """
        st = self._namespaces.get(self._watch_of(namespace))
        if st is None or st.failing_since is None:
            return None
        failing = self._monotonic() - st.failing_since
        if failing < self._stale_after_s:
            return None
        return (
            f"pod discovery in namespace {namespace} has been failing for {failing:.0f} s "
            f"({st.last_error}); its pod endpoints may be stale"
        )

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
                    "targets": sum(1 for k in self._targets if self._covers(ns, k[0])),
                    "skipped": {
                        (pod if n == ns else f"{n}/{pod}"): why
                        for (n, pod), why in sorted(self._skipped.items())
                        if self._covers(ns, n)
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
                if self._on_config_map is not None:
                    group.create_task(self._follow_config_maps(ns), name=f"configmaps:{ns}")

    # ---- mounted ConfigMaps -------------------------------------------------------------------
    async def _follow_config_maps(self, namespace: str) -> None:
        """Watch a namespace's ConfigMaps; diff those target pods mount, tell their pods."""
        while True:
            events = self._kube.watch_config_maps(
                namespace,
                watch_timeout_s=self._settings.watch_timeout_s,
                max_backoff_s=self._max_backoff_s,
                on_error=lambda err: self._config_maps_failed(namespace, err),
                on_synced=lambda: self._config_maps_synced(namespace),
                # A list keeps only the mounted ones: the rest of a namespace's are not held.
                keep=lambda ns, name: bool(self._mounted_by(ns, name)),
            )
            try:
                async with contextlib.aclosing(events):  # type: ignore[type-var]
                    async for event in events:
                        await self._config_map_seen(event)
            except KubernetesError as err:
                self._config_maps_failed(namespace, err)
                await asyncio.sleep(REFUSED_RETRY_S)

    def _config_maps_failed(self, namespace: str, err: KubernetesError) -> None:
        first = namespace not in self._config_maps_failing
        if first:
            self._config_maps_failing[namespace] = self._wall_clock()
        if self._metrics is not None:
            self._metrics.count_discovery_error(namespace, err.kind)
        log = self._log.warning if first or not err.retryable else self._log.debug
        hint = _CONFIG_MAP_HINT if err.kind == "forbidden" else None
        log("ConfigMap watch failed", namespace=namespace, error=str(err), hint=hint)

    def _config_maps_synced(self, namespace: str) -> None:
        if self._config_maps_failing.pop(namespace, None) is not None:
            self._log.info("ConfigMap watch recovered", namespace=namespace)

    def _mounted_by(self, namespace: str, name: str) -> list[str]:
        return sorted(
            pod for (ns, pod), names in self._mounts.items() if ns == namespace and name in names
        )

    async def _config_map_seen(self, event: ConfigMapEvent) -> None:
        """Diff one ConfigMap event against the last read, if a target pod mounts it."""
        cm = event.config_map
        pods = self._mounted_by(cm.namespace, cm.name)
        if not pods:
            return
        if event.type == "DELETED":
            # The pods keep the files they mounted until they restart; nothing is read anew.
            self._log.info("mounted ConfigMap deleted", namespace=cm.namespace, configmap=cm.name)
            self._config_maps.forget(cm.namespace, cm.name)
            return
        now = self._wall_clock()
        failing = self._config_maps_failing.get(self._watch_of(cm.namespace))
        # A watch in sync tells a change as it happens; a relist, only that it happened since.
        until = None if event.listed else now if failing is None else failing
        # Off the event loop: hashing and diffing up to MiBs of data would stall every scrape.
        change = await asyncio.to_thread(self._config_maps.read, cm, now, unchanged_until=until)
        # The pods mounting it are asked again: one may have gone while the diff ran.
        pods = self._mounted_by(cm.namespace, cm.name)
        if change is None or not pods:
            return
        self._log.info(
            "mounted ConfigMap changed", namespace=cm.namespace, change=change.summary(), pods=pods
        )
        assert self._on_config_map is not None
        for pod in pods:
            self._on_config_map(cm.namespace, pod, change)

    async def _read_mounts(self, pod: Pod) -> None:
        """Read each ConfigMap a new target pod mounts that no read is held of yet.

        The watch tells changes from now on; this read is what the first change is diffed
        against. A failed read leaves it to the watch's next event.
        """
        for name in pod.config_maps:
            if self._config_maps.known(pod.namespace, name):
                continue
            try:
                cm = await self._kube.read_config_map(pod.namespace, name)
            except KubernetesError as err:
                self._log.warning(
                    "mounted ConfigMap unreadable",
                    namespace=pod.namespace,
                    configmap=name,
                    error=str(err),
                    hint=_CONFIG_MAP_HINT if err.kind == "forbidden" else None,
                )
                continue
            if not self._config_maps.known(pod.namespace, name):
                self._config_maps.read(cm, self._wall_clock())

    def _unmount(self, key: tuple[str, str]) -> None:
        names = self._mounts.pop(key, ())
        for name in names:
            if not self._mounted_by(key[0], name):
                self._config_maps.forget(key[0], name)

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
        was_stale = self.stale(namespace) is not None
        st.synced = st.ever_synced = True
        st.failing_since = None
        if st.seen is not None:
            seen, st.seen = st.seen, None
            for key in [
                k for k in self._skipped if self._covers(namespace, k[0]) and k not in seen
            ]:
                del self._skipped[key]
            for key in [
                k for k in self._targets if self._covers(namespace, k[0]) and k not in seen
            ]:
                self._drop(key, "the pod is gone (not listed again)")
        self._report(namespace)
        if was_stale:
            self._on_change(self.targets)

    def _failed(self, namespace: str, err: KubernetesError) -> None:
        st = self._namespaces[namespace]
        first = st.failing_since is None
        st.synced = False
        st.errors += 1
        st.last_error = str(err)
        if first:
            st.failing_since = self._monotonic()
            # Past the bound its endpoints go stale: whoever uses them must hear it then,
            # not at the next change, which a failing watch does not bring.
            asyncio.get_running_loop().call_later(
                self._stale_after_s, self._went_stale, namespace, st.failing_since
            )
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

    def _went_stale(self, namespace: str, since: float) -> None:
        if self._namespaces[namespace].failing_since != since:
            return  # recovered meanwhile (or failing again since later)
        self._log.warning(
            "pod endpoints stale: actions will not use them",
            namespace=namespace,
            reason=self.stale(namespace),
        )
        self._on_change(self.targets)

    def _report(self, namespace: str) -> None:
        if self._metrics is not None:
            count = sum(1 for k in self._targets if self._covers(namespace, k[0]))
            self._metrics.observe_discovery(namespace, count, self._namespaces[namespace].synced)

    async def _apply(self, event: PodEvent) -> None:
        pod = event.pod
        key = (pod.namespace, pod.name)
        watch = self._namespaces.get(self._watch_of(pod.namespace))
        seen = watch.seen if watch is not None else None
        if seen is not None:
            seen.add(key)
        if event.type == "DELETED":
            self._skipped.pop(key, None)
            self._chains.pop(pod.uid, None)
            self._drop(key, "the pod was deleted")
            self._forget_replicasets()
            return
        chain = await self._chain(pod)
        if self._keep is not None and not self._keep(pod.namespace, chain, pod.name):
            self._skipped.pop(key, None)
            self._drop(key, "another shard's pod")
            return
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
        if self._on_config_map is not None and self._mounts.get(key) != pod.config_maps:
            self._unmount(key)
            self._mounts[key] = pod.config_maps
            await self._read_mounts(pod)
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
        self._changed(self._watch_of(pod.namespace))
        revision = pod_revision(pod, chain) if self._on_rollout is not None else None
        if revision is not None:
            await self._name_rollout(pod, revision)

    async def _name_rollout(self, pod: Pod, revision: PodRevision) -> None:
        """Tell ``on_rollout`` the revision the pod runs, diffed against the one before it.

        Listed once per revision: a rollout's pods share it, and the first seen says when
        discovery saw it. A failed list leaves the pod without one until its next change.
        """
        assert self._on_rollout is not None
        rollout = self._rollouts.get(revision)
        if rollout is None:
            try:
                revisions = await self._kube.list_revisions(
                    revision.namespace, revision.kind, revision.workload
                )
            except KubernetesError as err:
                self._log.warning(
                    "workload revisions unknown",
                    namespace=revision.namespace,
                    workload=f"{revision.kind}/{revision.workload}",
                    error=str(err),
                    hint="grant replicasets and controllerrevisions list (deploy/namespace)",
                )
                return
            current = next((r for r in revisions if r.name == revision.name), None)
            if current is None:
                return
            rollout = rollout_of(revision.namespace, current, revisions, self._wall_clock())
            if len(self._rollouts) >= MAX_ROLLOUTS:
                del self._rollouts[next(iter(self._rollouts))]
            self._rollouts[revision] = rollout
            self._log.info(
                "workload revision seen",
                namespace=revision.namespace,
                workload=f"{revision.kind}/{revision.workload}",
                revision=rollout.revision,
                previous=rollout.previous,
                diff=rollout.diff_text(),
            )
        self._on_rollout(pod.namespace, pod.name, rollout)

    def _drop(self, key: tuple[str, str], why: str) -> None:
        self._unmount(key)
        if self._targets.pop(key, None) is not None:
            self._log.info("pod target gone", namespace=key[0], pod=key[1], reason=why)
            self._changed(self._watch_of(key[0]))

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
