"""``FakeKube``: lifecycle, fault injection, and the methods tests seed and inspect state with."""

from __future__ import annotations

import asyncio
import contextlib
import copy
import json
import threading
from collections.abc import Iterator
from types import TracebackType

from aiohttp import web

from tests.fakes.kube.controllers import REVISION_ANNOTATION, Controllers
from tests.fakes.kube.middleware import Faults, RequestLog, RequestRecord
from tests.fakes.kube.objects import new_object
from tests.fakes.kube.pods import PodFactory, container
from tests.fakes.kube.resources import (
    CONFIG_MAPS,
    CONTROLLER_REVISIONS,
    DEPLOYMENTS,
    HPAS,
    NAMESPACES,
    PODS,
    REPLICASETS,
    SCALED_OBJECTS,
    STATEFULSETS,
    JsonObj,
    type_of_kind,
    workload_type,
)
from tests.fakes.kube.routes import Routes
from tests.fakes.kube.selectors import matcher
from tests.fakes.kube.store import Store


class FakeKube:
    """A fake Kubernetes API server: real paths and shapes, in-memory state, injectable faults.

    No API server can run on the machines where tritonguard is developed, so this serves the
    subset of the Kubernetes API that tritonguard uses, with the real URL layout, JSON shapes and
    semantics: legacy discovery, ``apps/v1`` Deployments and StatefulSets with the ``scale``
    subresource, their ReplicaSets (read-only, one per pod template, numbered as revisions)
    and ControllerRevisions, ``autoscaling/v2``
    HorizontalPodAutoscalers, ``core/v1`` Pods (list, label and field selectors, streaming
    watch with bookmarks), Events (core/v1, and events.k8s.io/v1 as a converted view of the same
    objects), Namespaces, ``coordination.k8s.io/v1`` Leases and KEDA's ``keda.sh/v1alpha1``
    ScaledObjects.
    Writes bump a cluster-wide ``resourceVersion``; a ``PUT`` with a stale one gets ``409
    Conflict``; errors are ``Status`` objects. ``kubectl`` asks for server-side ``Table`` output
    and gets it.

    It is not a cluster: there is no scheduler and no admission. A tiny controller does what
    tritonguard's tests need: scaling a Deployment or StatefulSet creates or deletes its pods (so
    a watch sees them come and go), and an HPA keeps its target within
    ``[minReplicas, maxReplicas]``; a ScaledObject owns an HPA mirroring its replica counts
    and puts back edits made to that HPA, as KEDA's operator does.

    Tests seed and inspect state with plain methods (``add_deployment``, ``add_pod``,
    ``set_pod_phase``, ``add_hpa``, ``get_object``), read ``requests``, and inject faults (a
    delay on every response, ``500``/``503`` for the next *k* requests, dropped connections).
    Use it as an async context manager, or from synchronous code with :meth:`run_in_thread`.
    """

    def __init__(self, *, host: str = "127.0.0.1", port: int = 0) -> None:
        self.host = host
        self._want_port = port
        self.port = 0
        self.requests: list[RequestRecord] = []
        self.faults = Faults()
        self._store = Store()
        self._pods = PodFactory()
        self._controllers = Controllers(self._store, self._pods)
        self._runner: web.AppRunner | None = None
        self._log = RequestLog(self.requests, self.faults)
        for ns in ("default", "kube-system"):
            self._store.put(NAMESPACES, "", new_object(ns, "", {}), event=False)

    # -- knobs of the simulated cluster ---------------------------------------------------------

    @property
    def new_pod_phase(self) -> str:
        """The phase of pods the controller creates (``Running`` unless a test wants otherwise)."""
        return self._controllers.new_pod_phase

    @new_pod_phase.setter
    def new_pod_phase(self, phase: str) -> None:
        self._controllers.new_pod_phase = phase

    @property
    def hpa_controller(self) -> bool:
        """Whether HPAs keep their targets within bounds (on unless a test turns it off)."""
        return self._controllers.hpa_enabled

    @hpa_controller.setter
    def hpa_controller(self, enabled: bool) -> None:
        self._controllers.hpa_enabled = enabled

    @property
    def watch_log_size(self) -> int:
        """How many changes the watch log keeps; a watch from before them gets 410 Gone."""
        return self._store.watch_log_size

    @watch_log_size.setter
    def watch_log_size(self, size: int) -> None:
        self._store.watch_log_size = size

    # -- lifecycle ------------------------------------------------------------------------------

    @property
    def url(self) -> str:
        """Base URL of the running server (``http://127.0.0.1:PORT``)."""
        return f"http://{self.host}:{self.port}"

    async def start(self) -> None:
        """Start serving on the configured (or a free) port."""
        self._store.open_watches(asyncio.get_running_loop())
        routes = Routes(
            self._store,
            self._controllers,
            self._log,
            lambda: f"{self.host}:{self.port}",
        )
        self._runner = web.AppRunner(routes.app(), access_log=None, shutdown_timeout=1.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self._want_port or self.port)
        await site.start()
        server = site._server
        assert server is not None
        sockets = getattr(server, "sockets", None) or []
        self.port = int(sockets[0].getsockname()[1])

    async def stop(self) -> None:
        """Stop serving and end open watches; state is kept, so :meth:`start` resumes it."""
        self._store.close_watches()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        await self._log.cancel_inflight()

    async def __aenter__(self) -> FakeKube:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()

    @contextlib.contextmanager
    def run_in_thread(self) -> Iterator[FakeKube]:
        """Serve from a private event loop in a background thread (for synchronous tests)."""
        loop = asyncio.new_event_loop()
        ready = threading.Event()

        def _run() -> None:
            asyncio.set_event_loop(loop)
            loop.run_until_complete(self.start())
            ready.set()
            loop.run_forever()

        thread = threading.Thread(target=_run, name="fake-kube", daemon=True)
        thread.start()
        if not ready.wait(10):
            raise RuntimeError("fake Kubernetes API server did not start within 10 s")
        try:
            yield self
        finally:
            asyncio.run_coroutine_threadsafe(self.stop(), loop).result(10)
            loop.call_soon_threadsafe(loop.stop)
            thread.join(10)
            loop.close()

    def kubeconfig(self, namespace: str = "default") -> str:
        """Return a kubeconfig (YAML is a superset of JSON) pointing at this server, no auth."""
        return json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "fake", "cluster": {"server": self.url}}],
                "users": [{"name": "fake", "user": {}}],
                "contexts": [
                    {
                        "name": "fake",
                        "context": {"cluster": "fake", "user": "fake", "namespace": namespace},
                    }
                ],
                "current-context": "fake",
            },
            indent=2,
        )

    # -- fault injection ------------------------------------------------------------------------

    def set_delay(self, seconds: float) -> None:
        """Delay every response by ``seconds`` (a slow or overloaded API server)."""
        self.faults.delay_s = seconds

    def fail_next(self, count: int, status: int = 503) -> None:
        """Answer the next ``count`` requests with ``status`` (500, 503, or 403 as RBAC would)."""
        self.faults.fail_next = count
        self.faults.fail_status = status

    def drop_next(self, count: int) -> None:
        """Close the connection without answering for the next ``count`` requests."""
        self.faults.drop_next = count

    def compact(self) -> None:
        """Forget the watch history, as etcd compaction does: older resourceVersions get 410."""
        self._store.compact()

    # -- seeding and inspection -----------------------------------------------------------------

    def add_namespace(self, name: str) -> JsonObj:
        """Create a namespace (``default`` and ``kube-system`` exist from the start)."""
        with self._store.lock:
            existing = self._store.get(NAMESPACES, "", name)
            if existing is not None:
                return copy.deepcopy(existing)
            return copy.deepcopy(self._store.put(NAMESPACES, "", new_object(name, "", {})))

    def add_deployment(
        self,
        namespace: str,
        name: str,
        replicas: int = 1,
        labels: dict[str, str] | None = None,
        *,
        kind: str = "Deployment",
    ) -> JsonObj:
        """Create a Deployment (or ``kind="StatefulSet"``) whose pods carry ``labels``."""
        rtype = workload_type(kind)
        labels = dict(labels or {"app": name})
        obj = new_object(name, namespace, labels)
        obj["spec"] = {
            "replicas": replicas,
            "selector": {"matchLabels": dict(labels)},
            "template": {
                "metadata": {"labels": dict(labels)},
                "spec": {"containers": [container()]},
            },
        }
        if rtype is STATEFULSETS:
            obj["spec"]["serviceName"] = name
        with self._store.lock:
            self.add_namespace(namespace)
            stored = self._store.create(rtype, namespace, obj)
            self._controllers.reconcile(rtype, namespace, name)
            return copy.deepcopy(self._store.get(rtype, namespace, name) or stored)

    def add_statefulset(
        self, namespace: str, name: str, replicas: int = 1, labels: dict[str, str] | None = None
    ) -> JsonObj:
        """Create a StatefulSet whose pods carry ``labels``."""
        return self.add_deployment(namespace, name, replicas, labels, kind="StatefulSet")

    def add_pod(
        self,
        namespace: str,
        name: str,
        labels: dict[str, str] | None = None,
        *,
        phase: str = "Running",
        ready: bool | None = None,
        node: str = "gpu-node-1",
        ip: str | None = None,
        ports: dict[str, int] | None = None,
        annotations: dict[str, str] | None = None,
        owner: tuple[str, str] | None = None,
        config_maps: tuple[str, ...] = (),
    ) -> JsonObj:
        """Create a pod directly (not managed by the fake's controller).

        ``config_maps`` are mounted as volumes, the first directly and any others through one
        projected volume, as a model repository made of several ConfigMaps would be.

        ``ip`` and ``ports`` (named container ports) let a pod point at a real server, such
        as a lab Triton on ``127.0.0.1``. ``owner`` (``("StatefulSet", "name")``) only writes
        its ownerReference, so a chain can be shown without a controller replacing the pod.
        """
        with self._store.lock:
            self.add_namespace(namespace)
            pod = self._pods.pod(
                namespace,
                name,
                labels or {},
                phase=phase,
                ready=ready,
                node=node,
                ip=ip,
                ports=ports,
                annotations=annotations,
            )
            if config_maps:
                first, *rest = config_maps
                volumes: list[JsonObj] = [{"name": "models", "configMap": {"name": first}}]
                if rest:
                    sources = [{"configMap": {"name": n}} for n in rest]
                    volumes.append({"name": "extra", "projected": {"sources": sources}})
                pod["spec"]["volumes"] = volumes
            if owner is not None:
                kind, owner_name = owner
                target = self._store.get(type_of_kind(kind), namespace, owner_name)
                pod["metadata"]["ownerReferences"] = [
                    {
                        "apiVersion": "apps/v1",
                        "kind": kind,
                        "name": owner_name,
                        "uid": target["metadata"]["uid"] if target else "",
                        "controller": True,
                    }
                ]
            return copy.deepcopy(self._store.create(PODS, namespace, pod))

    def set_config_map(
        self,
        namespace: str,
        name: str,
        data: dict[str, str],
        binary_data: dict[str, str] | None = None,
    ) -> JsonObj:
        """Create a ConfigMap, or replace its data: a new resourceVersion and a watch event."""
        with self._store.lock:
            self.add_namespace(namespace)
            existing = self._store.get(CONFIG_MAPS, namespace, name)
            cm = (
                copy.deepcopy(existing) if existing is not None else new_object(name, namespace, {})
            )
            cm["data"] = dict(data)
            if binary_data:
                cm["binaryData"] = dict(binary_data)
            else:
                cm.pop("binaryData", None)
            if existing is None:
                return copy.deepcopy(self._store.create(CONFIG_MAPS, namespace, cm))
            return copy.deepcopy(self._store.update(CONFIG_MAPS, namespace, cm))

    def add_replicaset(
        self,
        namespace: str,
        name: str,
        deployment: str | None = None,
        *,
        revision: int | None = None,
        template: JsonObj | None = None,
    ) -> JsonObj:
        """Create a bare ReplicaSet (owned by ``deployment``, if given) for pods to name.

        ``revision`` writes the ``deployment.kubernetes.io/revision`` annotation and
        ``template`` its pod template, as the Deployment controller does for each rollout.
        """
        rs = new_object(name, namespace, {})
        if deployment is not None:
            with self._store.lock:
                owner = self._store.get(DEPLOYMENTS, namespace, deployment)
            rs["metadata"]["ownerReferences"] = [
                {
                    "apiVersion": "apps/v1",
                    "kind": "Deployment",
                    "name": deployment,
                    "uid": owner["metadata"]["uid"] if owner else "",
                    "controller": True,
                }
            ]
        if revision is not None:
            rs["metadata"]["annotations"] = {REVISION_ANNOTATION: str(revision)}
        rs["spec"] = {"replicas": 0, "selector": {"matchLabels": {}}, "template": template or {}}
        with self._store.lock:
            self.add_namespace(namespace)
            return copy.deepcopy(self._store.put(REPLICASETS, namespace, rs))

    def add_controller_revision(
        self, namespace: str, name: str, statefulset: str, revision: int, template: JsonObj
    ) -> JsonObj:
        """Create a StatefulSet's ControllerRevision: its pod template as a patch, numbered.

        Its pods name it in their ``controller-revision-hash`` label.
        """
        cr = new_object(name, namespace, {})
        cr["metadata"]["ownerReferences"] = [
            {
                "apiVersion": "apps/v1",
                "kind": "StatefulSet",
                "name": statefulset,
                "uid": "",
                "controller": True,
            }
        ]
        cr["revision"] = revision
        cr["data"] = {"spec": {"template": {**template, "$patch": "replace"}}}
        with self._store.lock:
            self.add_namespace(namespace)
            return copy.deepcopy(self._store.put(CONTROLLER_REVISIONS, namespace, cr))

    @property
    def bookmark_interval_s(self) -> float:
        """How often watches that allow bookmarks get one (a minute, as a real server)."""
        return self._store.bookmark_interval_s

    @bookmark_interval_s.setter
    def bookmark_interval_s(self, seconds: float) -> None:
        self._store.bookmark_interval_s = seconds

    def set_pod_phase(
        self, namespace: str, name: str, phase: str, ready: bool | None = None
    ) -> JsonObj:
        """Change a pod's phase (and Ready condition; Running means ready unless told)."""
        with self._store.lock:
            pod = self._store.require(PODS, namespace, name)
            pod["status"] = self._pods.status(phase, ready, pod["status"].get("podIP"))
            stored = self._store.update(PODS, namespace, pod)
            self._controllers.refresh_workload_status(namespace)
            return copy.deepcopy(stored)

    def delete_pod(self, namespace: str, name: str) -> None:
        """Delete a pod (a workload with too few pods gets a replacement, as a ReplicaSet would)."""
        with self._store.lock:
            pod = self._store.require(PODS, namespace, name)
            self._store.delete(PODS, namespace, name)
            self._controllers.pod_deleted(namespace, pod)

    def add_hpa(
        self,
        namespace: str,
        name: str,
        target_name: str,
        *,
        target_kind: str = "Deployment",
        min_replicas: int = 1,
        max_replicas: int = 10,
        current_replicas: int | None = None,
        desired_replicas: int | None = None,
    ) -> JsonObj:
        """Create an autoscaling/v2 HPA for a workload; status defaults to the target's replicas."""
        obj = new_object(name, namespace, {})
        obj["spec"] = {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": target_kind, "name": target_name},
            "minReplicas": min_replicas,
            "maxReplicas": max_replicas,
            "metrics": [
                {
                    "type": "Resource",
                    "resource": {
                        "name": "cpu",
                        "target": {"type": "Utilization", "averageUtilization": 80},
                    },
                }
            ],
        }
        with self._store.lock:
            self.add_namespace(namespace)
            target = self._store.get(workload_type(target_kind), namespace, target_name)
            cur = current_replicas
            if cur is None:
                cur = int(target["spec"]["replicas"]) if target else 0
            obj["status"] = {
                "currentReplicas": cur,
                "desiredReplicas": cur if desired_replicas is None else desired_replicas,
            }
            return copy.deepcopy(self._store.create(HPAS, namespace, obj))

    def add_scaled_object(
        self,
        namespace: str,
        name: str,
        target_name: str,
        *,
        target_kind: str = "Deployment",
        min_replica_count: int | None = None,
        max_replica_count: int | None = None,
        annotations: dict[str, str] | None = None,
    ) -> JsonObj:
        """Create a KEDA ScaledObject for a workload; its HPA ``keda-hpa-<name>`` follows."""
        obj = new_object(name, namespace, {})
        if annotations:
            obj["metadata"]["annotations"] = dict(annotations)
        obj["spec"] = {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": target_kind, "name": target_name},
            "triggers": [
                {
                    "type": "prometheus",
                    "metadata": {
                        "serverAddress": "http://prometheus:9090",
                        "query": "sum(rate(nv_inference_request_success[1m]))",
                        "threshold": "10",
                    },
                }
            ],
        }
        if min_replica_count is not None:
            obj["spec"]["minReplicaCount"] = min_replica_count
        if max_replica_count is not None:
            obj["spec"]["maxReplicaCount"] = max_replica_count
        with self._store.lock:
            self.add_namespace(namespace)
            self._store.create(SCALED_OBJECTS, namespace, obj)
            self._controllers.keda_sync(namespace, name)
            return copy.deepcopy(self._store.require(SCALED_OBJECTS, namespace, name))

    def set_hpa_status(self, namespace: str, name: str, *, current: int, desired: int) -> JsonObj:
        """Set an HPA's observed current/desired replicas (e.g. desired > current: HPA lag)."""
        with self._store.lock:
            hpa = self._store.require(HPAS, namespace, name)
            hpa["status"] = {
                **hpa.get("status", {}),
                "currentReplicas": current,
                "desiredReplicas": desired,
            }
            return copy.deepcopy(self._store.update(HPAS, namespace, hpa))

    def get_object(self, kind: str, namespace: str, name: str) -> JsonObj | None:
        """Return a copy of a stored object by kind (``Deployment``, ``Pod``, ...), or None."""
        rtype = type_of_kind(kind)
        with self._store.lock:
            obj = self._store.get(rtype, namespace if rtype.namespaced else "", name)
            return copy.deepcopy(obj) if obj else None

    def list_objects(
        self, kind: str, namespace: str | None = None, label_selector: str = ""
    ) -> list[JsonObj]:
        """Return copies of stored objects of a kind, optionally filtered."""
        rtype = type_of_kind(kind)
        with self._store.lock:
            return self._store.select(rtype, matcher(None, label_selector), namespace)

    def replicas(self, kind: str, namespace: str, name: str) -> int:
        """Return ``spec.replicas`` of a workload (raises KeyError if it does not exist)."""
        obj = self.get_object(kind, namespace, name)
        if obj is None:
            raise KeyError(f"{kind} {namespace}/{name} does not exist")
        return int(obj["spec"]["replicas"])

    @property
    def resource_version(self) -> int:
        """The current cluster-wide resourceVersion."""
        return self._store.rv
