"""The playbook stage with real Kubernetes and Slack clients against the fake API servers."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from tests import playbook_harness
from tests.fakes.fake_slack import FakeSlack
from tests.fakes.kube import FakeKube
from tests.integration.playbook_fakes import CHANNEL, seed_triton_deployment
from tests.playbook_harness import StaticFeatures, handle, stage
from tests.slack_delivery import attach
from tritonguard.actions.registry import catalog
from tritonguard.clients.kubernetes_api import KubernetesClient
from tritonguard.clients.slack_api import SlackNotifier
from tritonguard.core.findings import Evidence, IncidentEvent
from tritonguard.core.guards import GuardSettings
from tritonguard.core.playbook_model import Playbook, load_playbooks_text
from tritonguard.runtime.audit_store import AuditStore
from tritonguard.runtime.playbook_executor import ExecutorEnv
from tritonguard.runtime.playbook_files import load_playbook_files

PLAYBOOKS = Path(__file__).resolve().parents[2] / "playbooks"


def seed_incident_pod(server: FakeKube) -> FakeKube:
    """Give Deployment prod/triton the pod the harness's incidents are on, via a ReplicaSet.

    The pod's name is not the Deployment's plus a suffix by construction: only its
    ownerReferences say whose it is, as kubernetes.scale reads them. Return the server.
    """
    server.add_replicaset("prod", "triton-5d9c7b", deployment="triton")
    server.add_pod("prod", "triton-5d9c7b-x2x9q", owner=("ReplicaSet", "triton-5d9c7b"))
    return server


def seed_incident_deployment(server: FakeKube) -> FakeKube:
    """Give the fake API server Deployment prod/triton (2 replicas) and the incident's pod."""
    return seed_incident_pod(seed_triton_deployment(server))


@pytest.fixture
def kube(fake_kube: FakeKube) -> FakeKube:
    """Give the fake API server one Deployment of two replicas and the incident's pod."""
    return seed_incident_deployment(fake_kube)


def book(text: str) -> Playbook:
    """Return one playbook loaded from YAML text."""
    return load_playbooks_text(text, "inline.yaml", catalog())[0]


def incident(cause: str = "cpu_bottleneck") -> IncidentEvent:
    """Return an incident on pod triton-5d9c7b-x2x9q of Deployment ``triton``, open 100 s."""
    return playbook_harness.incident(cause, at=5000.0, opened_at=4900.0)


async def _no_wait(seconds: float) -> None:
    return None


def env(
    kube: FakeKube | None,
    slack: FakeSlack | None,
    *,
    features: StaticFeatures | None = None,
    sleep: Callable[[float], Awaitable[None]] = _no_wait,
) -> ExecutorEnv:
    """Return an executor environment using the real clients against the fakes."""
    return ExecutorEnv(
        kube=KubernetesClient.for_host(kube.url) if kube else None,
        slack=SlackNotifier(slack.token, base_url=slack.base_url) if slack else None,
        slack_channel=CHANNEL,
        clock=lambda: 5000.0,
        features=features or StaticFeatures(),
        sleep=sleep,
    )


async def test_default_cpu_playbook_scales_the_owning_deployment_and_posts(
    kube: FakeKube, fake_slack: FakeSlack
) -> None:
    """The shipped cpu_bottleneck playbook, switched to act, adds a replica and posts to Slack."""
    books = [
        b.model_copy(update={"guards": b.guards.model_copy(update={"dry_run": False})})
        for b in load_playbook_files([PLAYBOOKS / "cpu_bottleneck.yaml"])
    ]
    on = stage(
        books, AuditStore(), settings=GuardSettings(dry_run=False), env=env(kube, fake_slack)
    )
    threads = attach(on, fake_slack)
    records = await handle(on, incident())
    assert [(r.action, r.status) for r in records] == [
        ("slack.post", "ran"),
        ("kubernetes.scale", "ran"),
    ]
    deployment = kube.get_object("Deployment", "prod", "triton")
    assert deployment is not None and deployment["spec"]["replicas"] == 3
    await threads.worker.drain()
    [root] = fake_slack.roots_in(CHANNEL)
    assert "cpu_bottleneck on prod/resnet" in root.text
    [scaled] = fake_slack.thread_of(root)
    assert "`kubernetes.scale`" in scaled.text and "replicas 2 → 3" in scaled.text
    await threads.close()


async def test_scale_through_an_hpa_raises_min_replicas(kube: FakeKube) -> None:
    """When an HPA owns the Deployment the action raises minReplicas instead of fighting it."""
    kube.add_hpa("prod", "triton-hpa", "triton", min_replicas=2, max_replicas=6)
    text = """
name: scale
when: {causes: [cpu_bottleneck]}
guards: {dry_run: false}
steps:
  - action: kubernetes.scale
    params: {add: 1}
"""
    on = stage(
        [book(text)], AuditStore(), settings=GuardSettings(dry_run=False), env=env(kube, None)
    )
    records = await handle(on, incident())
    assert records[0].status == "ran", records[0].reason
    hpa = kube.get_object("HorizontalPodAutoscaler", "prod", "triton-hpa")
    assert hpa is not None and hpa["spec"]["minReplicas"] == 3


async def test_replica_bounds_refuse_a_scale_beyond_max(kube: FakeKube) -> None:
    """guards.bounds.replicas stops a scale-out; the Deployment keeps its replicas."""
    text = """
name: scale
when: {causes: [cpu_bottleneck]}
guards: {dry_run: false, bounds: {replicas: {max: 2}}}
steps:
  - action: kubernetes.scale
    params: {name: triton, add: 1}
"""
    on = stage(
        [book(text)], AuditStore(), settings=GuardSettings(dry_run=False), env=env(kube, None)
    )
    records = await handle(on, incident())
    assert [(r.status, r.guard) for r in records] == [("skipped", "bounds")]
    deployment = kube.get_object("Deployment", "prod", "triton")
    assert deployment is not None and deployment["spec"]["replicas"] == 2


async def test_failed_verify_rolls_back_the_scale_and_escalates(
    kube: FakeKube, fake_slack: FakeSlack
) -> None:
    """Verify fails → the scale is undone (replicas back to 2) and Slack gets the escalation."""
    text = """
name: scale
when: {causes: [cpu_bottleneck]}
guards: {dry_run: false}
steps:
  - action: kubernetes.scale
    params: {name: triton, add: 2}
verify: {wait: 1m, checks: [{feature: container_cpu_saturation, below: 0.8}]}
escalate:
  - action: slack.post
    params: {text: "scaling {{ model }} did not help"}
"""
    waited: list[float] = []

    async def sleep(seconds: float) -> None:
        waited.append(seconds)

    on = stage(
        [book(text)],
        AuditStore(),
        settings=GuardSettings(dry_run=False),
        env=env(kube, fake_slack, sleep=sleep, features=StaticFeatures(0.95)),
    )
    threads = attach(on, fake_slack)
    records = await handle(on, incident())
    assert [(r.action, r.status) for r in records] == [
        ("kubernetes.scale", "ran"),
        ("verify", "failed"),
        ("kubernetes.scale", "rolled_back"),
        ("slack.post", "ran"),
    ]
    assert waited == [60.0]
    deployment = kube.get_object("Deployment", "prod", "triton")
    assert deployment is not None and deployment["spec"]["replicas"] == 2
    await threads.worker.drain()
    [root] = fake_slack.roots_in(CHANNEL)
    assert "did not help" in str(root.blocks)
    await threads.close()


async def test_stale_data_blocks_every_action(kube: FakeKube) -> None:
    """With no fresh data for the subject nothing runs, and the audit trail says why."""
    text = """
name: scale
when: {causes: [cpu_bottleneck]}
guards: {dry_run: false}
steps:
  - action: kubernetes.scale
    params: {name: triton, add: 1}
"""
    store = AuditStore()
    on = stage(
        [book(text)],
        store,
        settings=GuardSettings(dry_run=False),
        env=env(kube, None, features=StaticFeatures(fresh=False)),
    )
    records = await handle(on, incident())
    assert [(r.status, r.guard) for r in records] == [("skipped", "stale")]
    assert store.decisions()[0].reason.startswith("no fresh data")
    deployment = kube.get_object("Deployment", "prod", "triton")
    assert deployment is not None and deployment["spec"]["replicas"] == 2


async def test_reload_by_one_playbook_cools_down_every_playbook_on_the_model(
    tmp_path: Path,
) -> None:
    """A reload counts toward the cooldown of other playbooks on the same model (no loops)."""
    first = """
name: first
when: {causes: [batching_delay]}
steps:
  - action: triton.update_config
    params: {set: {dynamic_batching.max_queue_delay_microseconds: 500}}
"""
    second = first.replace("first", "second").replace("batching_delay", "too_few_instances")
    store = AuditStore(tmp_path / "audit.sqlite3")
    on = stage([book(first), book(second)], store)
    planned = await handle(on, incident("batching_delay"))
    assert [r.status for r in planned] == ["planned"]
    blocked = await handle(on, incident("too_few_instances"))
    assert [(r.playbook, r.guard) for r in blocked] == [("second", "reload_cooldown")]


async def test_template_failure_is_recorded_not_raised() -> None:
    """Evidence the incident lacks makes the step fail with a one-line reason; nothing crashes."""
    text = """
name: t
when: {causes: [cpu_bottleneck]}
steps:
  - action: slack.post
    params: {text: "queue share {{ evidence.queue_share }}"}
"""
    records = await handle(stage([book(text)], AuditStore()), incident())
    assert records[0].status == "failed"
    assert "queue_share" in records[0].reason and "\n" not in records[0].reason


async def test_slack_diagnosis_carries_the_numbers_and_what_else_matched(
    fake_slack: FakeSlack,
) -> None:
    """The posted blocks pass Slack's limits and hold evidence with windows, fix, incident id."""
    text = """
name: tell
when: {causes: [cpu_bottleneck]}
guards: {dry_run: false}
steps:
  - action: slack.post
"""
    ev = incident()
    ev.evidence["queue_share"] = Evidence(0.82, "ratio", 30, "Δqueue_us / Δrequest_us")
    ev.evidence["note"] = Evidence(None, "ms", 0, "a <tag> & more")
    ev.secondary.append("too_few_instances")
    on = stage(
        [book(text)], AuditStore(), settings=GuardSettings(dry_run=False), env=env(None, fake_slack)
    )
    threads = attach(on, fake_slack)
    records = await handle(on, ev)
    assert [r.status for r in records] == ["ran"], records
    await threads.worker.drain()
    await threads.close()
    [posted] = fake_slack.messages_in(CHANNEL)
    fields = next(b["fields"] for b in posted.blocks if "fields" in b)
    texts = [f["text"] for f in fields]
    assert texts[0] == "*Cpu*\n×0.97 over 60 s\n_container CPU / quota_"
    assert texts[1] == "*Note*\nunknown\n_a &lt;tag&gt; &amp; more_"
    assert not any("queue_share" in t for t in texts), "the breakdown shows the queue share"
    context = next(b["elements"][0]["text"] for b in posted.blocks if b["type"] == "context")
    assert ev.incident_id in context and "also matched: too_few_instances" in context
    assert any("resources:" in b.get("text", {}).get("text", "") for b in posted.blocks)
