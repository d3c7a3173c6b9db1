"""What the runtime and actions need from Triton, Kubernetes and Slack: typed Protocols, no SDKs.

Each protocol is declared once, here, and the concrete client of ``triton_api``,
``kubernetes_api`` and ``slack_api`` subclasses it, so mypy checks every client against it and
every call an action or the leader elector makes against the client. This module imports no SDK:
actions and the playbook stage depend on it without loading aiohttp, kubernetes or slack_sdk,
and tests can hand in fakes that satisfy the same protocol.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

WorkloadKind = Literal["Deployment", "StatefulSet"]


@dataclass(frozen=True)
class Hpa:
    """The parts of an autoscaling/v2 HorizontalPodAutoscaler tritonguard reads."""

    namespace: str
    name: str
    target_kind: str
    target_name: str
    min_replicas: int
    max_replicas: int
    current_replicas: int | None
    desired_replicas: int | None
    # The KEDA ScaledObject that owns this HPA (KEDA reverts edits made to it), or None.
    scaled_object: str | None = None


@dataclass(frozen=True)
class Workload:
    """The Deployment or StatefulSet a pod belongs to, as its owner chain names it."""

    kind: WorkloadKind
    name: str


@dataclass(frozen=True)
class ScaledObject:
    """The parts of a KEDA keda.sh/v1alpha1 ScaledObject tritonguard reads.

    ``min_replica_count`` is None when the field is absent (KEDA then uses 0).
    """

    namespace: str
    name: str
    target_kind: str
    target_name: str
    min_replica_count: int | None
    max_replica_count: int | None
    # Why KEDA does not scale it now (a paused-replicas annotation), or "".
    paused: str = ""


@dataclass(frozen=True)
class PostedMessage:
    """Where a message landed: the channel ID and its ``ts`` (needed to update or thread it)."""

    ts: str
    channel: str


class TritonApi(Protocol):
    """Triton's model and repository API (``tritonguard.clients.triton_api.TritonClient``)."""

    async def model_config(self, model: str) -> dict[str, Any]:
        """Return the live model configuration."""
        ...

    async def model_metadata(self, model: str) -> dict[str, Any]:
        """Return the model metadata (inputs, outputs)."""
        ...

    async def load(
        self, model: str, config: dict[str, Any] | None = None, *, timeout_s: float = 120.0
    ) -> None:
        """Load or reload the model, optionally with a replacement configuration."""
        ...

    async def unload(self, model: str, *, timeout_s: float = 60.0) -> None:
        """Unload the model."""
        ...

    async def wait_model_ready(self, model: str, timeout_s: float = 60.0) -> None:
        """Wait until the model is ready."""
        ...

    async def infer(
        self,
        model: str,
        inputs: list[dict[str, Any]],
        *,
        binary_outputs: list[str] | None = None,
        timeout_s: float | None = None,
    ) -> dict[str, Any]:
        """Send one inference request."""
        ...


class LeaseApi(Protocol):
    """coordination.k8s.io/v1 Lease calls the leader elector makes."""

    async def read_lease(self, namespace: str, name: str) -> dict[str, Any] | None:
        """Return the lease, or None."""
        ...

    async def try_acquire_lease(
        self,
        namespace: str,
        name: str,
        holder: str,
        duration_s: int,
        annotations: Mapping[str, str] | None = None,
    ) -> bool:
        """Take or keep the lease."""
        ...

    async def renew_lease(
        self,
        namespace: str,
        name: str,
        holder: str,
        duration_s: int,
        annotations: Mapping[str, str] | None = None,
    ) -> bool:
        """Renew a held lease."""
        ...

    async def release_lease(self, namespace: str, name: str, holder: str) -> bool:
        """Give the lease up."""
        ...


class KubeApi(LeaseApi, Protocol):
    """The Kubernetes calls actions make (``kubernetes_api.KubernetesClient``), leases included."""

    async def get_scale(self, kind: WorkloadKind, namespace: str, name: str) -> int:
        """Return the workload's replica count (scale subresource)."""
        ...

    async def set_scale(self, kind: WorkloadKind, namespace: str, name: str, replicas: int) -> int:
        """Set the workload's replica count; return it."""
        ...

    async def find_hpa_for(self, kind: WorkloadKind, namespace: str, name: str) -> Hpa | None:
        """Return the HPA whose scale target is the workload, or None."""
        ...

    async def set_hpa_min_replicas(self, namespace: str, name: str, n: int) -> Hpa:
        """Set an HPA's minReplicas; return the HPA as stored."""
        ...

    async def read_hpa(self, namespace: str, name: str) -> Hpa:
        """Return one HPA by name."""
        ...

    async def workload_of_pod(self, namespace: str, pod: str) -> Workload | None:
        """Return the Deployment or StatefulSet that owns a pod, or None (a bare pod)."""
        ...

    async def read_scaled_object(self, namespace: str, name: str) -> ScaledObject:
        """Return a KEDA ScaledObject."""
        ...

    async def set_scaled_object_min(self, namespace: str, name: str, n: int | None) -> ScaledObject:
        """Set (None: remove) a ScaledObject's minReplicaCount; return it as stored."""
        ...


class SlackApi(Protocol):
    """Slack Web API calls (``tritonguard.clients.slack_api.SlackNotifier``)."""

    async def post(
        self,
        channel: str,
        text: str,
        blocks: Sequence[Mapping[str, Any]] | None = None,
        *,
        thread_ts: str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> PostedMessage:
        """Post a message and return where it landed."""
        ...

    async def update(
        self,
        message: PostedMessage,
        text: str,
        blocks: Sequence[Mapping[str, Any]] | None = None,
        *,
        metadata: Mapping[str, Any] | None = None,
    ) -> PostedMessage:
        """Replace a posted message's text and blocks."""
        ...

    async def channel_id(self, ref: str) -> str:
        """Return the ID of a channel given by ID or name."""
        ...

    async def history(
        self, channel: str, *, oldest: float | None = None, thread_ts: str | None = None
    ) -> list[dict[str, Any]]:
        """Return recent messages of a channel, or of a thread, with their metadata."""
        ...

    async def upload(
        self,
        channel: str,
        thread_ts: str,
        content: bytes,
        *,
        filename: str,
        title: str,
        comment: str = "",
    ) -> str:
        """Upload a file into a thread; return its ID."""
        ...

    async def group_members(self, group: str) -> frozenset[str]:
        """Return the user IDs of a user group."""
        ...
