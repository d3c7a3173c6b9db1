"""Pods as the fake's kubelet would report them: status, readiness, IPs, nodes and owners."""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from tests.fakes.kube.objects import new_object, now_iso
from tests.fakes.kube.resources import JsonObj

IMAGE = "nvcr.io/nvidia/tritonserver"
# The fake keeps no ReplicaSets, so a pod names its workload here to find it again.
OWNER_ANNOTATION = "fake.kube/owner"


@dataclass(frozen=True)
class Owner:
    """The workload a pod belongs to: its ``ownerReference`` and ``Kind/name``."""

    ref: JsonObj
    id: str


def container(ports: dict[str, int] | None = None) -> JsonObj:
    """Return the single container every pod and pod template of the fake runs.

    ``ports`` names its container ports (``{"http": 8000, "metrics": 8002}``).
    """
    out: JsonObj = {"name": "main", "image": IMAGE}
    if ports:
        out["ports"] = [
            {"name": name, "containerPort": port, "protocol": "TCP"} for name, port in ports.items()
        ]
    return out


def pod_ready(pod: JsonObj) -> bool:
    """Tell whether a pod's ``Ready`` condition is ``True``."""
    for cond in pod.get("status", {}).get("conditions") or []:
        if cond.get("type") == "Ready":
            return bool(cond.get("status") == "True")
    return False


def owner_of(pod: JsonObj) -> str:
    """Return ``Kind/name`` of the workload that owns a pod, or ``""`` for a bare pod."""
    return str((pod["metadata"].get("annotations") or {}).get(OWNER_ANNOTATION) or "")


class PodFactory:
    """Builds pods; one counter numbers their IPs and spreads them over three nodes."""

    def __init__(self) -> None:
        self._seq = itertools.count(1)

    def next_node(self) -> str:
        """Return a node for the next pod, round-robin over ``gpu-node-1..3``."""
        return f"gpu-node-{next(self._seq) % 3 + 1}"

    def status(self, phase: str, ready: bool | None, ip: str | None) -> JsonObj:
        """Return a pod status in ``phase``; Running means ready unless ``ready`` says not."""
        is_ready = (phase == "Running") if ready is None else ready
        n = next(self._seq)
        return {
            "phase": phase,
            "podIP": ip or f"10.244.{n // 250}.{n % 250 + 2}",
            "startTime": now_iso(),
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True" if is_ready else "False",
                    "lastTransitionTime": now_iso(),
                },
            ],
            "containerStatuses": [
                {
                    "name": "main",
                    "ready": is_ready,
                    "restartCount": 0,
                    "image": IMAGE,
                    "imageID": "",
                    "started": phase == "Running",
                    "state": {"running": {"startedAt": now_iso()}}
                    if phase == "Running"
                    else {"waiting": {"reason": "ContainerCreating"}},
                },
            ],
        }

    def pod(
        self,
        namespace: str,
        name: str,
        labels: dict[str, str],
        *,
        phase: str,
        ready: bool | None,
        node: str,
        owner: Owner | None = None,
        ip: str | None = None,
        ports: dict[str, int] | None = None,
        annotations: dict[str, str] | None = None,
    ) -> JsonObj:
        """Return a new pod on ``node``, owned by ``owner`` if given.

        ``ip`` is its pod IP (else one is made up), ``ports`` its named container ports.
        """
        pod = new_object(name, namespace, labels)
        notes = dict(annotations or {})
        if owner is not None:
            pod["metadata"]["ownerReferences"] = [owner.ref]
            notes[OWNER_ANNOTATION] = owner.id
        if notes:
            pod["metadata"]["annotations"] = notes
        pod["spec"] = {"nodeName": node, "containers": [container(ports)]}
        pod["status"] = self.status(phase, ready, ip)
        return pod
