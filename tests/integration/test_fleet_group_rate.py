"""The shipped cpu_bottleneck playbook on a fleet group: the rate limit starves no pod of it.

Its ``max_runs_per_hour: 2`` counts each pod's run. Four pods of one Deployment (one fleet
group) run it one at a time: the first raises the KEDA floor, the others are covered by
that raise. A pod the rate stops must still hold the raise's restore, or the floor drops
when the pods that ran resolve, under the pods still broken. The rate limit itself must
still stop a third distinct raise in the hour. Kubernetes and Slack are the fake servers,
driven by the real clients.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests import playbook_harness
from tests.fakes.fake_slack import FakeSlack
from tests.fakes.kube import FakeKube
from tests.integration.test_playbooks_kube_slack import PLAYBOOKS, env
from tests.playbook_harness import StaticFeatures, resolved, stage
from tests.slack_delivery import attach
from tritonguard.core.findings import IncidentEvent
from tritonguard.core.fleet_groups import FleetGroups
from tritonguard.core.guards import GuardSettings
from tritonguard.core.playbook_model import Playbook
from tritonguard.runtime.audit_store import AuditStore
from tritonguard.runtime.playbook_files import load_playbook_files
from tritonguard.runtime.playbook_stage import PlaybookStage

PODS = ["triton-5d9c7b-a1", "triton-5d9c7b-b2", "triton-5d9c7b-c3", "triton-5d9c7b-d4"]
LIVE = GuardSettings(dry_run=False)


@pytest.fixture
async def kube() -> AsyncIterator[FakeKube]:
    """Yield Deployments prod/triton (2 replicas, the four pods) and prod/other-{a,b}."""
    async with FakeKube() as server:
        server.add_namespace("prod")
        server.add_deployment("prod", "triton", replicas=2)
        server.add_replicaset("prod", "triton-5d9c7b", deployment="triton")
        for pod in PODS:
            server.add_pod("prod", pod, owner=("ReplicaSet", "triton-5d9c7b"))
        for name in ("other-a", "other-b"):
            server.add_deployment("prod", name, replicas=2)
            server.add_replicaset("prod", f"{name}-7f8e", deployment=name)
            server.add_pod("prod", f"{name}-7f8e-p1", owner=("ReplicaSet", f"{name}-7f8e"))
        yield server


@pytest.fixture
async def slack() -> AsyncIterator[FakeSlack]:
    """Yield a fake Slack Web API."""
    async with FakeSlack() as server:
        yield server


def _shipped() -> list[Playbook]:
    """Return the shipped cpu_bottleneck playbook, switched to act (its guards as shipped)."""
    [shipped] = load_playbook_files([PLAYBOOKS / "cpu_bottleneck.yaml"])
    assert shipped.guards.max_runs_per_hour == 2
    return [
        shipped.model_copy(update={"guards": shipped.guards.model_copy(update={"dry_run": False})})
    ]


def _opening(pod: str, model: str = "resnet") -> IncidentEvent:
    return playbook_harness.incident(
        "cpu_bottleneck", model, pod=pod, at=5000.0, opened_at=4900.0, incident_id=f"inc-{pod}"
    )


def _keda(kube: FakeKube) -> None:
    kube.add_scaled_object("prod", "triton-so", "triton", min_replica_count=2, max_replica_count=8)


def _floor(kube: FakeKube) -> object:
    so = kube.get_object("ScaledObject", "prod", "triton-so")
    assert so is not None
    return so["spec"].get("minReplicaCount")


class _Fleet:
    """The engine's side: open incidents annotated with their fleet groups, one step each."""

    def __init__(self, kube: FakeKube, slack: FakeSlack) -> None:
        # Discovery names each pod's owner, as it does in the daemon.
        self.groups = FleetGroups(
            workload_of=lambda ns, pod: f"Deployment/{pod.rsplit('-', 2)[0]}",
            pods_of=lambda ns, model: 4,
        )
        self.open: dict[str, IncidentEvent] = {}
        self.store = AuditStore()
        self.stage: PlaybookStage = stage(
            _shipped(),
            self.store,
            settings=LIVE,
            env=env(kube, slack, features=StaticFeatures(back=True)),
            open_incidents=lambda: self.groups.annotate(list(self.open.values())),
        )

    async def step(self, events: list[IncidentEvent], now: float) -> list[tuple[str, str, str]]:
        """Feed one evaluation; return (pod, action, status[:guard]) of what it recorded."""
        events = self.groups.observe(events)
        for e in events:
            if e.event == "resolved":
                self.open.pop(e.incident_id, None)
            else:
                self.open[e.incident_id] = e
        pods = {e.incident_id: e.subject.pod for e in [*events, *self.open.values()]}
        records = await self.stage.run_step(events, now)
        return sorted(
            (pods[i], r.action, f"{r.status}:{r.guard}" if r.guard else r.status)
            for i, recs in records.items()
            for r in recs
        )


async def test_four_pods_raise_the_floor_once_and_restore_it_after_the_last(
    kube: FakeKube, slack: FakeSlack
) -> None:
    """One raise; the third and fourth pod, past the rate, are covered by it, not skipped.

    Each of the four holds the restore, so the floor stays at 3 while any pod is open and
    drops to 2 once, when the last one resolves.
    """
    _keda(kube)
    fleet = _Fleet(kube, slack)
    threads = attach(fleet.stage, slack)
    openings = [_opening(pod) for pod in PODS]
    assert await fleet.step(openings, 5000.0) == [
        (PODS[0], "kubernetes.scale", "ran"),
        (PODS[0], "slack.post", "ran"),
    ]
    for now, pod in zip((5005.0, 5010.0, 5015.0), PODS[1:], strict=True):
        assert await fleet.step([], now) == [
            (pod, "kubernetes.scale", "skipped:covered"),
            (pod, "slack.post", "ran"),
        ]
    assert await fleet.step([], 5020.0) == []
    assert _floor(kube) == 3
    for now, event in zip((5100.0, 5110.0, 5120.0), openings[:3], strict=True):
        assert await fleet.step([resolved(event, at=now)], now) == [
            (event.subject.pod, "kubernetes.scaledobject_min", "skipped:covered")
        ]
        assert _floor(kube) == 3
    assert await fleet.step([resolved(openings[3], at=5130.0)], 5130.0) == [
        (PODS[3], "kubernetes.scaledobject_min", "ran")
    ]
    assert _floor(kube) == 2
    await threads.close()


async def test_the_rate_still_stops_a_third_distinct_raise_in_the_hour(
    kube: FakeKube, slack: FakeSlack
) -> None:
    """other-a and other-b are raised; the triton group, third, raises nothing on any pod.

    No pod of that group ran the playbook, so none relies on a raise: each is skipped for
    the rate and the floor stays. An hour after the first two runs the group's pods run.
    """
    _keda(kube)
    fleet = _Fleet(kube, slack)
    threads = attach(fleet.stage, slack)
    for now, name in ((5000.0, "other-a"), (5005.0, "other-b")):
        ran = await fleet.step([_opening(f"{name}-7f8e-p1", model=name)], now)
        assert (f"{name}-7f8e-p1", "kubernetes.scale", "ran") in ran
        assert kube.replicas("Deployment", "prod", name) == 3
    openings = [_opening(pod) for pod in PODS[:2]]
    assert await fleet.step(openings, 5010.0) == [
        (PODS[0], "*", "skipped:rate"),
        (PODS[1], "*", "skipped:rate"),
    ]
    assert await fleet.step([], 5015.0) == []
    assert _floor(kube) == 2
    ran = await fleet.step([], 5000.0 + 3600.0)
    assert (PODS[0], "kubernetes.scale", "ran") in ran
    assert _floor(kube) == 3
    await threads.close()


async def test_a_pod_relying_on_its_group_makes_no_raise_of_its_own(
    kube: FakeKube, slack: FakeSlack
) -> None:
    """Past the rate, a pod whose group's raise no longer covers it changes nothing.

    Without an HPA the first pod's raise is held only while its incident is open. After it
    resolved, a pod joining the group relies on the second pod's run, but no raise covers
    it: its scale is skipped for the rate and the Deployment keeps 3 replicas.
    """
    fleet = _Fleet(kube, slack)
    threads = attach(fleet.stage, slack)
    first, second = (_opening(pod) for pod in PODS[:2])
    assert (PODS[0], "kubernetes.scale", "ran") in await fleet.step([first, second], 5000.0)
    assert (PODS[1], "kubernetes.scale", "skipped:covered") in await fleet.step([], 5005.0)
    await fleet.step([resolved(first, at=5010.0)], 5010.0)
    late = await fleet.step([_opening(PODS[2])], 5015.0)
    assert (PODS[2], "kubernetes.scale", "skipped:rate") in late
    assert kube.replicas("Deployment", "prod", "triton") == 3
    await threads.close()


async def test_an_open_group_uses_the_rate_of_other_workloads_once(
    kube: FakeKube, slack: FakeSlack
) -> None:
    """After the four pods' runs (one raise), other-a may still raise; other-b, third, not.

    While the group is open its runs after the first are covered and count once for other
    workloads; they still count for its own pods, and the third distinct raise is stopped.
    """
    _keda(kube)
    fleet = _Fleet(kube, slack)
    threads = attach(fleet.stage, slack)
    await fleet.step([_opening(pod) for pod in PODS], 5000.0)
    for now in (5005.0, 5010.0, 5015.0):
        await fleet.step([], now)
    assert _floor(kube) == 3
    ran = await fleet.step([_opening("other-a-7f8e-p1", model="other-a")], 5020.0)
    assert ("other-a-7f8e-p1", "kubernetes.scale", "ran") in ran
    assert kube.replicas("Deployment", "prod", "other-a") == 3
    assert await fleet.step([_opening("other-b-7f8e-p1", model="other-b")], 5025.0) == [
        ("other-b-7f8e-p1", "*", "skipped:rate")
    ]
    assert kube.replicas("Deployment", "prod", "other-b") == 2
    await threads.close()
