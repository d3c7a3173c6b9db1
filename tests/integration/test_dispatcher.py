"""The dispatcher with real Kubernetes and Slack clients against the lab's fake API servers."""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.fakes.fake_kube import FakeKube
from tests.fakes.fake_slack import FakeSlack
from tritonguard.actions.registry import catalog
from tritonguard.clients.kubernetes_api import KubernetesClient
from tritonguard.clients.slack_api import SlackNotifier
from tritonguard.core.findings import Evidence, Fix, IncidentEvent, Subject
from tritonguard.core.guards import GuardSettings
from tritonguard.core.playbook_model import Playbook, load_playbooks_text
from tritonguard.runtime.audit_store import AuditStore
from tritonguard.runtime.dispatcher import DispatchEnv, Dispatcher, load_playbook_files

_ids = itertools.count(1)
PLAYBOOKS = Path(__file__).resolve().parents[2] / "playbooks"


@pytest.fixture
async def kube() -> AsyncIterator[FakeKube]:
    """Yield a fake API server with one Deployment of two replicas."""
    async with FakeKube() as server:
        server.add_namespace("prod")
        server.add_deployment("prod", "triton", replicas=2)
        yield server


@pytest.fixture
async def slack() -> AsyncIterator[FakeSlack]:
    """Yield a fake Slack Web API."""
    async with FakeSlack() as server:
        yield server


def book(text: str) -> Playbook:
    """Return one playbook loaded from YAML text."""
    return load_playbooks_text(text, "inline.yaml", catalog())[0]


def incident(
    cause: str = "cpu_bottleneck", model: str = "resnet", kind: str = "opened"
) -> IncidentEvent:
    """Return an incident on pod triton-5d9c7b-x2x9q of Deployment ``triton``."""
    return IncidentEvent(
        event=kind,  # type: ignore[arg-type]
        incident_id=f"inc-{next(_ids)}",
        cause=cause,
        subject=Subject("prod", model, "triton-5d9c7b-x2x9q"),
        at=5000.0,
        confidence=0.8,
        summary="container CPU at its quota while the GPU idles",
        evidence={"cpu": Evidence(0.97, "ratio", 60, "container CPU / quota")},
        fix=Fix("raise the CPU limit", config_snippet="resources: {limits: {cpu: 4}}"),
        opened_at=4900.0,
    )


def env(kube: FakeKube | None, slack: FakeSlack | None, **kw: object) -> DispatchEnv:
    """Return a dispatch environment using the real clients against the fakes."""
    return DispatchEnv(
        kube=KubernetesClient.for_host(kube.url) if kube else None,
        slack=SlackNotifier(slack.token, base_url=slack.base_url) if slack else None,
        slack_channel="#tritonguard-alerts",
        clock=lambda: 5000.0,
        **kw,  # type: ignore[arg-type]
    )


async def test_default_cpu_playbook_scales_the_owning_deployment_and_posts(
    kube: FakeKube, slack: FakeSlack
) -> None:
    """The shipped cpu_bottleneck playbook, switched to act, adds a replica and posts to Slack."""
    books = [
        b.model_copy(update={"guards": b.guards.model_copy(update={"dry_run": False})})
        for b in load_playbook_files([PLAYBOOKS / "cpu_bottleneck.yaml"])
    ]
    disp = Dispatcher(
        books, AuditStore(), settings=GuardSettings(dry_run=False), env=env(kube, slack)
    )
    records = await disp.handle(incident())
    assert [(r["action"], r["status"]) for r in records] == [
        ("slack.post", "ran"),
        ("kubernetes.scale", "ran"),
    ]
    deployment = kube.get_object("Deployment", "prod", "triton")
    assert deployment is not None and deployment["spec"]["replicas"] == 3
    posted = slack.messages_in("#tritonguard-alerts")
    assert len(posted) == 1 and "cpu_bottleneck on prod/resnet" in posted[0].text


async def test_scale_through_an_hpa_raises_min_replicas(kube: FakeKube) -> None:
    """When an HPA owns the Deployment the action raises minReplicas instead of fighting it."""
    kube.add_hpa("prod", "triton-hpa", "triton", min_replicas=2, max_replicas=6)
    text = """
name: scale
when: {causes: [cpu_bottleneck]}
guards: {dry_run: false}
steps:
  - action: kubernetes.scale
    params: {name: "{{ pod.rsplit('-', 2)[0] }}", add: 1}
"""
    disp = Dispatcher(
        [book(text)], AuditStore(), settings=GuardSettings(dry_run=False), env=env(kube, None)
    )
    records = await disp.handle(incident())
    assert records[0]["status"] == "ran", records[0]["reason"]
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
    disp = Dispatcher(
        [book(text)], AuditStore(), settings=GuardSettings(dry_run=False), env=env(kube, None)
    )
    records = await disp.handle(incident())
    assert [(r["status"], r.get("guard")) for r in records] == [("skipped", "bounds")]
    deployment = kube.get_object("Deployment", "prod", "triton")
    assert deployment is not None and deployment["spec"]["replicas"] == 2


async def test_failed_verify_rolls_back_the_scale_and_escalates(
    kube: FakeKube, slack: FakeSlack
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

    disp = Dispatcher(
        [book(text)],
        AuditStore(),
        settings=GuardSettings(dry_run=False),
        env=env(kube, slack, sleep=sleep, feature_value=lambda s, n, t: 0.95),
    )
    records = await disp.handle(incident())
    assert [(r["action"], r["status"]) for r in records] == [
        ("kubernetes.scale", "ran"),
        ("verify", "failed"),
        ("kubernetes.scale", "rolled_back"),
        ("slack.post", "ran"),
    ]
    assert waited == [60.0]
    deployment = kube.get_object("Deployment", "prod", "triton")
    assert deployment is not None and deployment["spec"]["replicas"] == 2
    assert "did not help" in slack.messages_in("#tritonguard-alerts")[-1].text


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
    disp = Dispatcher(
        [book(text)],
        store,
        settings=GuardSettings(dry_run=False),
        env=env(kube, None, is_fresh=lambda s, t: False),
    )
    records = await disp.handle(incident())
    assert [(r["status"], r.get("guard")) for r in records] == [("skipped", "stale")]
    assert store.decisions()[0]["reason"].startswith("no fresh data")
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
    disp = Dispatcher([book(first), book(second)], store)
    planned = await disp.handle(incident("batching_delay"))
    assert [r["status"] for r in planned] == ["planned"]
    blocked = await disp.handle(incident("too_few_instances"))
    assert [(r["playbook"], r.get("guard")) for r in blocked] == [("second", "reload_cooldown")]


async def test_template_failure_is_recorded_not_raised() -> None:
    """Evidence the incident lacks makes the step fail with a one-line reason; nothing crashes."""
    text = """
name: t
when: {causes: [cpu_bottleneck]}
steps:
  - action: slack.post
    params: {text: "queue share {{ evidence.queue_share }}"}
"""
    records = await Dispatcher([book(text)], AuditStore()).handle(incident())
    assert records[0]["status"] == "failed"
    assert "queue_share" in records[0]["reason"] and "\n" not in records[0]["reason"]


async def test_slack_diagnosis_carries_the_numbers_and_what_else_matched(slack: FakeSlack) -> None:
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
    disp = Dispatcher(
        [book(text)], AuditStore(), settings=GuardSettings(dry_run=False), env=env(None, slack)
    )
    records = await disp.handle(ev)
    assert [r["status"] for r in records] == ["ran"], records
    [posted] = slack.messages_in("#tritonguard-alerts")
    fields = next(b["fields"] for b in posted.blocks if "fields" in b)
    texts = [f["text"] for f in fields]
    assert texts[0] == "*cpu*\n0.97 over 60 s\n_container CPU / quota_"
    assert "*queue_share*\n0.82 over 30 s" in texts[1]
    assert texts[2] == "*note*\nunknown\n_a &lt;tag&gt; &amp; more_"
    context = posted.blocks[-1]["elements"][0]["text"]
    assert ev.incident_id in context and "also matched: too_few_instances" in context
    assert any("resources:" in b.get("text", {}).get("text", "") for b in posted.blocks)
