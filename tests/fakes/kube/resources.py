"""The resource table: which kinds the fake serves, under which API group and path."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

JsonObj = dict[str, Any]


@dataclass(frozen=True)
class ResourceType:
    """One served resource: where it lives in the API and how it is named."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool = True
    short_names: tuple[str, ...] = ()
    scalable: bool = False
    categories: tuple[str, ...] = ()
    # Writes to the main resource keep the stored status; only ``/status`` changes it.
    status_via_subresource: bool = False

    @property
    def api_version(self) -> str:
        """``apiVersion`` of objects of this type (``v1`` for the core group)."""
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def key(self) -> str:
        """Unique key of the type in the store."""
        return f"{self.api_version}/{self.plural}"

    @property
    def qualified(self) -> str:
        """``plural.group`` as the real server spells it in messages (``deployments.apps``)."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    @property
    def singular(self) -> str:
        """Lower-case singular name, used by discovery."""
        return self.kind.lower()


PODS = ResourceType(
    "",
    "v1",
    "pods",
    "Pod",
    short_names=("po",),
    categories=("all",),
    status_via_subresource=True,
)
EVENTS = ResourceType("", "v1", "events", "Event", short_names=("ev",))
# A model repository mounted into Triton pods, say; ``data`` and ``binaryData`` are stored as sent.
CONFIG_MAPS = ResourceType("", "v1", "configmaps", "ConfigMap", short_names=("cm",))
NAMESPACES = ResourceType(
    "", "v1", "namespaces", "Namespace", namespaced=False, short_names=("ns",)
)
DEPLOYMENTS = ResourceType(
    "apps",
    "v1",
    "deployments",
    "Deployment",
    short_names=("deploy",),
    scalable=True,
    categories=("all",),
    status_via_subresource=True,
)
STATEFULSETS = ResourceType(
    "apps",
    "v1",
    "statefulsets",
    "StatefulSet",
    short_names=("sts",),
    scalable=True,
    categories=("all",),
    status_via_subresource=True,
)
# Read-only here: the Deployment controller keeps one per Deployment (the pods' owner).
REPLICASETS = ResourceType(
    "apps",
    "v1",
    "replicasets",
    "ReplicaSet",
    short_names=("rs",),
    status_via_subresource=True,
)
# A StatefulSet's revisions: its pod template, stored as a patch, and a number.
CONTROLLER_REVISIONS = ResourceType("apps", "v1", "controllerrevisions", "ControllerRevision")
HPAS = ResourceType(
    "autoscaling",
    "v2",
    "horizontalpodautoscalers",
    "HorizontalPodAutoscaler",
    short_names=("hpa",),
    categories=("all",),
    status_via_subresource=True,
)
LEASES = ResourceType("coordination.k8s.io", "v1", "leases", "Lease")
# events.k8s.io/v1 is another view of the core Events, as on the real server: one storage,
# converted on the way in and out (tests/fakes/kube/events_v1.py), so kubectl sees both.
EVENTS_V1 = ResourceType("events.k8s.io", "v1", "events", "Event", short_names=("ev",))
# KEDA's custom resource (its CRD, as installed by KEDA 2.x): it owns the HPA it creates.
SCALED_OBJECTS = ResourceType(
    "keda.sh",
    "v1alpha1",
    "scaledobjects",
    "ScaledObject",
    short_names=("so",),
    status_via_subresource=True,
)

RESOURCES: tuple[ResourceType, ...] = (
    PODS,
    EVENTS,
    CONFIG_MAPS,
    NAMESPACES,
    DEPLOYMENTS,
    STATEFULSETS,
    REPLICASETS,
    CONTROLLER_REVISIONS,
    HPAS,
    LEASES,
    EVENTS_V1,
    SCALED_OBJECTS,
)
# The kinds whose pods the fake's controller creates and deletes.
WORKLOADS: tuple[ResourceType, ...] = (DEPLOYMENTS, STATEFULSETS)

BY_PATH: dict[tuple[str, str, str], ResourceType] = {
    (r.group, r.version, r.plural): r for r in RESOURCES
}
# Kubernetes serves autoscaling/v1 too; kubectl and the python client only need v2 here.
GROUP_VERSIONS: dict[str, list[str]] = {}
for _r in RESOURCES:
    if _r.group and _r.version not in GROUP_VERSIONS.setdefault(_r.group, []):
        GROUP_VERSIONS[_r.group].append(_r.version)


def type_of_kind(kind: str) -> ResourceType:
    """Find a type by kind, plural, singular or short name (``Deployment``, ``pods``, ``hpa``)."""
    for r in RESOURCES:
        if kind in (r.kind, r.plural, r.singular, *r.short_names):
            return r
    raise KeyError(f"unknown kind {kind!r}")


def workload_type(kind: str) -> ResourceType:
    """Return the workload type of ``kind``: anything but ``StatefulSet`` is a Deployment."""
    return STATEFULSETS if kind == "StatefulSet" else DEPLOYMENTS
