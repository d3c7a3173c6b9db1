"""A fleet-wide cause through the playbook stage, Kubernetes and Slack: one thread, one scale.

Three pods of Deployment ``prod/triton`` open the same cause on the same model in one
evaluation. A playbook like the shipped cpu_bottleneck one (post, then add a replica of the
owner), acting, runs as the daemon runs it: slack_sdk against the fake Slack and the
Kubernetes client against the fake API server.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests import playbook_harness
from tests.fakes.fake_slack import FakeSlack
from tests.fakes.kube import FakeKube
from tests.integration.playbook_fakes import seed_triton_deployment
from tests.playbook_harness import StaticFeatures, stage
from tests.slack_delivery import attach
from tritonguard.actions.registry import catalog
from tritonguard.clients.kubernetes_api import KubernetesClient
from tritonguard.clients.slack_api import SlackNotifier
from tritonguard.core.findings import IncidentEvent
from tritonguard.core.fleet_groups import FleetGroups
from tritonguard.core.guards import GuardSettings
from tritonguard.core.playbook_model import load_playbooks_text
from tritonguard.runtime.audit_store import AuditStore
from tritonguard.runtime.playbook_executor import ExecutorEnv

PODS = ["triton-5d9c7b-a1", "triton-5d9c7b-b2", "triton-5d9c7b-c3"]
CHANNEL = "#tritonguard-alerts"


@pytest.fixture
async def kube() -> AsyncIterator[FakeKube]:
    """Yield a fake API server: Deployment prod/triton, 2 replicas, owning the three pods."""
    async with FakeKube() as server:
        seed_triton_deployment(server)
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


SCALE = """
name: cpu-scale-out
when: {causes: [cpu_bottleneck]}
guards: {dry_run: false, cooldown: 30m, max_runs_per_hour: 10}
steps:
  - action: slack.post
  - action: kubernetes.scale
    params: {add: 1}
"""


async def test_three_pods_with_one_cause_make_one_thread_and_one_scale(
    kube: FakeKube, slack: FakeSlack
) -> None:
    """One root in Slack listing the three pods; the Deployment gains one replica, not three.

    The group's pods run the playbook one at a time: the first raises the Deployment, each
    of the others finds the raise and skips its own as covered. A second model on the same
    pods is a group, and a thread, of its own; its scales are covered by the first raise.
    """
    books = load_playbooks_text(SCALE, "inline.yaml", catalog())
    groups = FleetGroups(pods_of=lambda ns, model: 3)
    opened: dict[str, IncidentEvent] = {}
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
        open_incidents=lambda: groups.annotate(list(opened.values())),
    )
    threads = attach(on, slack, CHANNEL)

    def replicas() -> int:
        deployment = kube.get_object("Deployment", "prod", "triton")
        assert deployment is not None
        return int(deployment["spec"]["replicas"])

    async def step(events: list[IncidentEvent], now: float) -> list[tuple[str, str, str]]:
        records = await on.run_step(events, now)
        pods = {e.incident_id: e.subject.pod for e in [*events, *opened.values()]}
        return sorted(
            (pods[i], r.action, f"{r.status}:{r.guard}" if r.guard else r.status)
            for i, recs in records.items()
            for r in recs
        )

    first = _openings(groups, "resnet")
    opened.update((e.incident_id, e) for e in first)
    assert await step(first, 5000.0) == [
        (PODS[0], "kubernetes.scale", "ran"),
        (PODS[0], "slack.post", "ran"),
    ]
    # One pod at a time: each finds the raise on file and skips its own as covered.
    for now, pod in zip((5005.0, 5010.0), PODS[1:], strict=True):
        assert await step([], now) == [
            (pod, "kubernetes.scale", "skipped:covered"),
            (pod, "slack.post", "ran"),
        ]
    assert await step([], 5015.0) == []
    assert replicas() == 3
    await threads.worker.drain()
    [root] = slack.roots_in(CHANNEL)
    assert "cpu_bottleneck on prod/resnet on 3 of 3 pods" in root.text
    assert ", ".join(PODS) in str(root.blocks)
    # The first pod's scale is the thread's one reply; the covered ones add nothing.
    [scaled] = slack.thread_of(root)
    assert "`kubernetes.scale`" in scaled.text and "replicas 2 → 3" in scaled.text

    second = _openings(groups, "bert")
    opened.update((e.incident_id, e) for e in second)
    ran = await step(second, 5020.0)
    ran += await step([], 5025.0) + await step([], 5030.0)
    assert sorted(ran) == sorted(
        [(pod, "kubernetes.scale", "skipped:covered") for pod in PODS]
        + [(pod, "slack.post", "ran") for pod in PODS]
    )
    await threads.worker.drain()
    roots = slack.roots_in(CHANNEL)
    assert len(roots) == 2
    assert "cpu_bottleneck on prod/bert on 3 of 3 pods" in roots[1].text
    # Its own pod's covered scale is said once in its thread; its other pods' are not.
    [covered] = slack.thread_of(roots[1])
    assert "skipped" in covered.text and "`kubernetes.scale`" in covered.text
    assert replicas() == 3
    await threads.close()
