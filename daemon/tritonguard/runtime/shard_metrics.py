"""The shard's own metrics: which shard this daemon is, and how much of the fleet it owns."""

from __future__ import annotations

from collections.abc import Iterable

from prometheus_client import CollectorRegistry, Gauge

from tritonguard.core.shards import Shard

# Subject keys as the engine holds them: (namespace, pod, model); pod "" is a model's fleet.
SubjectKey = tuple[str, str, str]


class ShardMetrics:
    """Gauges saying the shard, the subjects it evaluates and the pods each source brought.

    Summed over every shard, ``tritonguard_shard_pods{owner="this"}`` is the fleet: a pod
    counted by two shards, or by none, shows a disagreement at once.
    """

    def __init__(self, registry: CollectorRegistry, shard: Shard) -> None:
        self.shard = shard
        info = Gauge(
            "tritonguard_shard",
            "1, labelled with this daemon's shard index and the shard count (1: unsharded).",
            ["index", "count"],
            registry=registry,
        )
        info.labels(str(shard.index), str(shard.count)).set(1)
        self.subjects = Gauge(
            "tritonguard_shard_subjects",
            "Subjects (namespace, pod, model) of this shard the last evaluation diagnosed.",
            registry=registry,
        )
        self.pods = Gauge(
            "tritonguard_shard_pods",
            "Pods whose series the last poll of a source brought: owned by this shard "
            '(owner="this") or left to another shard (owner="other").',
            ["source", "owner"],
            registry=registry,
        )

    def observe_subjects(self, keys: Iterable[SubjectKey]) -> None:
        """Count the pod-level subjects the engine diagnosed."""
        self.subjects.set(sum(1 for _, pod, _ in keys if pod))

    def observe_pods(self, source: str, owned: int, elsewhere: int) -> None:
        """Export one source's pods on this shard and on others."""
        self.pods.labels(source, "this").set(owned)
        self.pods.labels(source, "other").set(elsewhere)
