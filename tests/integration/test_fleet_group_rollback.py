"""A fleet group pod relying on another's raise never runs the playbook's own rollback.

With ``max_runs_per_hour: 1`` the first pod of a group scales Deployment prod/triton 2→3
and its verify passes; the second pod of the same group relies on that raise (its scale is
covered). When the second pod's verify fails, its custom ``rollback:`` would set the
Deployment to 1 replica under the first pod, which still relies on the raise. Kubernetes
and Slack are the fake servers, driven by the real clients.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests import playbook_harness
from tests.fakes.fake_slack import FakeSlack
from tests.fakes.kube import FakeKube
from tests.integration.test_playbooks_kube_slack import env
from tests.playbook_harness import StaticFeatures, stage
from tests.slack_delivery import attach
from tritonguard.actions.registry import catalog
from tritonguard.core.findings import IncidentEvent, Subject
from tritonguard.core.fleet_groups import FleetGroups
from tritonguard.core.guards import GuardSettings
from tritonguard.core.playbook_model import load_playbooks_text
from tritonguard.runtime.audit_store import AuditStore

PODS = ["triton-5d9c7b-a1", "triton-5d9c7b-b2"]

ROLLING_BACK = """
name: scale-out-or-shrink
when: {causes: [cpu_bottleneck]}
guards:
  dry_run: false
  cooldown: 30m
  max_runs_per_hour: 1
  bounds: {replicas: {min: 1, max: 8}}
steps:
  - action: kubernetes.scale
    params: {add: 1}
verify: {wait: 60s, checks: [{feature: container_cpu_saturation, below: 0.8}]}
rollback:
  - action: kubernetes.scale
    params: {name: triton, replicas: 1}
escalate:
  - action: slack.post
"""


class _PerPod(StaticFeatures):
    """Features where only the first pod recovers: the second pod's verify fails."""

    def feature_value(self, subject: Subject, name: str, now: float) -> float | None:
        """Return a saturation below the check for the first pod and above it otherwise."""
        return 0.3 if subject.pod == PODS[0] else 0.95


@pytest.fixture
async def kube() -> AsyncIterator[FakeKube]:
    """Yield Deployment prod/triton with 2 replicas and the two pods."""
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


def _opening(pod: str) -> IncidentEvent:
    return playbook_harness.incident(
        "cpu_bottleneck", "resnet", pod=pod, at=5000.0, opened_at=4900.0, incident_id=f"inc-{pod}"
    )


async def test_a_relying_pods_failed_verify_leaves_the_groups_raise(
    kube: FakeKube, slack: FakeSlack
) -> None:
    """The relying pod's rollback scale is recorded skipped as covered; replicas stay 3.

    Its escalation still tells people; only the change the rollback would make is held.
    """
    groups = FleetGroups(
        workload_of=lambda ns, pod: f"Deployment/{pod.rsplit('-', 2)[0]}",
        pods_of=lambda ns, model: 2,
    )
    open_now: dict[str, IncidentEvent] = {}
    on = stage(
        load_playbooks_text(ROLLING_BACK, "inline.yaml", catalog()),
        AuditStore(),
        settings=GuardSettings(dry_run=False),
        env=env(kube, slack, features=_PerPod()),
        open_incidents=lambda: groups.annotate(list(open_now.values())),
    )
    threads = attach(on, slack)
    events = groups.observe([_opening(pod) for pod in PODS])
    open_now.update({e.incident_id: e for e in events})
    first = await on.run_step(events, 5000.0)
    assert kube.replicas("Deployment", "prod", "triton") == 3
    assert [(r.action, r.status) for r in first[f"inc-{PODS[0]}"]] == [
        ("kubernetes.scale", "ran"),
        ("verify", "ran"),
    ]
    second = {**first, **await on.run_step([], 5005.0)}
    theirs = [(r.action, r.phase, r.status, r.guard) for r in second[f"inc-{PODS[1]}"]]
    assert ("kubernetes.scale", "step", "skipped", "covered") in theirs
    assert ("verify", "step", "failed", "") in theirs
    assert ("kubernetes.scale", "rollback", "skipped", "covered") in theirs
    assert ("slack.post", "escalate", "ran", "") in theirs
    [held] = [r for r in second[f"inc-{PODS[1]}"] if r.phase == "rollback"]
    assert f"inc-{PODS[0]}" in held.reason
    assert kube.replicas("Deployment", "prod", "triton") == 3
    await threads.close()
