"""deploy/overlays/shards: a StatefulSet whose ordinals are the shards, each with its own Lease."""

from __future__ import annotations

import copy
import os
from collections import Counter
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest

from tests.unit.test_deploy_manifests import DEPLOY, K8S_VERSION, _one, _render
from tritonguard.settings import Settings, load_settings


@pytest.fixture(scope="module")
def objects() -> list[dict[str, Any]]:
    """Render the shards overlay with kubectl kustomize."""
    return _render(DEPLOY / "overlays" / "shards")


def _pod_settings(
    objects: list[dict[str, Any]], ordinal: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Settings:
    """Load one StatefulSet pod's settings: the ConfigMap, literal env, and its own name."""
    for name in list(os.environ):
        if name.startswith("TRITONGUARD_"):
            monkeypatch.delenv(name)
    (container,) = _one(objects, "StatefulSet")["spec"]["template"]["spec"]["containers"]
    for var in container["env"]:
        if "value" in var:
            monkeypatch.setenv(var["name"], var["value"])
        elif var["valueFrom"].get("fieldRef", {}).get("fieldPath") == "metadata.name":
            monkeypatch.setenv(var["name"], f"tritonguard-{ordinal}")
    path = tmp_path / "config.yaml"
    path.write_text(_one(objects, "ConfigMap", "tritonguard-config")["data"]["config.yaml"])
    return load_settings(path)


def test_the_overlay_validates_and_runs_a_statefulset_instead_of_the_deployment(
    objects: list[dict[str, Any]],
) -> None:
    """Every object passes strict validation; the Deployment became a StatefulSet, Parallel."""
    for obj in objects:
        kubernetes_validate.validate(obj, K8S_VERSION, strict=True)
    assert not [o for o in objects if o["kind"] == "Deployment"]
    spec = _one(objects, "StatefulSet")["spec"]
    assert spec["podManagementPolicy"] == "Parallel"
    # Its headless Service names each pod, in the pods' namespace, selecting exactly them.
    headless = _one(objects, "Service", spec["serviceName"])
    assert headless["spec"]["clusterIP"] == "None"
    assert (
        headless["metadata"]["namespace"] == _one(objects, "StatefulSet")["metadata"]["namespace"]
    )
    assert headless["spec"]["selector"] == spec["selector"]["matchLabels"]
    assert headless["spec"]["selector"].items() <= spec["template"]["metadata"]["labels"].items()


def test_the_pod_template_is_the_base_s_plus_the_shard_count(
    objects: list[dict[str, Any]],
) -> None:
    """Only TRITONGUARD_SHARD__COUNT is added: image, probes, volumes and RBAC stay the base's."""
    base = _one(_render(DEPLOY / "base"), "Deployment")["spec"]["template"]
    sharded = copy.deepcopy(_one(objects, "StatefulSet")["spec"]["template"])
    env = sharded["spec"]["containers"][0]["env"]
    [count] = [v for v in env if v["name"] == "TRITONGUARD_SHARD__COUNT"]
    env.remove(count)
    assert sharded == base


def test_every_ordinal_is_a_shard_on_a_lease_the_role_grants(
    objects: list[dict[str, Any]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each pod loads as shard ordinal % count; each shard gets as many replicas; RBAC fits.

    The Role lets the pods read and renew exactly the shards' Leases, by name.
    """
    replicas = _one(objects, "StatefulSet")["spec"]["replicas"]
    pods = [_pod_settings(objects, i, tmp_path, monkeypatch) for i in range(replicas)]
    count = pods[0].shard.count
    assert count > 1 and replicas % count == 0
    assert Counter(p.shard.index for p in pods) == dict.fromkeys(range(count), replicas // count)
    role = _one(objects, "Role", "tritonguard-leader")
    renew = next(r for r in role["rules"] if "update" in r["verbs"])
    assert sorted(renew["resourceNames"]) == sorted({p.kube.lease_name for p in pods})
    assert all(p.kube.leader_election for p in pods)


def test_the_disruption_budget_keeps_a_replica_of_every_shard(
    objects: list[dict[str, Any]],
) -> None:
    """One pod at a time may be evicted, so no shard loses both its replicas to a drain."""
    spec = _one(objects, "PodDisruptionBudget")["spec"]
    assert spec == {
        "maxUnavailable": 1,
        "selector": _one(objects, "StatefulSet")["spec"]["selector"],
    }
