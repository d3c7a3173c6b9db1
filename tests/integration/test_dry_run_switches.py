"""The two dry-run switches of the shipped deploy and its overlays, end to end through a stage.

The settings come from deploy/base/config.yaml with each overlay's environment, as the pod
loads them; the playbook is the shipped cpu_bottleneck one with its own dry-run off, so its
notification and its remediation each follow their own switch. Kubernetes and Slack are the
fake API servers behind the real clients (kubernetes, slack_sdk).
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import yaml

from tests.fakes.fake_slack import FakeSlack
from tests.fakes.kube import FakeKube
from tests.integration.test_playbooks_kube_slack import env, incident, seed_incident_deployment
from tests.playbook_harness import handle, stage
from tests.slack_delivery import attach
from tritonguard.core.guards import GuardSettings
from tritonguard.core.playbook_model import Playbook
from tritonguard.runtime.audit_store import AuditStore
from tritonguard.runtime.playbook_files import load_playbook_files
from tritonguard.settings import load_settings

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
PATCHES = {"dry-run": "dry-run.yaml", "act": "act.yaml"}


@pytest.fixture
async def kube() -> AsyncIterator[FakeKube]:
    """Yield a fake API server with one Deployment of two replicas."""
    async with FakeKube() as server:
        seed_incident_deployment(server)
        yield server


@pytest.fixture
async def slack() -> AsyncIterator[FakeSlack]:
    """Yield a fake Slack Web API."""
    async with FakeSlack() as server:
        yield server


def deploy_guards(monkeypatch: pytest.MonkeyPatch, overlay: str | None = None) -> GuardSettings:
    """Return the guard settings of the shipped config under ``overlay``'s environment patch."""
    for name in list(os.environ):
        if name.startswith("TRITONGUARD_"):
            monkeypatch.delenv(name)
    if overlay is not None:
        patch = yaml.safe_load((DEPLOY / "overlays" / overlay / PATCHES[overlay]).read_text())
        for var in patch["spec"]["template"]["spec"]["containers"][0]["env"]:
            monkeypatch.setenv(var["name"], var["value"])
    return load_settings(DEPLOY / "base" / "config.yaml").guard_settings()


def acting_cpu_playbook() -> list[Playbook]:
    """Return the shipped cpu_bottleneck playbook (slack.post, then kubernetes.scale), acting."""
    return [
        b.model_copy(update={"guards": b.guards.model_copy(update={"dry_run": False})})
        for b in load_playbook_files([ROOT / "playbooks" / "cpu_bottleneck.yaml"])
    ]


async def test_shipped_deploy_notifies_for_real_and_plans_remediation(
    kube: FakeKube, slack: FakeSlack, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Shipped config: slack.post runs and reaches Slack; kubernetes.scale is only planned.

    The audit trail says dry-run per step, and the thread shows the scale as a plan.
    """
    on = stage(
        acting_cpu_playbook(),
        AuditStore(),
        settings=deploy_guards(monkeypatch),
        env=env(kube, slack),
    )
    threads = attach(on, slack)
    records = await handle(on, incident())
    assert [(r.action, r.status, r.dry_run) for r in records] == [
        ("slack.post", "ran", False),
        ("kubernetes.scale", "planned", True),
    ]
    deployment = kube.get_object("Deployment", "prod", "triton")
    assert deployment is not None and deployment["spec"]["replicas"] == 2
    await threads.worker.drain()
    [root] = slack.roots_in("#tritonguard-alerts")
    assert "cpu_bottleneck on prod/resnet" in root.text
    assert "Dry-run — what would be done" in str(root.blocks)
    await threads.close()


async def test_dry_run_overlay_notifies_nothing_and_acts_on_nothing(
    kube: FakeKube, slack: FakeSlack, monkeypatch: pytest.MonkeyPatch
) -> None:
    """deploy/overlays/dry-run: both steps are planned; Slack and the Deployment are untouched."""
    on = stage(
        acting_cpu_playbook(),
        AuditStore(),
        settings=deploy_guards(monkeypatch, "dry-run"),
        env=env(kube, slack),
    )
    threads = attach(on, slack)
    records = await handle(on, incident())
    assert [(r.action, r.status, r.dry_run) for r in records] == [
        ("slack.post", "planned", True),
        ("kubernetes.scale", "planned", True),
    ]
    deployment = kube.get_object("Deployment", "prod", "triton")
    assert deployment is not None and deployment["spec"]["replicas"] == 2
    await threads.worker.drain()
    assert slack.messages_in("#tritonguard-alerts") == []
    await threads.close()


async def test_act_overlay_notifies_and_acts(
    kube: FakeKube, slack: FakeSlack, monkeypatch: pytest.MonkeyPatch
) -> None:
    """deploy/overlays/act: both steps run; the Deployment gains a replica, Slack says so."""
    on = stage(
        acting_cpu_playbook(),
        AuditStore(),
        settings=deploy_guards(monkeypatch, "act"),
        env=env(kube, slack),
    )
    threads = attach(on, slack)
    records = await handle(on, incident())
    assert [(r.action, r.status, r.dry_run) for r in records] == [
        ("slack.post", "ran", False),
        ("kubernetes.scale", "ran", False),
    ]
    deployment = kube.get_object("Deployment", "prod", "triton")
    assert deployment is not None and deployment["spec"]["replicas"] == 3
    await threads.worker.drain()
    [root] = slack.roots_in("#tritonguard-alerts")
    assert "*What was done*" in str(root.blocks)
    await threads.close()


async def test_a_playbook_in_its_own_dry_run_plans_its_notification_too(
    kube: FakeKube, slack: FakeSlack, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The shipped playbook as shipped (guards.dry_run: true) plans both steps, even under act."""
    books = load_playbook_files([ROOT / "playbooks" / "cpu_bottleneck.yaml"])
    on = stage(
        books, AuditStore(), settings=deploy_guards(monkeypatch, "act"), env=env(kube, slack)
    )
    records = await handle(on, incident())
    assert [(r.action, r.status) for r in records] == [
        ("slack.post", "planned"),
        ("kubernetes.scale", "planned"),
    ]


async def test_remediation_for_real_with_notifications_planned(
    kube: FakeKube, slack: FakeSlack
) -> None:
    """Notifications planned, remediation live: the scale runs and nothing goes to Slack."""
    on = stage(
        acting_cpu_playbook(),
        AuditStore(),
        settings=GuardSettings(notify_dry_run=True, remediate_dry_run=False),
        env=env(kube, slack),
    )
    threads = attach(on, slack)
    records = await handle(on, incident())
    assert [(r.action, r.status, r.dry_run) for r in records] == [
        ("slack.post", "planned", True),
        ("kubernetes.scale", "ran", False),
    ]
    deployment = kube.get_object("Deployment", "prod", "triton")
    assert deployment is not None and deployment["spec"]["replicas"] == 3
    await threads.worker.drain()
    assert slack.messages_in("#tritonguard-alerts") == []
    await threads.close()
