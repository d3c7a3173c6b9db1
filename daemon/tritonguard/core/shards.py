"""Shard assignment: which of several daemons owns a workload, by a stable hash of its name.

Pure. Every daemon of a sharded deployment computes the same answer for the same workload, in
any process and on any Python version: the key is ``namespace/workload`` hashed with SHA-256
(never the salted built-in ``hash()``), and the shard is the key's jump consistent hash
(Lamping and Veach, 2014), so going from N to N+1 shards moves only about 1/(N+1) of the
workloads, and every pod of one workload lands on the same shard.

The workload is what owns the pod: the top of the owner chain discovery resolves (the
Deployment or StatefulSet; a ReplicaSet whose owner could not be read stands for the
Deployment its name says). Only a pod with no owner is named by its own name, read the way
the Deployment and StatefulSet controllers write pod names, so series read from Prometheus
(which carry the pod's name but seldom its owner) land on the same shard as discovery puts the
pod. Names are cut to :data:`WORKLOAD_KEY_CHARS` characters: the API server cuts generated
pod names too, and the cut prefix is what both ways of naming can agree on.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass

from tritonguard.core.pod_targets import OwnerRef
from tritonguard.core.samples import Labels, label

# A generated pod name is at most 63 characters: the API server cuts ``generateName`` to 58
# and adds 5 random ones. A Deployment's pods are ``<deployment>-<template hash, ≤10>-<5>``,
# so the first 46 characters of a Deployment's name survive in every one of its pods' names.
WORKLOAD_KEY_CHARS = 46

# The alphabet of pod-template hashes and generated suffixes (``rand.SafeEncodeString``):
# no vowels, no 0, 1 or 3, so a word in a name is seldom mistaken for either.
_SAFE = "bcdfghjklmnpqrstvwxz2456789"
_DEPLOYMENT_POD = re.compile(rf"^(?P<workload>.+)-[{_SAFE}]{{1,10}}-[{_SAFE}]{{5}}$")
_REPLICASET = re.compile(rf"^(?P<workload>.+)-[{_SAFE}]{{1,10}}$")
_STATEFUL_POD = re.compile(r"^(?P<workload>.+)-(?:0|[1-9][0-9]{0,5})$")

# Owner labels on a series, most specific last: a series that names its Deployment is keyed by
# it, as discovery keys the pod; one that only names its ReplicaSet by the Deployment the
# ReplicaSet's name says.
_WORKLOAD_LABELS = ("deployment", "statefulset", "daemonset")

# The largest shard count accepted: far above any fleet's need, and it keeps a typo
# (``shard.count: 20000``) from passing as a setting.
MAX_SHARDS = 1024


class ShardError(ValueError):
    """A shard setting that cannot work; the message says what to set."""


def check_shard(index: int, count: int) -> None:
    """Raise ShardError unless ``0 <= index < count <= MAX_SHARDS``."""
    if not 1 <= count <= MAX_SHARDS:
        raise ShardError(f"shard.count must be between 1 and {MAX_SHARDS}, got {count}")
    if not 0 <= index < count:
        raise ShardError(
            f"shard.index must be between 0 and {count - 1} (shard.count is {count}), got {index}"
        )


def _key(namespace: str, workload: str) -> int:
    digest = hashlib.sha256(f"{namespace}/{workload}".encode()).digest()
    return int.from_bytes(digest[:8], "big")


def jump_hash(key: int, buckets: int) -> int:
    """Return the jump consistent hash of a 64-bit ``key`` into ``buckets`` buckets."""
    b, j = -1, 0
    while j < buckets:
        b = j
        key = (key * 2862933555777941757 + 1) & 0xFFFFFFFFFFFFFFFF
        j = int((b + 1) * (float(1 << 31) / float((key >> 33) + 1)))
    return b


def shard_of(namespace: str, workload: str, count: int) -> int:
    """Return the shard (0 … count-1) that owns ``workload`` in ``namespace``."""
    if count <= 1:
        return 0
    return jump_hash(_key(namespace, workload[:WORKLOAD_KEY_CHARS]), count)


def workload_from_pod_name(pod: str) -> str:
    """Return the workload a controller-made pod name says; a bare pod is its own workload.

    ``triton-7d9f8c6b5-x2k4q`` → ``triton`` (a Deployment's pod), ``triton-3`` → ``triton``
    (a StatefulSet's). A name the API server cut short still yields its first
    :data:`WORKLOAD_KEY_CHARS` characters, which is all :func:`shard_of` reads.
    """
    for pattern in (_DEPLOYMENT_POD, _STATEFUL_POD):
        match = pattern.match(pod)
        if match is not None:
            return match["workload"]
    return pod


def workload_from_replicaset(name: str) -> str:
    """Return the Deployment a ReplicaSet's name says (``triton-7d9f8c6b5`` → ``triton``)."""
    match = _REPLICASET.match(name)
    return match["workload"] if match is not None else name


def workload_of_pod(owners: Sequence[OwnerRef], pod: str) -> str:
    """Return the workload that owns a pod: the top of its owner chain, else its own name.

    A chain that ends at a ReplicaSet (its owner not read, or not readable) stands for the
    Deployment the ReplicaSet's name says, so a pod keeps its shard whether or not the
    ReplicaSet's owner could be read.
    """
    if not owners:
        return workload_from_pod_name(pod)
    top = owners[-1]
    if top.kind == "ReplicaSet":
        return workload_from_replicaset(top.name)
    return top.name


def static_target_workload(
    namespace: str, pod: str, instance: str, *, has_api: bool, describes_others: bool
) -> str | None:
    """Return the workload a configured target is, or None when every shard scrapes it.

    A target naming its ``pod`` is that pod's workload; a Triton outside Kubernetes (one with
    an API URL and no pod) is its own, by ``instance``. A target that describes other pods
    (``honor_labels``: kube-state-metrics) or may be any exporter (no pod, no API) is scraped
    by every shard, and each keeps only its own series of it (:class:`SeriesFilter`).
    """
    if describes_others:
        return None
    if pod:
        return workload_from_pod_name(pod)
    return instance if has_api else None


def series_workload(name: str, labels: Labels) -> tuple[str, str] | None:
    """Return the (namespace, workload) a series is about, or None when it is shared context.

    A series about a pod (``pod``, ``exported_pod``, ``pod_name``) or a workload
    (``deployment``, ``statefulset``, ``daemonset``, ``replicaset``) belongs to that
    workload's shard. A Triton series with neither (a Triton outside Kubernetes, known by its
    ``instance``) is its own workload. Anything else (node-exporter, a GPU no pod uses,
    machine-wide cAdvisor) describes a host every shard's pods may run on, and every shard
    keeps it.
    """
    namespace = label(labels, "exported_namespace") or label(labels, "namespace")
    for owner in _WORKLOAD_LABELS:
        value = label(labels, owner)
        if value:
            return namespace, value
    replicaset = label(labels, "replicaset")
    if replicaset:
        return namespace, workload_from_replicaset(replicaset)
    pod = label(labels, "exported_pod") or label(labels, "pod") or label(labels, "pod_name")
    if pod:
        return namespace, workload_from_pod_name(pod)
    if name.startswith("nv_"):
        instance = label(labels, "instance")
        return (namespace, instance) if instance else None
    return None


@dataclass(frozen=True, slots=True)
class Shard:
    """A daemon's shard: ``index`` of ``count``; ``count == 1`` owns everything."""

    index: int = 0
    count: int = 1

    def __post_init__(self) -> None:
        check_shard(self.index, self.count)

    @property
    def sharded(self) -> bool:
        """Return whether subjects are split at all (more than one shard)."""
        return self.count > 1

    def owns(self, namespace: str, workload: str) -> bool:
        """Return whether this shard owns ``workload`` in ``namespace``."""
        return shard_of(namespace, workload, self.count) == self.index

    def owns_pod(self, namespace: str, owners: Sequence[OwnerRef], pod: str) -> bool:
        """Return whether this shard owns a pod, by the workload that owns it."""
        return not self.sharded or self.owns(namespace, workload_of_pod(owners, pod))


class SeriesFilter:
    """Keeps the series this shard owns, and context series every shard keeps.

    Decisions are remembered per (namespace, workload-naming labels), so a steady fleet
    hashes each workload once; the memory is cleared when it reaches ``max_entries``.
    ``owned`` and ``elsewhere`` are the pods (namespace, pod) seen since the last
    :meth:`take_counts`, on this shard and on others.
    """

    def __init__(self, shard: Shard, *, max_entries: int = 200_000) -> None:
        self.shard = shard
        self._max_entries = max_entries
        self._decided: dict[tuple[str, str], bool] = {}
        self._owned: set[tuple[str, str]] = set()
        self._elsewhere: set[tuple[str, str]] = set()

    def keep(self, name: str, labels: Labels) -> bool:
        """Return whether a series belongs to this shard (or to every shard)."""
        if not self.shard.sharded:
            return True
        key = series_workload(name, labels)
        if key is None:
            return True
        owned = self._decided.get(key)
        if owned is None:
            if len(self._decided) >= self._max_entries:
                self._decided.clear()
            owned = self._decided[key] = self.shard.owns(*key)
        pod = label(labels, "exported_pod") or label(labels, "pod") or label(labels, "pod_name")
        if pod:
            (self._owned if owned else self._elsewhere).add((key[0], pod))
        return owned

    def note_owned(self, namespace: str, pod: str) -> None:
        """Count a pod this shard was given whole (its own scrape target) as owned."""
        if self.shard.sharded:
            self._owned.add((namespace, pod))

    def take_counts(self) -> tuple[int, int]:
        """Return (pods owned, pods left to other shards) seen since the last call."""
        counts = len(self._owned), len(self._elsewhere)
        self._owned, self._elsewhere = set(), set()
        return counts
