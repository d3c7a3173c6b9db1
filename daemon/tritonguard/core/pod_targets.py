"""Pods to scrape targets: named ports or annotations, readiness, node and owner chain as labels.

Pure: the runtime hands in pods as the Kubernetes API reported them (and the owner of any
ReplicaSet, which it reads from the API) and gets back what to scrape, or why a pod is not
scraped. Nothing here talks to the network.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

ANNOTATION_PREFIX = "tritonguard.io/"
SCRAPE_ANNOTATION = ANNOTATION_PREFIX + "scrape"
METRICS_PORT_ANNOTATION = ANNOTATION_PREFIX + "metrics-port"
HTTP_PORT_ANNOTATION = ANNOTATION_PREFIX + "http-port"
METRICS_PATH_ANNOTATION = ANNOTATION_PREFIX + "metrics-path"

# The owner kinds that become labels, as kube-state-metrics and Prometheus name them.
OWNER_LABELS: Mapping[str, str] = {
    "ReplicaSet": "replicaset",
    "Deployment": "deployment",
    "StatefulSet": "statefulset",
    "DaemonSet": "daemonset",
}


@dataclass(frozen=True, slots=True)
class OwnerRef:
    """One ``ownerReference``: who owns an object, and whether it is its controller."""

    kind: str
    name: str
    controller: bool = False


@dataclass(frozen=True, slots=True)
class ContainerPort:
    """A port a container declares; only named ones can be looked up by name."""

    container: str
    name: str
    port: int


@dataclass(frozen=True)
class Pod:
    """The parts of a pod tritonguard follows (readiness, placement, ports, ownership)."""

    namespace: str
    name: str
    phase: str
    ready: bool
    labels: Mapping[str, str]
    node: str | None
    ip: str | None
    resource_version: str
    owner_kind: str | None = None
    owner_name: str | None = None
    uid: str = ""
    annotations: Mapping[str, str] = field(default_factory=dict)
    ports: tuple[ContainerPort, ...] = ()
    owners: tuple[OwnerRef, ...] = ()
    deleting: bool = False
    # ConfigMaps mounted as volumes (directly or projected): a model repository, say.
    config_maps: tuple[str, ...] = ()

    @property
    def controller(self) -> OwnerRef | None:
        """Return the owner that controls the pod (else its first owner), or None."""
        for owner in self.owners:
            if owner.controller:
                return owner
        return self.owners[0] if self.owners else None


@dataclass(frozen=True, slots=True)
class DiscoveryRules:
    """Which ports and path to use when a pod's annotations do not say."""

    metrics_port: str = "metrics"
    http_port: str = "http"
    metrics_path: str = "/metrics"


@dataclass(frozen=True, slots=True)
class PodTarget:
    """A pod to scrape, and where its Triton HTTP API is (None: no such port)."""

    namespace: str
    pod: str
    uid: str
    node: str
    metrics_url: str
    triton_url: str | None
    owners: tuple[OwnerRef, ...] = ()

    @property
    def name(self) -> str:
        """Return the target's name in logs and the daemon's metrics: ``namespace/pod``."""
        return f"{self.namespace}/{self.pod}"

    def labels(self) -> tuple[tuple[str, str], ...]:
        """Return the labels added to the pod's series beyond namespace, pod and instance."""
        out: list[tuple[str, str]] = []
        if self.node:
            out.append(("node", self.node))
        for owner in self.owners:
            name = OWNER_LABELS.get(owner.kind)
            if name is not None and owner.name:
                out.append((name, owner.name))
        return tuple(out)

    @property
    def workload(self) -> OwnerRef | None:
        """Return the top of the owner chain (the Deployment or StatefulSet), or None."""
        return self.owners[-1] if self.owners else None


@dataclass(frozen=True, slots=True)
class Skipped:
    """A pod that matched the selector but is not scraped, and why (for the log)."""

    namespace: str
    pod: str
    reason: str


def replicaset_to_resolve(pod: Pod) -> str | None:
    """Return the ReplicaSet whose owner must be read to finish the pod's chain, or None."""
    owner = pod.controller
    return owner.name if owner is not None and owner.kind == "ReplicaSet" else None


def owner_chain(pod: Pod, replicaset_owner: OwnerRef | None = None) -> tuple[OwnerRef, ...]:
    """Return the pod's owners from nearest to the workload: ReplicaSet → Deployment, or one.

    ``replicaset_owner`` is the owner the API reported for the pod's ReplicaSet (None: a
    ReplicaSet of its own, or not known); it is ignored for pods no ReplicaSet owns.
    """
    owner = pod.controller
    if owner is None:
        return ()
    if owner.kind == "ReplicaSet" and replicaset_owner is not None:
        return (owner, replicaset_owner)
    return (owner,)


def _port(value: str, pod: Pod) -> int | str:
    """Return the port a setting or annotation means (a number, or a container port's name).

    Gives a reason (str) when the value names no declared port or is no valid number.
    """
    text = value.strip()
    if text.isdigit():
        number = int(text)
        return number if 0 < number < 65536 else f"port {text} is out of range"
    for port in pod.ports:
        if port.name == text:
            return port.port
    return f"no container port named {text!r}"


def _host(ip: str) -> str:
    return f"[{ip}]" if ":" in ip else ip


def pod_target(
    pod: Pod, rules: DiscoveryRules, owners: tuple[OwnerRef, ...] = ()
) -> PodTarget | Skipped:
    """Map one pod to its scrape target, or say why it is not one.

    A pod is scraped only while it is Running, ready, not being deleted and has an IP: a pod
    starting up or shutting down has no metrics worth reading, and its absence makes its series
    go stale rather than read as zero. Annotations override the configured port names:
    ``tritonguard.io/metrics-port`` and ``tritonguard.io/http-port`` (a name or a number),
    ``tritonguard.io/metrics-path``; ``tritonguard.io/scrape: "false"`` opts a pod out.
    """

    def skip(reason: str) -> Skipped:
        return Skipped(pod.namespace, pod.name, reason)

    notes = pod.annotations
    if notes.get(SCRAPE_ANNOTATION, "").strip().lower() == "false":
        return skip(f"annotation {SCRAPE_ANNOTATION} is false")
    if pod.deleting:
        return skip("the pod is being deleted")
    if pod.phase != "Running":
        return skip(f"phase is {pod.phase}, not Running")
    if not pod.ready:
        return skip("the pod is not ready")
    if not pod.ip:
        return skip("the pod has no IP yet")
    metrics_value = notes.get(METRICS_PORT_ANNOTATION) or rules.metrics_port
    metrics_port = _port(metrics_value, pod)
    if isinstance(metrics_port, str):
        where = METRICS_PORT_ANNOTATION if METRICS_PORT_ANNOTATION in notes else "metrics_port"
        return skip(f"metrics port: {metrics_port} ({where}); name the port or annotate the pod")
    path = notes.get(METRICS_PATH_ANNOTATION) or rules.metrics_path
    if not path.startswith("/"):
        path = "/" + path
    host = _host(pod.ip)
    http_port = _port(notes.get(HTTP_PORT_ANNOTATION) or rules.http_port, pod)
    return PodTarget(
        namespace=pod.namespace,
        pod=pod.name,
        uid=pod.uid,
        node=pod.node or "",
        metrics_url=f"http://{host}:{metrics_port}{path}",
        # Without an HTTP port the pod is still scraped; only actions and configs need the API.
        triton_url=None if isinstance(http_port, str) else f"http://{host}:{http_port}",
        owners=owners,
    )


# The owners tritonguard scales: the controller at the top of a pod's chain.
SCALABLE_KINDS = frozenset({"Deployment", "StatefulSet"})


def workload_of(chain: tuple[OwnerRef, ...]) -> OwnerRef | None:
    """Return the Deployment or StatefulSet at the top of an owner chain, or None.

    A chain ending at a ReplicaSet (its owner unknown, or none), a DaemonSet or a Job names
    nothing to scale.
    """
    top = chain[-1] if chain else None
    return top if top is not None and top.kind in SCALABLE_KINDS else None


# The label the StatefulSet controller gives each pod: the name of its ControllerRevision.
REVISION_HASH_LABEL = "controller-revision-hash"


@dataclass(frozen=True, slots=True)
class PodRevision:
    """Which revision of which workload a pod runs: a ReplicaSet or a ControllerRevision."""

    namespace: str
    kind: str
    workload: str
    name: str


def pod_revision(pod: Pod, chain: tuple[OwnerRef, ...]) -> PodRevision | None:
    """Return the workload revision a pod runs, from its owner chain (or label), or None.

    A Deployment's pod runs the revision of the ReplicaSet that owns it; a StatefulSet's pod
    says its ControllerRevision in the ``controller-revision-hash`` label.
    """
    top = workload_of(chain)
    if top is None:
        return None
    if top.kind == "Deployment" and chain[0].kind == "ReplicaSet":
        return PodRevision(pod.namespace, "Deployment", top.name, chain[0].name)
    label = pod.labels.get(REVISION_HASH_LABEL, "")
    if top.kind == "StatefulSet" and label:
        return PodRevision(pod.namespace, "StatefulSet", top.name, label)
    return None
