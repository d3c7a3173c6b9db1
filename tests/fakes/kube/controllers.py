"""The tiny controllers: workloads own pods, HPAs keep their targets, KEDA owns its HPAs."""

from __future__ import annotations

import copy
import hashlib
import json
import uuid

from tests.fakes.kube.objects import new_object
from tests.fakes.kube.pods import Owner, PodFactory, owner_of, pod_ready
from tests.fakes.kube.resources import (
    DEPLOYMENTS,
    HPAS,
    PODS,
    REPLICASETS,
    SCALED_OBJECTS,
    STATEFULSETS,
    WORKLOADS,
    JsonObj,
    ResourceType,
    workload_type,
)
from tests.fakes.kube.store import Store

# How the Deployment controller numbers its ReplicaSets.
REVISION_ANNOTATION = "deployment.kubernetes.io/revision"


def _revision(rs: JsonObj) -> int:
    text = str((rs["metadata"].get("annotations") or {}).get(REVISION_ANNOTATION) or "0")
    return int(text) if text.isdigit() else 0


def _same_template(rs: JsonObj, template: JsonObj) -> bool:
    """Whether a ReplicaSet runs this pod template (its own pod-template-hash label aside)."""
    mine = copy.deepcopy(rs["spec"].get("template") or {})
    labels = (mine.get("metadata") or {}).get("labels") or {}
    labels.pop("pod-template-hash", None)
    theirs = copy.deepcopy(template)
    theirs.setdefault("metadata", {}).setdefault("labels", {})
    mine.setdefault("metadata", {}).setdefault("labels", {})
    return bool(mine == theirs)


class Controllers:
    """Runs synchronously after each write, with the store's lock held.

    Scaling a Deployment or StatefulSet creates or deletes its pods (so a watch sees them come
    and go) and refreshes its status; an HPA keeps its target within
    ``[minReplicas, maxReplicas]`` and reports the target's replicas. A KEDA ScaledObject
    keeps an HPA of its own (``keda-hpa-<name>``, owned by it) at its min and max replica
    counts and, as KEDA does, puts back any edit made to that HPA directly.
    """

    def __init__(self, store: Store, pods: PodFactory) -> None:
        self.store = store
        self.pods = pods
        self.new_pod_phase = "Running"
        self.hpa_enabled = True

    def after_write(self, rtype: ResourceType, namespace: str, name: str) -> None:
        """React to a create or update of an object through the API."""
        if rtype in WORKLOADS:
            self.reconcile(rtype, namespace, name)
        elif rtype is SCALED_OBJECTS:
            self.keda_sync(namespace, name)
        elif rtype is HPAS:
            hpa = self.store.objects[(rtype.key, namespace, name)]
            owner = keda_owner_name(hpa)
            if owner is not None:
                self.keda_sync(namespace, owner)  # KEDA reverts edits to the HPA it owns
                return
            ref = hpa["spec"]["scaleTargetRef"]
            self.sync_hpas(namespace, ref.get("kind", ""), ref.get("name", ""))

    def pod_deleted(self, namespace: str, pod: JsonObj) -> None:
        """Replace a deleted pod if its workload now has too few, as a ReplicaSet would."""
        owner = owner_of(pod)
        if owner:
            kind, _, name = owner.partition("/")
            self.reconcile(workload_type(kind), namespace, name)

    def owned_pods(self, namespace: str, owner_id: str) -> list[JsonObj]:
        """Return the stored pods of a workload (``Kind/name``), oldest first."""
        return [
            o
            for (k, ns, _), o in sorted(
                self.store.objects.items(), key=lambda kv: str(kv[1]["metadata"]["uid"])
            )
            if k == PODS.key and ns == namespace and owner_of(o) == owner_id
        ]

    def reconcile(self, rtype: ResourceType, namespace: str, name: str) -> None:
        """Create or delete pods so a workload has ``spec.replicas`` of them, then set status."""
        wl = self.store.get(rtype, namespace, name)
        if wl is None:
            return
        owner_id = f"{rtype.kind}/{name}"
        want = int(wl["spec"].get("replicas", 1))
        labels = dict((wl["spec"].get("template", {}).get("metadata") or {}).get("labels") or {})
        pods = self.owned_pods(namespace, owner_id)
        if rtype is DEPLOYMENTS:
            ref_kind = "ReplicaSet"
            ref_name, ref_uid, labels = self.rollout(namespace, wl, labels, want)
            # A new revision replaces the old one's pods (as a Recreate strategy would).
            for p in pods:
                refs = p["metadata"].get("ownerReferences") or [{}]
                if refs[0].get("name") != ref_name:
                    self.store.delete(PODS, namespace, p["metadata"]["name"])
            pods = self.owned_pods(namespace, owner_id)
        else:
            ref_kind, ref_name = "StatefulSet", name
            ref_uid = wl["metadata"]["uid"]
        owner = Owner(
            {
                "apiVersion": "apps/v1",
                "kind": ref_kind,
                "name": ref_name,
                "uid": ref_uid,
                "controller": True,
                "blockOwnerDeletion": True,
            },
            owner_id,
        )

        def spawn(pod_name: str, pod_labels: dict[str, str], node: str) -> None:
            pod = self.pods.pod(
                namespace,
                pod_name,
                pod_labels,
                phase=self.new_pod_phase,
                ready=None,
                node=node,
                owner=owner,
            )
            self.store.create(PODS, namespace, pod)

        if rtype is STATEFULSETS:
            have = {p["metadata"]["name"] for p in pods}
            for i in range(want):
                if f"{name}-{i}" not in have:
                    spawn(
                        f"{name}-{i}",
                        {**labels, "apps.kubernetes.io/pod-index": str(i)},
                        f"gpu-node-{i % 3 + 1}",
                    )
            for p in pods:
                if int(p["metadata"]["name"].rsplit("-", 1)[1]) >= want:
                    self.store.delete(PODS, namespace, p["metadata"]["name"])
        else:
            for _ in range(want - len(pods)):
                suffix = uuid.uuid4().hex[:5]
                spawn(f"{ref_name}-{suffix}", labels, self.pods.next_node())
            # A ReplicaSet scales down the newest pods first.
            for p in reversed(pods[want:] if len(pods) > want else []):
                self.store.delete(PODS, namespace, p["metadata"]["name"])
        self.refresh_workload_status(namespace, only=(rtype, name))

    def rollout(
        self, namespace: str, deployment: JsonObj, labels: dict[str, str], want: int
    ) -> tuple[str, str, dict[str, str]]:
        """Keep one ReplicaSet per pod template of a Deployment, numbered as its revisions.

        The ReplicaSet whose template is the Deployment's runs ``want`` pods; a template
        not seen before makes a new ReplicaSet with the next ``deployment.kubernetes.io/
        revision``, and the older ones are scaled to 0 (and kept, as revision history).
        Returns the current ReplicaSet's name and uid and its pods' labels.
        """
        name = deployment["metadata"]["name"]
        template = deployment["spec"].get("template") or {}
        owned = [
            rs
            for (k, ns, _), rs in self.store.objects.items()
            if k == REPLICASETS.key
            and ns == namespace
            and any(
                r.get("kind") == "Deployment" and r.get("name") == name
                for r in rs["metadata"].get("ownerReferences") or []
            )
        ]
        current = next((rs for rs in owned if _same_template(rs, template)), None)
        if current is None:
            # The first ReplicaSet's name depends on the Deployment's only, as it always did.
            seed = f"{namespace}/{name}" + (json.dumps(template, sort_keys=True) if owned else "")
            tmpl_hash = hashlib.sha256(seed.encode()).hexdigest()[:10]
            revision = 1 + max((_revision(rs) for rs in owned), default=0)
        else:
            tmpl_hash = str(current["metadata"]["labels"].get("pod-template-hash") or "")
            revision = _revision(current)
        labels = {**labels, "pod-template-hash": tmpl_hash}
        rs_name = f"{name}-{tmpl_hash}"
        for rs in owned:
            if rs["metadata"]["name"] != rs_name and rs["spec"].get("replicas"):
                old = copy.deepcopy(rs)
                old["spec"]["replicas"] = 0
                self.store.update(REPLICASETS, namespace, old)
        uid = self.replicaset(namespace, deployment, rs_name, labels, want, template, revision)
        return rs_name, uid, labels

    def replicaset(  # noqa: PLR0917 - one ReplicaSet's fields, as the Deployment gives them
        self,
        namespace: str,
        deployment: JsonObj,
        name: str,
        labels: dict[str, str],
        want: int,
        template: JsonObj | None = None,
        revision: int = 1,
    ) -> str:
        """Keep one ReplicaSet of the Deployment, owned by it, at ``want``; return its uid."""
        rs = self.store.get(REPLICASETS, namespace, name)
        if rs is None:
            rs = new_object(name, namespace, labels)
            rs["metadata"]["ownerReferences"] = [
                {
                    "apiVersion": "apps/v1",
                    "kind": "Deployment",
                    "name": deployment["metadata"]["name"],
                    "uid": deployment["metadata"]["uid"],
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ]
            body = copy.deepcopy(template or {})
            body["metadata"] = {**(body.get("metadata") or {}), "labels": dict(labels)}
            body.setdefault("spec", {"containers": []})
            rs["metadata"]["annotations"] = {REVISION_ANNOTATION: str(revision)}
            rs["spec"] = {
                "replicas": want,
                "selector": {"matchLabels": dict(labels)},
                "template": body,
            }
            rs = self.store.put(REPLICASETS, namespace, rs)
        elif rs["spec"].get("replicas") != want:
            new = copy.deepcopy(rs)
            new["spec"]["replicas"] = want
            rs = self.store.update(REPLICASETS, namespace, new)
        return str(rs["metadata"]["uid"])

    def refresh_workload_status(
        self, namespace: str, only: tuple[ResourceType, str] | None = None
    ) -> None:
        """Recount the pods of the workloads in ``namespace`` (or just ``only``) into status."""
        targets = (
            [only]
            if only
            else [
                (r, n)
                for (k, ns, n) in list(self.store.objects)
                for r in WORKLOADS
                if k == r.key and ns == namespace
            ]
        )
        for rtype, name in targets:
            wl = self.store.get(rtype, namespace, name)
            if wl is None:
                continue
            pods = self.owned_pods(namespace, f"{rtype.kind}/{name}")
            ready = sum(1 for p in pods if pod_ready(p))
            status = {
                "observedGeneration": wl["metadata"].get("generation", 1),
                "replicas": len(pods),
                "readyReplicas": ready,
                "availableReplicas": ready,
                "updatedReplicas": len(pods),
                "currentReplicas": len(pods),
            }
            self.store.set_status(rtype, namespace, name, status)
            self.sync_hpas(namespace, rtype.kind, name)

    def sync_hpas(self, namespace: str, kind: str, name: str) -> None:
        """Mirror an HPA controller: keep the target within bounds and report its replicas."""
        if not self.hpa_enabled:
            return
        for (k, ns, hname), hpa in list(self.store.objects.items()):
            ref = hpa.get("spec", {}).get("scaleTargetRef", {}) if k == HPAS.key else {}
            if ns != namespace or ref.get("kind") != kind or ref.get("name") != name:
                continue
            rtype = workload_type(kind)
            wl = self.store.get(rtype, namespace, name)
            if wl is None:
                continue
            cur = int(wl["spec"].get("replicas", 1))
            lo, hi = int(hpa["spec"].get("minReplicas", 1)), int(hpa["spec"]["maxReplicas"])
            desired = min(max(cur, lo), hi)
            if desired != cur:
                new_wl = copy.deepcopy(wl)
                new_wl["spec"]["replicas"] = desired
                self.store.update(rtype, namespace, new_wl)
                self.reconcile(rtype, namespace, name)
                return
            status = {**hpa.get("status", {}), "currentReplicas": cur, "desiredReplicas": desired}
            self.store.set_status(HPAS, namespace, hname, status)

    def keda_sync(self, namespace: str, name: str) -> None:
        """Do what KEDA's operator does for a ScaledObject: own an HPA that mirrors it."""
        so = self.store.get(SCALED_OBJECTS, namespace, name)
        if so is None:
            return
        spec = so.get("spec") or {}
        ref = spec.get("scaleTargetRef") or {}
        advanced = (spec.get("advanced") or {}).get("horizontalPodAutoscalerConfig") or {}
        hpa_name = advanced.get("name") or f"keda-hpa-{name}"
        low = spec.get("minReplicaCount")
        kind = ref.get("kind") or "Deployment"
        hpa_spec = {
            "scaleTargetRef": {
                "apiVersion": ref.get("apiVersion") or "apps/v1",
                "kind": kind,
                "name": ref.get("name", ""),
            },
            # An HPA cannot go below one; KEDA scales to zero itself when minReplicaCount is 0.
            "minReplicas": low if isinstance(low, int) and low > 0 else 1,
            "maxReplicas": spec.get("maxReplicaCount") or 100,
            "metrics": [
                {
                    "type": "External",
                    "external": {
                        "metric": {"name": "s0-prometheus"},
                        "target": {"type": "AverageValue", "averageValue": "10"},
                    },
                }
            ],
        }
        hpa = self.store.get(HPAS, namespace, hpa_name)
        if hpa is None:
            hpa = new_object(
                hpa_name,
                namespace,
                {
                    KEDA_NAME_LABEL: name,
                    "app.kubernetes.io/managed-by": "keda-operator",
                    "app.kubernetes.io/name": hpa_name,
                    "app.kubernetes.io/part-of": name,
                },
            )
            hpa["metadata"]["ownerReferences"] = [
                {
                    "apiVersion": SCALED_OBJECTS.api_version,
                    "kind": "ScaledObject",
                    "name": name,
                    "uid": so["metadata"]["uid"],
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ]
            hpa["spec"] = hpa_spec
            hpa["status"] = {"currentReplicas": 0, "desiredReplicas": 0}
            self.store.put(HPAS, namespace, hpa)
        elif hpa.get("spec") != hpa_spec:
            new = copy.deepcopy(hpa)
            new["spec"] = hpa_spec
            self.store.update(HPAS, namespace, new)
        self.store.set_status(
            SCALED_OBJECTS,
            namespace,
            name,
            {
                "hpaName": hpa_name,
                "scaleTargetKind": f"apps/v1.{kind}",
                "conditions": [
                    {"type": "Ready", "status": "True", "reason": "ScaledObjectReady"},
                    {"type": "Active", "status": "True", "reason": "ScalerActive"},
                ],
            },
        )
        self.sync_hpas(namespace, kind, ref.get("name", ""))


KEDA_NAME_LABEL = "scaledobject.keda.sh/name"


def keda_owner_name(hpa: JsonObj) -> str | None:
    """Return the ScaledObject that controls an HPA, or None for an HPA no KEDA made."""
    for ref in hpa.get("metadata", {}).get("ownerReferences") or []:
        if ref.get("kind") == "ScaledObject" and ref.get("controller"):
            return str(ref.get("name"))
    return None
