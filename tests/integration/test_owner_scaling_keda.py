"""kubernetes.scale from the pod's owner chain, through an HPA or KEDA, via the real client.

The fake API server holds the workloads, ReplicaSets, HPAs and ScaledObjects; the playbook
names no workload, so the action must follow ownerReferences (never the pod's name). KEDA's
HPA is never edited: the fake reverts edits to it as KEDA does, so a test that edited it
would see the edit vanish.
"""

from __future__ import annotations

import pytest

from tests.fakes.kube import FakeKube
from tests.integration.test_playbooks_kube_slack import (
    PLAYBOOKS,
    book,
    env,
    seed_incident_deployment,
)
from tests.playbook_harness import StaticFeatures, handle, incident, resolved, stage
from tritonguard.clients.kubernetes_api import KubernetesClient
from tritonguard.core.guards import GuardSettings
from tritonguard.runtime.audit_store import AuditStore
from tritonguard.runtime.playbook_files import load_playbook_files

SCALE_OUT = """
name: scale
when: {causes: [cpu_bottleneck]}
guards: {dry_run: false}
steps:
  - action: kubernetes.scale
    params: {add: 1}
"""

LIVE = GuardSettings(dry_run=False)


@pytest.fixture
def kube(fake_kube: FakeKube) -> FakeKube:
    """Give the fake API server Deployment prod/triton (2 replicas) and the incident's pod."""
    return seed_incident_deployment(fake_kube)


def _hpa_spec(kube: FakeKube, name: str) -> dict[str, object]:
    hpa = kube.get_object("HorizontalPodAutoscaler", "prod", name)
    assert hpa is not None
    return dict(hpa["spec"])


async def test_a_pod_whose_name_says_nothing_scales_its_deployment(kube: FakeKube) -> None:
    """A pod named unlike its Deployment is followed Pod → ReplicaSet → Deployment and scaled."""
    kube.add_deployment("prod", "resnet-serving", replicas=1)
    kube.add_replicaset("prod", "rs-7f9", deployment="resnet-serving")
    kube.add_pod("prod", "worker-a", owner=("ReplicaSet", "rs-7f9"))
    on = stage([book(SCALE_OUT)], AuditStore(), settings=LIVE, env=env(kube, None))
    [rec] = await handle(on, incident(pod="worker-a"))
    assert rec.status == "ran", rec.reason
    assert rec.detail["workload"] == "prod/Deployment/resnet-serving"
    assert kube.replicas("Deployment", "prod", "resnet-serving") == 2
    assert kube.replicas("Deployment", "prod", "triton") == 2


async def test_a_statefulset_pod_scales_its_statefulset(kube: FakeKube) -> None:
    """A StatefulSet's pod scales the StatefulSet; the undo names the StatefulSet too."""
    kube.add_statefulset("prod", "bert", replicas=1)
    on = stage([book(SCALE_OUT)], AuditStore(), settings=LIVE, env=env(kube, None))
    [rec] = await handle(on, incident(pod="bert-0"))
    assert rec.status == "ran", rec.reason
    assert rec.detail == {"workload": "prod/StatefulSet/bert", "replicas": 2, "was": 1}
    assert kube.replicas("StatefulSet", "prod", "bert") == 2
    assert kube.get_object("Pod", "prod", "bert-1") is not None


async def test_a_bare_pod_or_a_missing_pod_is_refused_with_a_reason(kube: FakeKube) -> None:
    """No owner to scale, or no pod: the step fails saying so, and nothing is scaled."""
    kube.add_pod("prod", "loner")
    on = stage([book(SCALE_OUT)], AuditStore(), settings=LIVE, env=env(kube, None))
    [bare] = await handle(on, incident(pod="loner"))
    assert bare.status == "failed"
    assert "owned by no Deployment or StatefulSet" in bare.reason
    on = stage([book(SCALE_OUT)], AuditStore(), settings=LIVE, env=env(kube, None))
    [gone] = await handle(on, incident(pod="gone-123"))
    assert gone.status == "failed"
    assert "cannot follow the owner of pod prod/gone-123" in gone.reason
    assert "404" in gone.reason
    assert kube.replicas("Deployment", "prod", "triton") == 2


async def test_keda_owned_hpa_raises_the_scaledobject_floor_and_restores_it(
    kube: FakeKube,
) -> None:
    """KEDA over the Deployment: its minReplicaCount goes up, and back down on resolve.

    The HPA KEDA owns is never written.
    """
    kube.add_scaled_object("prod", "triton-so", "triton", min_replica_count=2, max_replica_count=8)
    on = stage(
        [book(SCALE_OUT)],
        AuditStore(),
        settings=LIVE,
        env=env(kube, None, features=StaticFeatures(back=True)),
    )
    opened = incident()
    [rec] = await handle(on, opened)
    assert rec.status == "ran", rec.reason
    assert rec.detail["scaled_object"] == "prod/triton-so"
    so = kube.get_object("ScaledObject", "prod", "triton-so")
    assert so is not None and so["spec"]["minReplicaCount"] == 3
    # KEDA's operator (the fake's) carried the floor to its HPA, which scaled the Deployment.
    assert _hpa_spec(kube, "keda-hpa-triton-so")["minReplicas"] == 3
    assert kube.replicas("Deployment", "prod", "triton") == 3
    hpa_writes = [
        r
        for r in kube.requests
        if "horizontalpodautoscalers" in r.path and r.method in ("PATCH", "PUT", "POST")
    ]
    assert hpa_writes == []
    [restore] = await handle(on, resolved(opened))
    assert (restore.action, restore.status, restore.phase) == (
        "kubernetes.scaledobject_min",
        "ran",
        "restore",
    )
    so = kube.get_object("ScaledObject", "prod", "triton-so")
    assert so is not None and so["spec"]["minReplicaCount"] == 2


async def test_keda_floor_left_unset_is_removed_again_on_restore(kube: FakeKube) -> None:
    """A ScaledObject without minReplicaCount (KEDA's default 0) gets it removed on restore."""
    kube.add_scaled_object("prod", "triton-so", "triton")
    on = stage(
        [book(SCALE_OUT)],
        AuditStore(),
        settings=LIVE,
        env=env(kube, None, features=StaticFeatures(back=True)),
    )
    opened = incident()
    [rec] = await handle(on, opened)
    assert rec.status == "ran", rec.reason
    so = kube.get_object("ScaledObject", "prod", "triton-so")
    assert so is not None and so["spec"]["minReplicaCount"] == 3
    await handle(on, resolved(opened))
    so = kube.get_object("ScaledObject", "prod", "triton-so")
    assert so is not None and "minReplicaCount" not in so["spec"]


async def test_keda_refusals_leave_everything_as_it_was(kube: FakeKube) -> None:
    """A paused ScaledObject, or a floor above maxReplicaCount, is refused with its reason.

    ``autoscaling.keda.sh/paused: "false"`` is not paused.
    """
    kube.add_scaled_object(
        "prod",
        "triton-so",
        "triton",
        min_replica_count=2,
        annotations={"autoscaling.keda.sh/paused-replicas": "2"},
    )
    on = stage([book(SCALE_OUT)], AuditStore(), settings=LIVE, env=env(kube, None))
    [paused] = await handle(on, incident())
    assert paused.status == "failed"
    assert "belongs to KEDA ScaledObject prod/triton-so" in paused.reason
    assert "is paused (annotation autoscaling.keda.sh/paused-replicas=2)" in paused.reason
    kube.add_deployment("prod", "small", replicas=2)
    kube.add_replicaset("prod", "small-1", deployment="small")
    kube.add_pod("prod", "small-1-a", owner=("ReplicaSet", "small-1"))
    kube.add_scaled_object("prod", "small-so", "small", min_replica_count=2, max_replica_count=2)
    on = stage([book(SCALE_OUT)], AuditStore(), settings=LIVE, env=env(kube, None))
    [capped] = await handle(on, incident(pod="small-1-a"))
    assert (capped.status, capped.guard) == ("skipped", "bounds")
    assert "maxReplicaCount 2" in capped.reason
    kube.add_deployment("prod", "open", replicas=1)
    kube.add_replicaset("prod", "open-1", deployment="open")
    kube.add_pod("prod", "open-1-a", owner=("ReplicaSet", "open-1"))
    kube.add_scaled_object(
        "prod", "open-so", "open", annotations={"autoscaling.keda.sh/paused": "false"}
    )
    on = stage([book(SCALE_OUT)], AuditStore(), settings=LIVE, env=env(kube, None))
    [unpaused] = await handle(on, incident(pod="open-1-a"))
    assert unpaused.status == "ran", unpaused.reason
    for name in ("triton-so", "small-so"):
        so = kube.get_object("ScaledObject", "prod", name)
        assert so is not None and so["spec"]["minReplicaCount"] == 2


async def test_hpa_min_refuses_an_hpa_keda_owns(kube: FakeKube) -> None:
    """kubernetes.hpa_min on KEDA's HPA fails with the reason and writes nothing."""
    kube.add_scaled_object("prod", "triton-so", "triton", min_replica_count=2)
    text = """
name: floor
when: {causes: [cpu_bottleneck]}
guards: {dry_run: false}
steps:
  - action: kubernetes.hpa_min
    params: {name: keda-hpa-triton-so, min_replicas: 5}
"""
    on = stage([book(text)], AuditStore(), settings=LIVE, env=env(kube, None))
    [rec] = await handle(on, incident())
    assert rec.status == "failed"
    assert "belongs to KEDA ScaledObject prod/triton-so" in rec.reason
    assert _hpa_spec(kube, "keda-hpa-triton-so")["minReplicas"] == 2


async def test_the_fake_keda_reverts_a_direct_edit_of_its_hpa(kube: FakeKube) -> None:
    """Editing KEDA's HPA through the API does not hold: the ScaledObject's counts come back."""
    kube.add_scaled_object("prod", "triton-so", "triton", min_replica_count=2, max_replica_count=4)
    client = KubernetesClient.for_host(kube.url)
    try:
        after = await client.set_hpa_min_replicas("prod", "keda-hpa-triton-so", 4)
    finally:
        client.close()
    assert (after.min_replicas, after.scaled_object) == (2, "triton-so")
    assert _hpa_spec(kube, "keda-hpa-triton-so")["minReplicas"] == 2


async def test_a_failed_verify_puts_the_keda_floor_back_once(kube: FakeKube) -> None:
    """Verify fails: the ScaledObject's floor is rolled back at once, not again on resolve."""
    kube.add_scaled_object("prod", "triton-so", "triton", min_replica_count=2, max_replica_count=8)
    text = """
name: scale
when: {causes: [cpu_bottleneck]}
guards: {dry_run: false}
steps:
  - action: kubernetes.scale
    params: {add: 1}
verify: {wait: 1m, checks: [{feature: container_cpu_saturation, below: 0.8}]}
"""
    on = stage(
        [book(text)],
        AuditStore(),
        settings=LIVE,
        env=env(kube, None, features=StaticFeatures(0.95, back=True)),
    )
    opened = incident()
    records = await handle(on, opened)
    assert [(r.action, r.status) for r in records] == [
        ("kubernetes.scale", "ran"),
        ("verify", "failed"),
        ("kubernetes.scaledobject_min", "rolled_back"),
    ]
    so = kube.get_object("ScaledObject", "prod", "triton-so")
    assert so is not None and so["spec"]["minReplicaCount"] == 2
    assert await handle(on, resolved(opened)) == []


async def test_a_plan_names_the_owner_and_what_it_would_change(kube: FakeKube) -> None:
    """In dry-run the shipped playbook's scale names the Deployment, the count and KEDA's object.

    Nothing is written.
    """
    kube.add_scaled_object("prod", "triton-so", "triton", min_replica_count=2)
    books = load_playbook_files([PLAYBOOKS / "cpu_bottleneck.yaml"])
    on = stage(books, AuditStore(), env=env(kube, None))
    records = await handle(on, incident(at=5000.0, opened_at=4900.0))  # held past 60 s
    [scale] = [r for r in records if r.action == "kubernetes.scale"]
    assert scale.status == "planned"
    assert scale.detail == {
        "workload": "prod/Deployment/triton",
        "replicas": 3,
        "scaled_object": "prod/triton-so",
    }
    writes = [r for r in kube.requests if r.method in ("PATCH", "PUT", "POST")]
    assert writes == []
