"""A fleet-wide cause through the playbook stage, Kubernetes and Slack: one thread, one scale.

Three pods of Deployment ``prod/triton`` open the same cause on the same model in one
evaluation. The shipped cpu_bottleneck playbook (post, then add a replica of the owner),
switched to act, runs as the daemon runs it: slack_sdk against the fake Slack and the
Kubernetes client against the fake API server.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests import playbook_harness
from tests.fakes.fake_slack import FakeSlack
from tests.fakes.kube import FakeKube
from tests.playbook_harness import StaticFeatures, stage
from tests.slack_delivery import attach
from tritonguard.clients.kubernetes_api import KubernetesClient
from tritonguard.clients.slack_api import SlackNotifier
from tritonguard.core.findings import IncidentEvent
from tritonguard.core.fleet_groups import FleetGroups
from tritonguard.core.guards import GuardSettings
from tritonguard.runtime.audit_store import AuditStore
from tritonguard.runtime.playbook_executor import ExecutorEnv
from tritonguard.runtime.playbook_files import load_playbook_files

PLAYBOOKS = Path(__file__).resolve().parents[2] / "playbooks"
PODS = ["triton-5d9c7b-a1", "triton-5d9c7b-b2", "triton-5d9c7b-c3"]
CHANNEL = "#tritonguard-alerts"


@pytest.fixture
async def kube() -> AsyncIterator[FakeKube]:
    """Yield a fake API server: Deployment prod/triton, 2 replicas, owning the three pods."""
    async with FakeKube() as server:
        server.add_namespace("prod")
        server.add_deployment("prod", "triton", replicas=2)
        server.add_replicaset("prod", "triton-5d9c7b", deployment="triton")
        for pod in PODS:
            server.add_pod("prod", pod, owner=("ReplicaSet", "triton-5d9c7b"))
        yield server


@pytest.fixture
async def slack() -> AsyncIterator[FakeSlack]:
    """Yield a fake Slack Web API."""
    async with FakeSlack() as server:
        yield server


def _openings(
    groups: FleetGroups, model: str, cause: str = "cpu_bottleneck"
) -> list[IncidentEvent]:
    return groups.observe(
        [
            playbook_harness.incident(
                cause, model, pod=pod, at=5000.0, opened_at=4900.0, incident_id=f"inc-{model}-{pod}"
            )
            for pod in PODS
        ]
    )


async def test_three_pods_with_one_cause_make_one_thread_and_one_scale(
    kube: FakeKube, slack: FakeSlack
) -> None:
    """One root in Slack listing the three pods; the Deployment gains one replica, not three.

    The playbook (a post and a scale of the owner) runs once for the group: the second and
    third pods are skipped as grouped, and use none of its hourly runs. A second model on the
    same pods is a group, and a thread, of its own; its scale of the same Deployment is
    covered by the first group's raise.
    """
    books = [
        b.model_copy(update={"guards": b.guards.model_copy(update={"dry_run": False})})
        for b in load_playbook_files([PLAYBOOKS / "cpu_bottleneck.yaml"])
    ]
    # As discovery names the pods' owner to the engine.
    groups = FleetGroups(workload_of=lambda ns, pod: "Deployment/triton", pods_of=lambda ns, m: 3)
    opened: list[IncidentEvent] = []
    env = ExecutorEnv(
        kube=KubernetesClient.for_host(kube.url),
        slack=SlackNotifier(slack.token, base_url=slack.base_url),
        slack_channel=CHANNEL,
        clock=lambda: 5000.0,
        features=StaticFeatures(),
    )
    on = stage(
        books,
        AuditStore(),
        settings=GuardSettings(dry_run=False),
        env=env,
        open_incidents=lambda: groups.annotate(opened),
    )
    threads = attach(on, slack, CHANNEL)
    first = _openings(groups, "resnet")
    opened += first
    records = await on.run_step(first, 5000.0)
    steps = sorted(
        (pod, r.action, r.status, r.guard)
        for e, pod in zip(first, PODS, strict=True)
        for r in records.get(e.incident_id, [])
    )
    assert steps == [
        (PODS[0], "kubernetes.scale", "ran", ""),
        (PODS[0], "slack.post", "ran", ""),
        (PODS[1], "*", "skipped", "grouped"),
        (PODS[2], "*", "skipped", "grouped"),
    ]
    deployment = kube.get_object("Deployment", "prod", "triton")
    assert deployment is not None and deployment["spec"]["replicas"] == 3
    await threads.worker.drain()
    [root] = slack.roots_in(CHANNEL)
    assert "cpu_bottleneck on prod/resnet on 3 of 3 pods" in root.text
    assert ", ".join(PODS) in str(root.blocks)
    [scaled] = slack.thread_of(root)
    assert "`kubernetes.scale`" in scaled.text and "replicas 2 → 3" in scaled.text

    second = _openings(groups, "bert")
    opened += second
    records = await on.run_step(second, 5000.0)
    lead = records[second[0].incident_id]
    assert [(r.action, r.status, r.guard) for r in lead] == [
        ("slack.post", "ran", ""),
        ("kubernetes.scale", "skipped", "covered"),
    ]
    await threads.worker.drain()
    roots = slack.roots_in(CHANNEL)
    assert len(roots) == 2
    assert "cpu_bottleneck on prod/bert on 3 of 3 pods" in roots[1].text
    deployment = kube.get_object("Deployment", "prod", "triton")
    assert deployment is not None and deployment["spec"]["replicas"] == 3
    await threads.close()
