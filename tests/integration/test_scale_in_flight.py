"""Two incidents opening in one evaluation on pods of one Deployment raise it once, not twice.

Incidents of two models (two fleet groups) on the pods of one Deployment run their playbooks
side by side, one work chain per subject. The covered check used to see only finished
scales, so both read the same count and both raised it. The fake API server plays the
Deployment, its ReplicaSet, the pods and KEDA; the real Kubernetes client talks to it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.fakes.kube import FakeKube
from tests.integration.test_owner_scaling_keda import LIVE, SCALE_OUT
from tests.integration.test_playbooks_kube_slack import book, env, seed_incident_pod
from tests.playbook_harness import StaticFeatures, incident, resolved, stage
from tritonguard.core.action_records import ActionRecord
from tritonguard.runtime.audit_store import AuditStore

POD = "triton-5d9c7b-x2x9q"
OTHER_POD = "triton-5d9c7b-k8m2p"


@pytest.fixture
async def kube() -> AsyncIterator[FakeKube]:
    """Yield Deployment prod/triton (2 replicas) with two pods of one ReplicaSet."""
    async with FakeKube() as server:
        server.add_namespace("prod")
        server.add_deployment("prod", "triton", replicas=2)
        seed_incident_pod(server)
        server.add_pod("prod", OTHER_POD, owner=("ReplicaSet", "triton-5d9c7b"))
        yield server


def _floor(kube: FakeKube) -> object:
    so = kube.get_object("ScaledObject", "prod", "triton-so")
    assert so is not None
    return so["spec"].get("minReplicaCount")


def _one_of_each(records: dict[str, list[ActionRecord]]) -> tuple[str, ActionRecord, str]:
    """Return (the raising incident, the covered record, the covered incident)."""
    [(first, [ran]), (second, [covered])] = sorted(
        records.items(), key=lambda kv: kv[1][0].status != "ran"
    )
    assert ran.status == "ran", ran.reason
    assert (covered.status, covered.guard) == ("skipped", "covered"), covered.reason
    return first, covered, second


@pytest.mark.parametrize("pods", [(POD, POD), (POD, OTHER_POD)], ids=["same-pod", "two-pods"])
async def test_two_models_opening_at_once_raise_the_keda_floor_once(
    kube: FakeKube, pods: tuple[str, str]
) -> None:
    """One raise (2 → 3), one skip as covered naming it; the floor drops once, after both.

    resnet and bert open cpu_bottleneck in the same evaluation, on one pod or on two pods of
    the Deployment. Whichever reaches the write first raises; the other waits for it and is
    covered by it, holding the restore to the count from before the raise.
    """
    kube.add_scaled_object("prod", "triton-so", "triton", min_replica_count=2, max_replica_count=8)
    store = AuditStore()
    on = stage(
        [book(SCALE_OUT)],
        store,
        settings=LIVE,
        env=env(kube, None, features=StaticFeatures(back=True)),
    )
    a = incident(model="resnet", pod=pods[0], at=5000.0)
    b = incident(model="bert", pod=pods[1], at=5000.0)
    first, covered, second = _one_of_each(await on.run_step([a, b], 5000.0))
    assert covered.reason == (f"already scaled by incident {first}; its restore covers this one")
    assert _floor(kube) == 3
    by_id = {a.incident_id: a, b.incident_id: b}
    records = await on.run_step([resolved(by_id[first], at=5100.0)], 5100.0)
    [kept] = records[first]
    assert (kept.status, kept.guard, kept.phase) == ("skipped", "covered", "restore")
    assert f"incident {second} still relies on it" in kept.reason
    assert _floor(kube) == 3
    records = await on.run_step([resolved(by_id[second], at=5200.0)], 5200.0)
    [restore] = records[second]
    assert (restore.action, restore.status, restore.phase) == (
        "kubernetes.scaledobject_min",
        "ran",
        "restore",
    )
    assert _floor(kube) == 2
    restores = [r for r in store.decisions() if r.phase == "restore" and r.status == "ran"]
    assert len(restores) == 1


async def test_two_models_opening_at_once_add_one_replica(kube: FakeKube) -> None:
    """Without an HPA the Deployment goes 2 → 3 once, not 2 → 3 → 4 (nor 3 twice)."""
    on = stage([book(SCALE_OUT)], AuditStore(), settings=LIVE, env=env(kube, None))
    a = incident(model="resnet", at=5000.0)
    b = incident(model="bert", pod=OTHER_POD, at=5000.0)
    first, covered, _ = _one_of_each(await on.run_step([a, b], 5000.0))
    assert f"incident {first}" in covered.reason
    assert kube.replicas("Deployment", "prod", "triton") == 3
