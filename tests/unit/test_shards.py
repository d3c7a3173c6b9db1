"""Shard assignment: stable across processes, spread evenly, one workload's pods on one shard."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tritonguard.core.pod_targets import OwnerRef
from tritonguard.core.samples import make_labels
from tritonguard.core.shards import (
    MAX_SHARDS,
    WORKLOAD_KEY_CHARS,
    SeriesFilter,
    Shard,
    ShardError,
    series_workload,
    shard_of,
    workload_from_pod_name,
    workload_of_pod,
)

SAFE = "bcdfghjklmnpqrstvwxz2456789"
NAMES = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-", min_size=1, max_size=63).filter(
    lambda s: s[0] != "-" and s[-1] != "-"
)


def _workloads(n: int) -> list[tuple[str, str]]:
    rng = random.Random(10)
    return [
        (f"team-{rng.randrange(40)}", f"model-{i}-{rng.choice(['a', 'bert', 'resnet50'])}")
        for i in range(n)
    ]


def _deployment_pod(rng: random.Random, deployment: str) -> tuple[str, str]:
    """Name a rollout's ReplicaSet and a pod of it as the controllers and the API server do.

    A ReplicaSet is ``<deployment>-<template hash>``; its pod's generated name is cut to 63.
    """
    replicaset = f"{deployment}-" + "".join(rng.choice(SAFE) for _ in range(rng.randint(6, 10)))
    base = f"{replicaset}-"[:58]
    return replicaset, base + "".join(rng.choice(SAFE) for _ in range(5))


def test_the_assignment_is_the_same_in_another_process_with_another_hash_seed() -> None:
    """A fresh interpreter with a different PYTHONHASHSEED assigns every workload alike."""
    workloads = _workloads(200)
    here = [shard_of(ns, wl, 7) for ns, wl in workloads]
    code = (
        "import json, sys\n"
        "from tritonguard.core.shards import shard_of\n"
        "pairs = json.load(sys.stdin)\n"
        "print(json.dumps([shard_of(ns, wl, 7) for ns, wl in pairs]))\n"
    )
    for seed in ("1", "4242"):
        out = subprocess.run(
            [sys.executable, "-c", code],
            input=json.dumps(workloads),
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, "PYTHONHASHSEED": seed},
        )
        assert json.loads(out.stdout) == here


def test_pinned_assignments_do_not_change_between_releases() -> None:
    """A few assignments fixed once: changing the digest or the hash would move every workload.

    Every shard of a running fleet must agree, including during a rolling upgrade where old
    and new daemons run side by side; a change here is a breaking change to say in the notes.
    """
    assert [shard_of("ml", f"triton-{i}", 4) for i in range(8)] == [3, 3, 1, 2, 0, 2, 3, 1]
    assert shard_of("ml", "triton-0", 1) == 0


@pytest.mark.parametrize("count", [2, 3, 4, 8, 16])
def test_1000_workloads_spread_evenly_across_shards(count: int) -> None:
    """Each shard owns its fair share of 1,000 workloads within four binomial deviations."""
    workloads = _workloads(1000)
    per_shard = [0] * count
    for ns, wl in workloads:
        per_shard[shard_of(ns, wl, count)] += 1
    mean = len(workloads) / count
    bound = 4 * (mean * (1 - 1 / count)) ** 0.5
    assert all(abs(n - mean) <= bound for n in per_shard), per_shard


def test_one_more_shard_moves_only_its_share_of_workloads() -> None:
    """Going from 4 to 5 shards moves about a fifth of the workloads, all onto the new shard."""
    workloads = _workloads(1000)
    moved = [(ns, wl) for ns, wl in workloads if shard_of(ns, wl, 4) != shard_of(ns, wl, 5)]
    assert all(shard_of(ns, wl, 5) == 4 for ns, wl in moved)
    assert 150 <= len(moved) <= 250


@given(deployment=NAMES, seed=st.integers(0, 2**32))
def test_every_pod_of_a_deployment_lands_on_its_deployment_s_shard(
    deployment: str, seed: int
) -> None:
    """Owner chain, unresolved ReplicaSet, pod name alone and Prometheus labels all agree.

    Pod names are made as the API server makes them, cut to 63 characters for long names.
    """
    rng = random.Random(seed)
    want = shard_of("ml", deployment, 5)
    for _ in range(4):  # pods of several rollouts
        rs, pod = _deployment_pod(rng, deployment)
        chain = (OwnerRef("ReplicaSet", rs), OwnerRef("Deployment", deployment))
        assert shard_of("ml", workload_of_pod(chain, pod), 5) == want
        assert shard_of("ml", workload_of_pod(chain[:1], pod), 5) == want
        assert shard_of("ml", workload_from_pod_name(pod), 5) == want
        found = series_workload("nv_inference_count", make_labels({"namespace": "ml", "pod": pod}))
        assert found is not None
        assert shard_of(*found, 5) == want


@given(statefulset=NAMES.filter(lambda s: len(s) <= 52), ordinal=st.integers(0, 999))
def test_every_pod_of_a_statefulset_lands_on_its_statefulset_s_shard(
    statefulset: str, ordinal: int
) -> None:
    """``<name>-<ordinal>`` names the StatefulSet, with or without the owner chain."""
    pod = f"{statefulset}-{ordinal}"
    want = shard_of("ml", statefulset, 3)
    assert shard_of("ml", workload_of_pod((OwnerRef("StatefulSet", statefulset),), pod), 3) == want
    assert shard_of("ml", workload_from_pod_name(pod), 3) == want


def test_a_pod_without_owner_is_its_own_workload_and_the_namespace_counts() -> None:
    """A bare pod is keyed by its name; the same workload in two namespaces is two keys."""
    assert workload_of_pod((), "debug-triton") == "debug-triton"
    spread = {shard_of(f"ns-{i}", "triton", 8) for i in range(64)}
    assert len(spread) > 1


def test_long_names_are_keyed_by_their_first_46_characters() -> None:
    """Two names that differ only past the cut share a shard (the cut is what pods keep)."""
    stem = "x" * WORKLOAD_KEY_CHARS
    assert all(
        shard_of("ml", stem + tail, 9) == shard_of("ml", stem, 9) for tail in ("a", "-b", "zz")
    )


def test_context_series_belong_to_every_shard_and_subjects_to_one() -> None:
    """Node and GPU series without a pod are shared; a Triton outside Kubernetes is its own."""
    assert series_workload("node_cpu_seconds_total", make_labels({"instance": "n1:9100"})) is None
    assert series_workload("DCGM_FI_DEV_GPU_UTIL", make_labels({"gpu": "0"})) is None
    outside = make_labels({"instance": "10.0.0.5:8002", "model": "m"})
    assert series_workload("nv_inference_count", outside) == ("", "10.0.0.5:8002")
    dcgm = make_labels({"exported_pod": "tr-0", "exported_namespace": "ml", "pod": "dcgm-x"})
    assert series_workload("DCGM_FI_DEV_GPU_UTIL", dcgm) == ("ml", "tr")
    ksm = make_labels({"namespace": "ml", "deployment": "triton-a", "instance": "ksm:8080"})
    assert series_workload("kube_deployment_spec_replicas", ksm) == ("ml", "triton-a")
    scraped = make_labels({"namespace": "ml", "pod": "p", "replicaset": "triton-a-7d9f8c6b5"})
    assert series_workload("nv_inference_count", scraped) == ("ml", "triton-a")


def test_the_series_filter_keeps_its_own_and_counts_pods_on_each_side() -> None:
    """Of two shards' filters each keeps exactly one of two pods' series, and all context."""
    pods = {"triton-a-7d9f8c6b5-x2k4q": "triton-a", "resnet-0": "resnet"}
    assert shard_of("ml", "triton-a", 2) != shard_of("ml", "resnet", 2)
    filters = [SeriesFilter(Shard(i, 2)) for i in range(2)]
    for f in filters:
        kept = [
            pod
            for pod in pods
            if f.keep("nv_inference_count", make_labels({"namespace": "ml", "pod": pod}))
        ]
        assert [pods[p] for p in kept] == [
            w for w in pods.values() if shard_of("ml", w, 2) == f.shard.index
        ]
        assert f.keep("node_load1", make_labels({"instance": "n1:9100"}))
        assert f.take_counts() == (1, 1)
        assert f.take_counts() == (0, 0)


def test_one_shard_keeps_everything() -> None:
    """Unsharded (count 1), every series is kept and nothing is hashed."""
    f = SeriesFilter(Shard())
    assert f.keep("nv_inference_count", make_labels({"namespace": "ml", "pod": "p-0"}))
    assert Shard().owns_pod("ml", (), "anything")


@pytest.mark.parametrize(
    ("index", "count", "says"),
    [
        (2, 2, "between 0 and 1"),
        (-1, 3, "between 0 and 2"),
        (0, 0, f"between 1 and {MAX_SHARDS}"),
        (0, MAX_SHARDS + 1, f"between 1 and {MAX_SHARDS}"),
    ],
)
def test_an_impossible_shard_is_refused_with_what_to_set(index: int, count: int, says: str) -> None:
    """An index outside the count, or a count out of range, is refused naming the setting."""
    with pytest.raises(ShardError, match=says):
        Shard(index, count)
