"""Overlapping incidents on pods of one workload scale it once and restore it once, last.

Without ``name`` every pod's incident resolves to the same Deployment; cooldown is per pod,
so each incident would add replicas again and file the already raised count as its undo.
The fake API server plays the Deployment, its ReplicaSet, the pods and KEDA.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from tests.fakes.kube import FakeKube
from tests.integration.test_owner_scaling_keda import LIVE, SCALE_OUT
from tests.integration.test_playbooks_kube_slack import book, env, seed_incident_deployment
from tests.playbook_harness import StaticFeatures, handle, incident, resolved, stage
from tritonguard.runtime.audit_store import AuditStore

OTHER_POD = "triton-5d9c7b-k8m2p"


@pytest.fixture
async def kube() -> AsyncIterator[FakeKube]:
    """Yield Deployment prod/triton (2 replicas) with two pods of one ReplicaSet."""
    async with FakeKube() as server:
        seed_incident_deployment(server)
        server.add_pod("prod", OTHER_POD, owner=("ReplicaSet", "triton-5d9c7b"))
        yield server


def _floor(kube: FakeKube) -> object:
    so = kube.get_object("ScaledObject", "prod", "triton-so")
    assert so is not None
    return so["spec"].get("minReplicaCount")


@pytest.mark.parametrize("last", ["first", "second"])
async def test_keda_floor_is_raised_once_and_restored_when_the_last_incident_resolves(
    kube: FakeKube, last: str
) -> None:
    """B's scale is skipped as covered by A's; the floor drops to 2 only after both resolve.

    Whichever of the two resolves first keeps the floor (the other still relies on it), and
    the last one puts back the count from before the first raise, never A's raised one.
    """
    kube.add_scaled_object("prod", "triton-so", "triton", min_replica_count=2, max_replica_count=8)
    on = stage(
        [book(SCALE_OUT)],
        AuditStore(),
        settings=LIVE,
        env=env(kube, None, features=StaticFeatures(back=True)),
    )
    a = incident(at=5000.0)
    b = incident(pod=OTHER_POD, at=5010.0)
    [ran] = await handle(on, a)
    assert ran.status == "ran", ran.reason
    [skipped] = await handle(on, b)
    assert (skipped.status, skipped.guard) == ("skipped", "covered")
    assert skipped.reason == (
        f"already scaled by incident {a.incident_id}; its restore covers this one"
    )
    assert _floor(kube) == 3
    first, second = (a, b) if last == "second" else (b, a)
    [kept] = await handle(on, resolved(first, at=5100.0))
    assert (kept.status, kept.guard, kept.phase) == ("skipped", "covered", "restore")
    assert f"incident {second.incident_id} still relies on it" in kept.reason
    assert _floor(kube) == 3
    [restore] = await handle(on, resolved(second, at=5200.0))
    assert (restore.action, restore.status) == ("kubernetes.scaledobject_min", "ran")
    assert _floor(kube) == 2


async def test_plain_replicas_are_added_once_while_the_first_incident_is_open(
    kube: FakeKube,
) -> None:
    """Without an HPA, a second pod's incident adds nothing while the first one is open.

    After the first incident resolved (and its pod's cooldown passed), a new incident on
    that pod scales again.
    """
    on = stage([book(SCALE_OUT)], AuditStore(), settings=LIVE, env=env(kube, None))
    a = incident(at=5000.0)
    [ran] = await handle(on, a)
    assert ran.status == "ran", ran.reason
    [skipped] = await handle(on, incident(pod=OTHER_POD, at=5010.0))
    assert (skipped.status, skipped.guard) == ("skipped", "covered")
    assert kube.replicas("Deployment", "prod", "triton") == 3
    await handle(on, resolved(a, at=5100.0))
    [again] = await handle(on, incident(at=6000.0))
    assert again.status == "ran", again.reason
    assert kube.replicas("Deployment", "prod", "triton") == 4


async def test_an_undo_adopted_under_another_replicas_incident_covers_nothing(
    kube: FakeKube,
) -> None:
    """A rollback undo filed under an incident this store never saw open blocks no scale.

    Approvals handed over from another replica bring the undos of their earlier steps,
    filed under that replica's incident id; those must not hold the workload for good.
    """
    store = AuditStore()
    store.add_undo(
        "inc-of-another-replica",
        "scale",
        "kubernetes.scale",
        {"kind": "Deployment", "name": "triton", "namespace": "prod", "replicas": 2},
        False,
    )
    on = stage([book(SCALE_OUT)], store, settings=LIVE, env=env(kube, None))
    [rec] = await handle(on, incident())
    assert rec.status == "ran", rec.reason
    assert kube.replicas("Deployment", "prod", "triton") == 3


SCALE_AND_VERIFY = """
name: scale
when: {causes: [cpu_bottleneck]}
guards: {dry_run: false}
steps:
  - action: kubernetes.scale
    params: {add: 1}
  - action: verify
    params: {wait: 10, checks: [{feature: queue_share, below: 1}]}
"""


async def test_a_failed_verify_keeps_a_floor_another_incident_relies_on(kube: FakeKube) -> None:
    """A's verify fails after B's scale was covered by A's: the floor stays until B resolves."""
    kube.add_scaled_object("prod", "triton-so", "triton", min_replica_count=2, max_replica_count=8)
    gate = asyncio.Event()
    verifying = [asyncio.Event(), asyncio.Event()]  # set as A's, then B's verify starts

    async def sleep(seconds: float) -> None:
        next(e for e in verifying if not e.is_set()).set()
        await gate.wait()  # every verify waits until both incidents have scaled

    store = AuditStore()
    features = StaticFeatures(value=5.0, back=True)
    on = stage(
        [book(SCALE_AND_VERIFY)],
        store,
        settings=LIVE,
        env=env(kube, None, features=features, sleep=sleep),
    )
    a, b = incident(at=5000.0), incident(pod=OTHER_POD, at=5010.0)
    first = asyncio.create_task(handle(on, a))
    await verifying[0].wait()
    assert _floor(kube) == 3
    second = asyncio.create_task(handle(on, b))
    await verifying[1].wait()
    assert [r.guard for r in store.decisions(b.incident_id)] == ["covered"]
    gate.set()
    ran_a, _ = await asyncio.gather(first, second)
    [kept] = [r for r in ran_a if r.phase == "rollback"]
    assert (kept.status, kept.guard) == ("skipped", "covered")
    assert _floor(kube) == 3
    await handle(on, resolved(b, at=5200.0))
    assert _floor(kube) == 2
